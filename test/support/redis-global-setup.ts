/**
 * Vitest global setup: one real Redis (Debian's redis-server) on a free loopback port for the whole
 * run, without persistence, stopped at teardown. Tests read its URL with `inject('redisUrl')`
 * (see `test/support/harness/redis.ts`, which fails loudly when it is missing).
 *
 * A missing redis-server does not fail the whole run here: tests that do not need Redis still run,
 * and every test that does fails with `redisUnavailable` as its message.
 */
import type { TestProject } from 'vitest/node';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `redis://127.0.0.1:<port>` of the run's Redis, or '' when it could not start. */
    redisUrl: string;
    /** Why Redis is not available ('' when it is). */
    redisUnavailable: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: RedisServer | undefined;
  let failure = '';
  try {
    server = await startRedisServer();
  } catch (error) {
    failure =
      `Redis is needed by this test but could not start: ${error instanceof Error ? error.message : String(error)}. ` +
      `Install it with "apt-get update && apt-get install -y redis-server" (scripts/test.sh does it).`;
  }
  project.provide('redisUrl', server === undefined ? '' : server.url);
  project.provide('redisUnavailable', failure);

  return async () => {
    await server?.stop();
  };
}
