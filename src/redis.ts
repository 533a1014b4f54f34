/**
 * One way of opening a Redis connection (the event pipeline, the rate limits), so that every one
 * logs its errors instead of crashing the process and never logs its URL.
 */
import { Redis } from 'ioredis';
import type { Logger } from './logger.ts';

/**
 * Opens an ioredis 5 connection to `url` whose errors are logged instead of crashing the process.
 * The URL is never logged: it may hold a password.
 *
 * Commands fail after a few reconnection attempts rather than queueing for ever, so a webhook whose
 * publication cannot reach Redis is refused within the upstream's 5 s and retried later.
 */
export function openRedisConnection(url: string, role: string, logger: Logger): Redis {
  const connection = new Redis(url, { maxRetriesPerRequest: 2, connectionName: `facade-${role}` });
  let lastLogged = 0;
  connection.on('error', (error: Error) => {
    // ioredis emits an error per reconnection attempt; one line every few seconds is enough.
    if (Date.now() - lastLogged < 5000) return;
    lastLogged = Date.now();
    logger.error('redis connection error', { role, error: error.message });
  });
  return connection;
}

/** How long a start waits for Redis before going on without it (Redis may come later, or never). */
const REDIS_READY_WAIT_MS = 2_000;

/** Resolves once `redis` is ready, or after `timeoutMs`: a Redis that is down does not stop the start. */
export async function whenRedisReady(redis: Redis, timeoutMs = REDIS_READY_WAIT_MS): Promise<void> {
  if (redis.status === 'ready') return;
  // Not events.once: it rejects on the 'error' events an unreachable Redis emits.
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    redis.once('ready', done);
  });
}
