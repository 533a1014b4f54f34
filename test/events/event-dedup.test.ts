import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EventDeduplicator, EventDeduplicatorOptions } from '../../src/events/dedup/event-dedup.ts';
import { createMemoryEventDeduplicator } from '../../src/events/dedup/memory-event-dedup.ts';
import { createRedisEventDeduplicator } from '../../src/events/dedup/redis-event-dedup.ts';
import { closeRedisConnection, openRedisConnection } from '../../src/redis.ts';
import { createLogger } from '../../src/logger.ts';
import { connectRedis, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { startRedisServer } from '../../scripts/redis-server.ts';
import { waitFor } from '../support/harness/wait.ts';

type Factory = (options?: EventDeduplicatorOptions) => EventDeduplicator;

let redis: Redis;
beforeAll(() => {
  redis = connectRedis();
});
afterAll(async () => {
  await redis?.quit();
});

const factories: Array<[string, () => Factory]> = [
  ['memory', () => (options) => createMemoryEventDeduplicator(options)],
  [
    'redis',
    () => {
      // One prefix per test: a shared one would make two instances of one test see each other, as replicas do.
      const keyPrefix = uniqueRedisPrefix();
      return (options) => createRedisEventDeduplicator({ client: redis, keyPrefix, ...options });
    },
  ],
];

describe.each(factories)('%s event de-duplication', (_name, makeFactory) => {
  test('claims an event once; a later delivery of the confirmed event is seen', async () => {
    const dedup = makeFactory()();
    expect(await dedup.claim('evt_1')).toBe('claimed');
    expect(await dedup.claim('evt_1')).toBe('in_flight');
    await dedup.confirm('evt_1');
    expect(await dedup.claim('evt_1')).toBe('seen');
    expect(await dedup.claim('evt_2')).toBe('claimed');
  });

  test('a released claim (failed publication) can be claimed again', async () => {
    const dedup = makeFactory()();
    expect(await dedup.claim('evt_1')).toBe('claimed');
    await dedup.release('evt_1');
    expect(await dedup.claim('evt_1')).toBe('claimed');
  });

  test('of many concurrent deliveries of one event exactly one claims it', async () => {
    const dedup = makeFactory()();
    const results = await Promise.all(Array.from({ length: 20 }, () => dedup.claim('evt_1')));
    expect(results.filter((result) => result === 'claimed')).toHaveLength(1);
  });

  test('a claim never confirmed expires, so a crash between claim and publish loses nothing', async () => {
    const dedup = makeFactory()({ claimTtlMs: 50 });
    expect(await dedup.claim('evt_1')).toBe('claimed');
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await dedup.claim('evt_1')).toBe('claimed');
  });

  test('a confirmed id is forgotten after the retention window', async () => {
    // Long enough that a loaded machine still asks within it; then wait for the expiry, not a guess.
    const dedup = makeFactory()({ retentionMs: 1_000 });
    await dedup.claim('evt_1');
    await dedup.confirm('evt_1');
    expect(await dedup.claim('evt_1')).toBe('seen');
    let answer = await dedup.claim('evt_1');
    await waitFor(
      () => answer === 'claimed',
      'the seen id to expire',
      10_000,
      async () => {
        answer = await dedup.claim('evt_1');
      },
    );
  });
});

describe('redis event de-duplication across replicas', () => {
  test('two instances sharing one Redis agree on what was seen', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const first = createRedisEventDeduplicator({ client: redis, keyPrefix });
    const second = createRedisEventDeduplicator({ client: redis, keyPrefix });
    expect(await first.claim('evt_1')).toBe('claimed');
    expect(await second.claim('evt_1')).toBe('in_flight');
    await first.confirm('evt_1');
    expect(await second.claim('evt_1')).toBe('seen');
  });

  test("releasing an expired claim never frees another replica's fresh claim", async () => {
    const keyPrefix = uniqueRedisPrefix();
    const slow = createRedisEventDeduplicator({ client: redis, keyPrefix, claimTtlMs: 50 });
    const other = createRedisEventDeduplicator({ client: redis, keyPrefix });
    expect(await slow.claim('evt_1')).toBe('claimed');
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(await other.claim('evt_1')).toBe('claimed');
    await slow.release('evt_1');
    expect(await other.claim('evt_1')).toBe('in_flight');
  });

  test('keeps seen ids for 24 hours by default', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const dedup = createRedisEventDeduplicator({ client: redis, keyPrefix });
    await dedup.claim('evt_1');
    await dedup.confirm('evt_1');
    const ttlMs = await redis.pttl(`${keyPrefix}webhook-event:evt_1`);
    expect(ttlMs).toBeGreaterThan(23 * 60 * 60 * 1000);
    expect(ttlMs).toBeLessThanOrEqual(24 * 60 * 60 * 1000);
  });
});

describe('redis event de-duplication through a Redis restart', () => {
  test('a claim whose release could not reach Redis is released once Redis is back, not left to expire', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dedup-aof-'));
    let server = await startRedisServer({ appendOnlyDir: dir });
    const logger = createLogger({ level: 'silent' });
    const client = openRedisConnection(server.url, 'dedup', logger);
    const otherClient = openRedisConnection(server.url, 'other-replica', logger);
    const keyPrefix = uniqueRedisPrefix();
    const dedup = createRedisEventDeduplicator({ client, keyPrefix });
    const other = createRedisEventDeduplicator({ client: otherClient, keyPrefix });
    try {
      expect(await dedup.claim('evt_cut')).toBe('claimed');
      // The publication failed and so does its release: Redis is away (its data kept on disk).
      await server.stop();
      await expect(dedup.release('evt_cut')).rejects.toThrow();
      server = await startRedisServer({ appendOnlyDir: dir, port: server.port });
      // The platform's retry, on any replica, finds the event free again within moments (the
      // claim itself would hold 30 s).
      let claim = '';
      await waitFor(
        () => claim === 'claimed',
        `the claim released after the restart (last answer: ${claim})`,
        10_000,
        async () => {
          claim = await other.claim('evt_cut');
        },
      );
    } finally {
      await dedup.close();
      await Promise.all([closeRedisConnection(client), closeRedisConnection(otherClient)]);
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('memory event de-duplication bounds', () => {
  test('forgets the oldest ids first when full', async () => {
    const dedup = createMemoryEventDeduplicator({ maxEntries: 3 });
    for (const id of ['evt_1', 'evt_2', 'evt_3', 'evt_4']) {
      await dedup.claim(id);
      await dedup.confirm(id);
    }
    expect(await dedup.claim('evt_4')).toBe('seen');
    expect(await dedup.claim('evt_2')).toBe('seen');
    expect(await dedup.claim('evt_1')).toBe('claimed');
  });
});
