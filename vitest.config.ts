import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (`main`) and ESM (`module`) builds. Node, and so Apollo Server and
    // @apollo/subgraph, load the CJS one; Vite would hand test code the ESM one, and two copies of
    // graphql break `instanceof GraphQLError` and schema checks. Everyone gets the CJS build.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Integration tests start real servers on port 0; two cores run them well in two workers.
    pool: 'forks',
    maxWorkers: 2,
    // One real redis-server and one real OpenID provider for the run; tests read their
    // coordinates with inject('redisUrl') and inject('issuer').
    globalSetup: ['test/support/redis-global-setup.ts', 'test/support/identity-global-setup.ts'],
    // A test that prints to console.error or console.warn unexpectedly fails.
    setupFiles: ['test/support/console-guard.ts'],
  },
});
