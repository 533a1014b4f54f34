/**
 * De-duplication of webhook deliveries shared by every replica, in Redis: two replicas receiving
 * the same event at once must still publish it once.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { closeRedisConnection } from '../../redis.ts';
import type { SeenMark } from '../log/redis-event-log.ts';
import {
  dedupTimings,
  type ClaimResult,
  type EventDeduplicator,
  type EventDeduplicatorOptions,
} from './event-dedup.ts';

/** Options of {@link createRedisEventDeduplicator}. */
export interface RedisEventDeduplicatorOptions extends EventDeduplicatorOptions {
  /**
   * A connection in normal (not subscriber) mode: the event log's appender, so that a `WAIT` after
   * a claim covers the mark it found. Closed by `close()` only when `ownsClient`.
   */
  client: Redis;
  /** Prefix of every key, so several deployments can share one Redis. Default `facade:`. */
  keyPrefix?: string;
  /** Whether `close()` quits `client`. Default false. */
  ownsClient?: boolean;
}

/** An {@link EventDeduplicator} whose claims the Redis event log can turn into "seen" itself. */
export interface RedisEventDeduplicator extends EventDeduplicator {
  /** What the log needs to mark `eventId` seen as it appends it; undefined unless this delivery claimed it. */
  markOf(eventId: string): SeenMark | undefined;
  /** The log wrote `eventId`'s mark: its claim is no longer this delivery's to release. */
  marked(eventId: string): void;
}

/** Failed releases kept to try again: beyond, a claim waits for its expiry. */
const MAX_UNRELEASED = 10_000;

/** What a key holds once its event was published: `seen`, then its cursor when the log wrote it. */
const SEEN = 'seen';
// Claims a free id. An id seen already is written again as it is, its expiry kept: a write, so a
// WAIT after the claim answers whether the replicas hold the mark (and the event appended before it).
const CLAIM = `local held = redis.call('GET', KEYS[1])
if not held then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 'claimed' end
if string.sub(held, 1, 4) == 'seen' then redis.call('SET', KEYS[1], held, 'KEEPTTL') return 'seen' end
return 'in_flight'`;
// Deletes the claim only if it is still ours: after an expiry another replica may hold a fresh
// claim on the same id, and releasing that one would let a third delivery publish a duplicate.
const RELEASE_OWN_CLAIM = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/**
 * An {@link EventDeduplicator} in Redis, shared by every replica: the claim is one script (`SET key
 * <token> PX claimTtl` when the id is free), the confirmation `SET key seen PX retention`, or the
 * log's own append (`markOf`), which writes `seen <cursor>` in the step that appends.
 */
export function createRedisEventDeduplicator(options: RedisEventDeduplicatorOptions): RedisEventDeduplicator {
  const { client } = options;
  const { retentionMs, claimTtlMs } = dedupTimings(options);
  const keyPrefix = options.keyPrefix ?? 'facade:';
  const claims = new Map<string, string>();
  const keyOf = (eventId: string): string => `${keyPrefix}webhook-event:${eventId}`;
  // Claims whose release could not reach Redis (a failover under way), by key: released once it is
  // back, so the platform's retry is not answered 409 until the claim expires. Bounded.
  const unreleased = new Map<string, string>();
  const releaseOwn = (key: string, token: string): Promise<unknown> =>
    client.eval(RELEASE_OWN_CLAIM, 1, key, token);
  client.on('ready', () => {
    for (const [key, token] of unreleased) {
      releaseOwn(key, token).then(
        () => unreleased.delete(key),
        () => undefined,
      );
    }
  });

  return {
    async claim(eventId: string): Promise<ClaimResult> {
      const token = randomUUID();
      const result = (await client.eval(CLAIM, 1, keyOf(eventId), token, claimTtlMs)) as ClaimResult;
      if (result === 'claimed') claims.set(eventId, token);
      return result;
    },
    markOf(eventId) {
      const token = claims.get(eventId);
      return token === undefined ? undefined : { key: keyOf(eventId), token, ttlMs: retentionMs };
    },
    marked: (eventId) => claims.delete(eventId),
    async confirm(eventId: string): Promise<void> {
      claims.delete(eventId);
      await client.set(keyOf(eventId), SEEN, 'PX', retentionMs);
    },
    async release(eventId: string): Promise<void> {
      const token = claims.get(eventId);
      claims.delete(eventId);
      if (token === undefined) return;
      try {
        await releaseOwn(keyOf(eventId), token);
      } catch (error) {
        if (unreleased.size < MAX_UNRELEASED) unreleased.set(keyOf(eventId), token);
        throw error;
      }
    },
    async close(): Promise<void> {
      claims.clear();
      unreleased.clear();
      if (options.ownsClient) await closeRedisConnection(client);
    },
  };
}
