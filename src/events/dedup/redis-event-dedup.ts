/**
 * De-duplication of webhook deliveries shared by every replica, in Redis: two replicas receiving
 * the same event at once must still publish it once.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  dedupTimings,
  type ClaimResult,
  type EventDeduplicator,
  type EventDeduplicatorOptions,
} from './event-dedup.ts';

/** Options of {@link createRedisEventDeduplicator}. */
export interface RedisEventDeduplicatorOptions extends EventDeduplicatorOptions {
  /** A connection in normal (not subscriber) mode. Closed by `close()` only when `ownsClient`. */
  client: Redis;
  /** Prefix of every key, so several deployments can share one Redis. Default `facade:`. */
  keyPrefix?: string;
  /** Whether `close()` quits `client`. Default false. */
  ownsClient?: boolean;
}

const SEEN = 'seen';
// Deletes the claim only if it is still ours: after an expiry another replica may hold a fresh
// claim on the same id, and releasing that one would let a third delivery publish a duplicate.
const RELEASE_OWN_CLAIM = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/**
 * An {@link EventDeduplicator} in Redis, shared by every replica: the claim is one
 * `SET key <token> NX PX claimTtl`, the confirmation `SET key seen PX retention`.
 */
export function createRedisEventDeduplicator(options: RedisEventDeduplicatorOptions): EventDeduplicator {
  const { client } = options;
  const { retentionMs, claimTtlMs } = dedupTimings(options);
  const keyPrefix = options.keyPrefix ?? 'facade:';
  const claims = new Map<string, string>();
  const keyOf = (eventId: string): string => `${keyPrefix}webhook-event:${eventId}`;

  return {
    async claim(eventId: string): Promise<ClaimResult> {
      const token = randomUUID();
      const taken = await client.set(keyOf(eventId), token, 'PX', claimTtlMs, 'NX');
      if (taken === 'OK') {
        claims.set(eventId, token);
        return 'claimed';
      }
      // The key may expire between the SET and this GET; "in flight" then only costs one retry.
      return (await client.get(keyOf(eventId))) === SEEN ? 'seen' : 'in_flight';
    },
    async confirm(eventId: string): Promise<void> {
      claims.delete(eventId);
      await client.set(keyOf(eventId), SEEN, 'PX', retentionMs);
    },
    async release(eventId: string): Promise<void> {
      const token = claims.get(eventId);
      claims.delete(eventId);
      if (token !== undefined) await client.eval(RELEASE_OWN_CLAIM, 1, keyOf(eventId), token);
    },
    async close(): Promise<void> {
      claims.clear();
      if (options.ownsClient) await client.quit().catch(() => undefined);
    },
  };
}
