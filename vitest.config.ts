import { readdirSync, readFileSync } from 'node:fs';
import { configDefaults, defineConfig } from 'vitest/config';
import { PROCESS_TEST_TIMEOUT_MS } from './test/support/load-budget.ts';

/**
 * The test files that start processes of their own: those that import the process helpers of
 * test/support/ (processes.ts, npm-start.ts) or start the compose twin. They form a project of their
 * own, with the timeouts such tests need on a loaded machine; see below.
 */
const STARTS_PROCESSES = /from '[./]*(?:\/support\/(?:processes|npm-start)|\/scripts\/compose-twin)\.ts'/;
const processTests = readdirSync('test', { recursive: true, encoding: 'utf8' })
  .filter((path) => path.endsWith('.test.ts'))
  .map((path) => `test/${path}`)
  .filter((path) => STARTS_PROCESSES.test(readFileSync(path, 'utf8')))
  .sort();

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (`main`) and ESM (`module`) builds. Node, and so Apollo Server and
    // @apollo/subgraph, load the CJS one; Vite would hand test code the ESM one, and two copies of
    // graphql break `instanceof GraphQLError` and schema checks. Everyone gets the CJS build.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    // Integration tests start real servers on port 0; two cores run them well in two workers.
    pool: 'forks',
    maxWorkers: 2,
    // One real redis-server and one real OpenID provider for the run; tests read their
    // coordinates with inject('redisUrl') and inject('issuer'). The run's mark on every process a
    // test starts, and at the end the end of any such process still running.
    globalSetup: [
      'test/support/redis-global-setup.ts',
      'test/support/identity-global-setup.ts',
      'test/support/process-global-setup.ts',
    ],
    // A test that prints to console.error or console.warn unexpectedly fails. Every process a test
    // starts carries the run's mark.
    setupFiles: ['test/support/console-guard.ts', 'test/support/processes.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'in-process',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...processTests],
          testTimeout: 20_000,
          hookTimeout: 30_000,
        },
      },
      {
        // Tests that wait on processes they start: their readiness waits stretch with the machine's
        // load (test/support/load-budget.ts), so their timeout is the most such a test may take at
        // the most stretch; not a longer timeout for everything. One file at a time: two `npm start`s
        // at once only slow each other, while the other worker runs the in-process tests.
        extends: true,
        test: {
          name: 'processes',
          include: processTests,
          testTimeout: PROCESS_TEST_TIMEOUT_MS,
          hookTimeout: PROCESS_TEST_TIMEOUT_MS,
          fileParallelism: false,
        },
      },
    ],
  },
});
