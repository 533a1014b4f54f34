/**
 * The layout Hive Gateway's response cache (deploy/kubernetes/gateway-response-cache.ts) and the
 * facade's invalidation of it (src/events/gateway-caches/hive-gateway-cache.ts) share in Redis,
 * each side's own code against the run's real Redis: an invalidation drops every answer of its
 * tags and no other, and an answer whose lookup came before an invalidation of one of its tags is
 * never kept, however late its store arrives.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { lookUpAnswer, storeAnswer } from '../../deploy/kubernetes/gateway-response-cache.ts';
import { invalidateHiveGatewayCache } from '../../src/events/gateway-caches/hive-gateway-cache.ts';
import { connectRedis, uniqueRedisPrefix } from '../support/harness/redis.ts';

let redis: Redis;
beforeAll(() => {
  redis = connectRedis();
});
afterAll(() => {
  redis?.disconnect();
});

const TTL_MS = 30_000;

/** Looks `key` up, then stores an answer for it with `tags`; whether it was kept. */
async function lookUpAndStore(prefix: string, key: string, tags: string[], between?: () => Promise<void>) {
  const { lookedAt } = await lookUpAnswer(redis, prefix, key);
  await between?.();
  return storeAnswer(redis, prefix, { key, answer: { data: { key } }, ttlMs: TTL_MS, lookedAt, tags });
}

describe("the gateway's cache in Redis, as the facade invalidates it", () => {
  test('an invalidation drops every answer of its tags, and no other', async () => {
    const prefix = uniqueRedisPrefix();
    expect(
      await lookUpAndStore(prefix, 'acme-dashboard', ['s:all:cus_acme', 's:list:cus_acme:accounts']),
    ).toBe(true);
    expect(
      await lookUpAndStore(prefix, 'acme-account', ['s:all:cus_acme', 's:record:cus_acme:accounts:a1']),
    ).toBe(true);
    expect(
      await lookUpAndStore(prefix, 'globex-dashboard', ['s:all:cus_globex', 's:list:cus_globex:accounts']),
    ).toBe(true);
    expect((await lookUpAnswer(redis, prefix, 'acme-dashboard')).answer).toEqual({
      data: { key: 'acme-dashboard' },
    });

    expect(await invalidateHiveGatewayCache(redis, prefix, ['s:list:cus_acme:accounts'])).toBe(1);
    expect((await lookUpAnswer(redis, prefix, 'acme-dashboard')).answer).toBeUndefined();
    expect((await lookUpAnswer(redis, prefix, 'acme-account')).answer).toBeDefined();
    expect((await lookUpAnswer(redis, prefix, 'globex-dashboard')).answer).toBeDefined();

    expect(await invalidateHiveGatewayCache(redis, prefix, ['s:all:cus_acme', 's:customers'])).toBe(1);
    expect((await lookUpAnswer(redis, prefix, 'acme-account')).answer).toBeUndefined();
    expect((await lookUpAnswer(redis, prefix, 'globex-dashboard')).answer).toBeDefined();
    // An invalidation's tag sets go with it; another environment's tag names nothing here.
    expect(await redis.exists(`${prefix}tag:s:all:cus_acme`)).toBe(0);
    expect(await invalidateHiveGatewayCache(redis, prefix, ['l:all:cus_globex'])).toBe(0);
  });

  test('an answer looked up before an invalidation of one of its tags is not kept when it arrives after it', async () => {
    const prefix = uniqueRedisPrefix();
    const kept = await lookUpAndStore(
      prefix,
      'in-flight',
      ['s:list:cus_acme:accounts', 's:all:cus_acme'],
      async () => {
        await invalidateHiveGatewayCache(redis, prefix, ['s:all:cus_acme']);
      },
    );
    expect(kept).toBe(false);
    expect((await lookUpAnswer(redis, prefix, 'in-flight')).answer).toBeUndefined();
    // Looked up after the invalidation: its fetch began after the change, and it is kept.
    expect(await lookUpAndStore(prefix, 'in-flight', ['s:list:cus_acme:accounts', 's:all:cus_acme'])).toBe(
      true,
    );
    // An invalidation of tags it does not carry never stops it.
    expect(
      await lookUpAndStore(prefix, 'other', ['s:all:cus_globex'], async () => {
        await invalidateHiveGatewayCache(redis, prefix, ['s:all:cus_acme']);
      }),
    ).toBe(true);
  });

  test('keeps an answer for its max-age, and its tag sets no longer than the answers they name', async () => {
    const prefix = uniqueRedisPrefix();
    const { lookedAt } = await lookUpAnswer(redis, prefix, 'short');
    expect(
      await storeAnswer(redis, prefix, {
        key: 'short',
        answer: { data: {} },
        ttlMs: 1_000,
        lookedAt,
        tags: ['s:x'],
      }),
    ).toBe(true);
    expect(await redis.pttl(`${prefix}answer:short`)).toBeLessThanOrEqual(1_000);
    expect(await redis.pttl(`${prefix}tag:s:x`)).toBeLessThanOrEqual(1_000);
    expect(await redis.pttl(`${prefix}tag:s:x`)).toBeGreaterThan(0);
  });
});
