/**
 * Hive Gateway's shared response cache, as deploy/kubernetes/gateway-response-cache.ts keeps it in
 * Redis, invalidated by the facade writing to that Redis directly: every gateway replica reads the
 * same keys, so one script drops an answer for all of them, whether or not a gateway is up, and
 * the invalidation is over when Redis answers (before the webhook is acknowledged).
 *
 * The layout both sides share, under the prefix (`GATEWAY_CACHE_KEY_PREFIX`):
 * - `answer:<key>`: an answer the gateway keeps, expiring with its `max-age`;
 * - `tag:<tag>`: a sorted set of the answers carrying the tag, scored by when each expires;
 * - `invalidated:<tag>`: when the tag was last invalidated (Redis's clock, µs), kept
 *   {@link INVALIDATION_MARK_MS}. The gateway keeps no answer whose fetch started at or before that
 *   time (its store is a script that checks it): an answer read before an event and stored after
 *   its invalidation is never kept.
 */
import type { Redis } from 'ioredis';

/**
 * How long an invalidation's mark is kept: longer than any fetch of the gateway can take between
 * its lookup and its store (the facade's own operations end within `OPERATION_TIMEOUT_MS`).
 */
export const INVALIDATION_MARK_MS = 10 * 60_000;

/**
 * Marks each tag invalidated at Redis's time and drops every answer it names, with the tag's set.
 * ARGV: the prefix, the mark's lifetime (ms), then the tags. Returns how many answers were dropped.
 */
const INVALIDATE_SCRIPT = `
local time = redis.call('TIME')
-- Microseconds, as the gateway's lookups note them (written whole: tostring would round them).
local now = time[1] .. string.format('%06d', tonumber(time[2]))
local prefix = ARGV[1]
local dropped = 0
for i = 3, #ARGV do
  local tag = ARGV[i]
  redis.call('SET', prefix .. 'invalidated:' .. tag, now, 'PX', ARGV[2])
  local set = prefix .. 'tag:' .. tag
  for _, answer in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    dropped = dropped + redis.call('DEL', prefix .. 'answer:' .. answer)
  end
  redis.call('DEL', set)
end
return dropped
`;

/** Drops what `tags` name from the gateways' cache in `redis`; how many answers were dropped. */
export async function invalidateHiveGatewayCache(
  redis: Redis,
  keyPrefix: string,
  tags: readonly string[],
): Promise<number> {
  const dropped = await redis.eval(INVALIDATE_SCRIPT, 0, keyPrefix, INVALIDATION_MARK_MS, ...tags);
  return Number(dropped);
}
