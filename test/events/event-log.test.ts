/**
 * The event log, in memory and in the real Redis: cursors in append order, listeners fed in order
 * once, reads after a cursor, retention and the cursors it expires, and a reader that loses its
 * Redis connection reading on from its position.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { openRedisConnection } from '../../src/redis.ts';
import {
  compareCursors,
  type EventLog,
  type LoggedEvent,
  type LogRetention,
} from '../../src/events/log/event-log.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createRedisEventLog } from '../../src/events/log/redis-event-log.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { connectRedis, requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';

const logger = createLogger({ level: 'silent' });
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function memoryLog(retention?: LogRetention): EventLog {
  const log = createMemoryEventLog({ logger, ...(retention === undefined ? {} : { retention }) });
  cleanups.push(() => log.close());
  return log;
}

function redisLog(
  retention?: LogRetention,
  keyPrefix = uniqueRedisPrefix(),
  readerName = 'log-reader',
): EventLog {
  const url = requireRedisUrl();
  const client = openRedisConnection(url, 'events', logger);
  const log = createRedisEventLog({
    client,
    openReader: () => openRedisConnection(url, readerName, logger),
    keyPrefix,
    logger,
    blockMs: 1_000,
    ...(retention === undefined ? {} : { retention }),
  });
  cleanups.push(async () => {
    await log.close();
    await client.quit();
  });
  return log;
}

describe.each([
  ['in-memory', memoryLog],
  ['redis', redisLog],
])('the %s event log', (_name, makeLog) => {
  test('gives each event a cursor in append order and feeds every listener in that order, once', async () => {
    const log = makeLog();
    const received: LoggedEvent[][] = [[], [], []];
    const subscriptions = await Promise.all(
      received.map((into) => log.subscribe('sandbox', (logged) => into.push(logged))),
    );
    const events = Array.from({ length: 30 }, () => makeEvent());
    const cursors: string[] = [];
    for (const event of events) cursors.push(await log.append(event));
    expect([...cursors].sort(compareCursors)).toEqual(cursors);
    expect(new Set(cursors).size).toBe(30);

    // A marker appended last proves nothing else was on its way.
    const markerCursor = await log.append(makeEvent());
    await waitFor(() => received.every((into) => into.at(-1)?.cursor === markerCursor), 'the marker');
    for (const into of received) {
      expect(into.slice(0, 30)).toEqual(events.map((event, index) => ({ cursor: cursors[index], event })));
      expect(into).toHaveLength(31);
    }
    for (const subscription of subscriptions) subscription.stop();
  });

  test('a listener starts after the position it is given, and hears nothing of the other environment', async () => {
    const log = makeLog();
    const before = await log.append(makeEvent());
    await new Promise((resolve) => setTimeout(resolve, 50));
    const received: LoggedEvent[] = [];
    const subscription = await log.subscribe('sandbox', (logged) => received.push(logged));
    expect(compareCursors(subscription.position, before)).toBeGreaterThanOrEqual(0);
    await log.append(makeEvent({ environment: 'live' }));
    const after = await log.append(makeEvent());
    await waitFor(() => received.length === 1, 'the event appended after subscribing');
    expect(received.map((logged) => logged.cursor)).toEqual([after]);
    subscription.stop();
  });

  test('reads the events after a cursor, in pages', async () => {
    const log = makeLog();
    const cursors: string[] = [];
    for (let index = 0; index < 7; index += 1) cursors.push(await log.append(makeEvent()));
    const page = await log.readAfter('sandbox', cursors[1]!, 3);
    expect(page).toMatchObject({ expired: false });
    expect(page.expired ? [] : page.events.map((logged) => logged.cursor)).toEqual(cursors.slice(2, 5));
    const rest = await log.readAfter('sandbox', cursors[4]!, 100);
    expect(rest.expired ? [] : rest.events.map((logged) => logged.cursor)).toEqual(cursors.slice(5));
    const none = await log.readAfter('sandbox', cursors[6]!, 100);
    expect(none).toEqual({ expired: false, events: [] });
  });

  test('answers expired, naming the oldest cursor held, for a cursor past the retention', async () => {
    // Redis trims whole nodes of 100 entries (MAXLEN ~), so append well past the retention.
    const log = makeLog({ events: 10 });
    const cursors: string[] = [];
    for (let index = 0; index < 250; index += 1) cursors.push(await log.append(makeEvent()));
    const read = await log.readAfter('sandbox', cursors[0]!, 10);
    expect(read.expired).toBe(true);
    const oldest = read.expired ? read.oldest : undefined;
    expect(oldest).toBeDefined();
    expect(cursors).toContain(oldest);
    expect(compareCursors(oldest!, cursors[1]!)).toBeGreaterThan(0);
    // From the oldest held on, nothing is missing.
    const fromOldest = await log.readAfter('sandbox', oldest!, 1000);
    expect(fromOldest.expired ? [] : fromOldest.events.map((logged) => logged.cursor)).toEqual(
      cursors.slice(cursors.indexOf(oldest!) + 1),
    );
    expect((await log.stats('sandbox')).length).toBeLessThan(250);
  });

  test('answers expired for a cursor this log never gave (ahead of its head)', async () => {
    const log = makeLog();
    const head = await log.append(makeEvent());
    const [milliseconds] = head.split('-');
    const ahead = `${Number(milliseconds) + 60_000}-0`;
    expect(await log.readAfter('sandbox', ahead, 10)).toMatchObject({ expired: true });
  });
});

describe('the in-memory event log', () => {
  test('does not resume a cursor from before it existed (a restarted process lost what came between)', async () => {
    const log = memoryLog();
    expect(await log.readAfter('sandbox', `${Date.now() - 60_000}-0`, 10)).toMatchObject({ expired: true });
  });

  test('keeps events for an age when the retention is an age', async () => {
    let now = Date.UTC(2026, 0, 1);
    const log = createMemoryEventLog({ logger, retention: { seconds: 60 }, now: () => now });
    cleanups.push(() => log.close());
    const old = await log.append(makeEvent());
    now += 61_000;
    const recent = await log.append(makeEvent());
    expect(await log.readAfter('sandbox', old, 10)).toMatchObject({
      expired: false,
      events: [{ cursor: recent }],
    });
    now += 1_000;
    await log.append(makeEvent());
    expect((await log.stats('sandbox')).length).toBe(2);
    expect(await log.readAfter('sandbox', `${Date.UTC(2026, 0, 1)}-0`, 10)).toMatchObject({
      expired: true,
      oldest: recent,
    });
  });
});

describe('the Redis event log', () => {
  test('a reader whose connection is killed reads on from its position: every event, in order, once', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const readerName = `log-reader-${keyPrefix}`;
    const writer = redisLog(undefined, keyPrefix, 'unused');
    const reader = redisLog(undefined, keyPrefix, readerName);
    const received: LoggedEvent[] = [];
    const subscription = await reader.subscribe('sandbox', (logged) => received.push(logged));
    const admin = connectRedis();
    cleanups.push(async () => {
      await admin.quit();
    });

    const cursors: string[] = [];
    for (let round = 0; round < 5; round += 1) {
      for (let index = 0; index < 10; index += 1) cursors.push(await writer.append(makeEvent()));
      // Kill the reader's blocking connection mid-stream (it reconnects and reads on).
      expect(await killClientsNamed(admin, `facade-${readerName}`)).toBeLessThanOrEqual(1);
    }
    await waitFor(() => received.length >= cursors.length, 'every event despite the kills', 20_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(received.map((logged) => logged.cursor)).toEqual(cursors);
    subscription.stop();
  });

  test('a reader past the head of the log it reconnects to (one that lost its tail) reads on from that head', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const key = `${keyPrefix}events:log:sandbox`;
    const readerName = `log-reader-${keyPrefix}`;
    const url = requireRedisUrl();
    const lines: string[] = [];
    const watched = createLogger({ level: 'warn', write: (line) => lines.push(line) });
    const client = openRedisConnection(url, 'events', watched);
    const log = createRedisEventLog({
      client,
      openReader: () => openRedisConnection(url, readerName, watched),
      keyPrefix,
      logger: watched,
      blockMs: 300,
    });
    const admin = connectRedis();
    cleanups.push(async () => {
      await log.close();
      await client.quit();
      await admin.quit();
    });
    const message = (): string => JSON.stringify(makeEvent());
    await admin.xadd(key, '5-1', 'm', message());
    const received: string[] = [];
    await log.subscribe('sandbox', ({ cursor }) => received.push(cursor));
    await admin.xadd(key, '9-1', 'm', message());
    await waitFor(() => received.length === 1, 'the event after the subscription');

    // The log comes back without its last event, as a promoted replica that lacked it or a Redis
    // restarted from an AOF that had not written it: its head (5-1) is before the reader (9-1).
    await admin.del(key);
    await admin.xadd(key, '5-1', 'm', message());
    expect(await killClientsNamed(admin, `facade-${readerName}`)).toBe(1);
    await waitFor(
      () => lines.some((line) => line.includes('ends before this replica')),
      'the reader to find the head behind it',
    );
    // The next id that log gives is below the old position (its clock, or the same millisecond).
    await admin.xadd(key, '7-1', 'm', message());
    await waitFor(() => received.length === 2, 'the event appended after the reconnection', 5_000);
    expect(received).toEqual(['9-1', '7-1']);
    expect(lines.join('\n')).toContain('"position":"9-1","head":"5-1"');
  });

  test.each([[{ events: 2 }], [{ seconds: 60 }]] as const)(
    'appendMarked appends while the claim holds, marking the event seen with its cursor in the same step (retention %j)',
    async (retention) => {
      const keyPrefix = uniqueRedisPrefix();
      const url = requireRedisUrl();
      const client = openRedisConnection(url, 'events', logger);
      const log = createRedisEventLog({ client, openReader: () => client, keyPrefix, logger, retention });
      const admin = connectRedis();
      cleanups.push(async () => {
        await log.close();
        await client.quit();
        await admin.quit();
      });
      const mark = (token: string) => ({ key: `${keyPrefix}webhook-event:evt`, token, ttlMs: 60_000 });
      await admin.set(mark('t').key, 'claim-of-this-delivery', 'PX', 30_000);

      // Another delivery's token: the claim is not this one's, nothing is appended or marked.
      expect(await log.appendMarked(makeEvent(), mark('claim-of-another'))).toBeUndefined();
      expect(await admin.xlen(`${keyPrefix}events:log:sandbox`)).toBe(0);
      const cursor = await log.appendMarked(makeEvent(), mark('claim-of-this-delivery'));
      expect(cursor).toMatch(/^\d+-\d+$/);
      expect(await admin.get(mark('t').key)).toBe(`seen ${cursor!}`);
      expect(await admin.pttl(mark('t').key)).toBeGreaterThan(30_000);
      // Sent again (a lost answer): the claim is now the mark, so nothing is appended twice.
      expect(await log.appendMarked(makeEvent(), mark('claim-of-this-delivery'))).toBeUndefined();
      expect(await admin.xlen(`${keyPrefix}events:log:sandbox`)).toBe(1);
    },
  );

  test('reports its length and this replica lagging behind the head', async () => {
    const log = redisLog();
    await log.subscribe('sandbox', () => undefined);
    await log.append(makeEvent());
    await log.append(makeEvent());
    let stats = await log.stats('sandbox');
    await waitFor(
      () => stats.lagSeconds === 0,
      'the reader to catch up',
      10_000,
      async () => {
        stats = await log.stats('sandbox');
      },
    );
    expect(stats).toEqual({ length: 2, lagSeconds: 0 });
  });
});

/** Kills the connections of the run's Redis named `name` (and only those); returns how many. */
async function killClientsNamed(admin: ReturnType<typeof connectRedis>, name: string): Promise<number> {
  const list = String(await admin.call('CLIENT', 'LIST'));
  const ids = list
    .split('\n')
    .filter((line) => line.includes(` name=${name} `))
    .map((line) => /\bid=(\d+)/.exec(line)?.[1])
    .filter((id): id is string => id !== undefined);
  for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id).catch(() => undefined);
  return ids.length;
}
