/**
 * The run's real Redis for the tests (started once by test/support/redis-global-setup.ts): its URL,
 * a key prefix per test so tests never meet in it, and plain connections.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { inject } from 'vitest';

/**
 * The URL of the run's real Redis (started by `test/support/redis-global-setup.ts`). Throws with the
 * reason when it is not running, so a test that needs Redis fails instead of skipping silently.
 */
export function requireRedisUrl(): string {
  const url = inject('redisUrl');
  if (url === '') throw new Error(inject('redisUnavailable') || 'Redis was not started by the global setup');
  return url;
}

/** A key and channel prefix of its own, so tests running side by side in one Redis never meet. */
export function uniqueRedisPrefix(): string {
  return `test:${randomUUID()}:`;
}

/** A plain ioredis connection to the run's Redis; the caller quits it. */
export function connectRedis(): Redis {
  return new Redis(requireRedisUrl(), { maxRetriesPerRequest: 2 });
}
