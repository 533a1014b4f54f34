import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Integration tests start real servers on port 0; two cores run them well in two workers.
    pool: 'forks',
    maxWorkers: 2,
    // One real redis-server for the run; tests read its URL with inject('redisUrl').
    globalSetup: ['test/support/redis-global-setup.ts'],
  },
});
