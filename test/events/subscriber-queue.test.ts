import { afterEach, describe, expect, test } from 'vitest';
import type { EventLog } from '../../src/events/log/event-log.ts';
import { openRedisConnection } from '../../src/redis.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createRedisEventLog } from '../../src/events/log/redis-event-log.ts';
import { openSubscriberQueue, type QueueItem } from '../../src/events/delivery/subscriber-queue.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';

const logger = createLogger({ level: 'silent' });
const opened: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

function memoryLog(): EventLog {
  const log = createMemoryEventLog({ logger });
  opened.push(() => log.close());
  return log;
}

function redisLog(keyPrefix = uniqueRedisPrefix()): EventLog {
  const url = requireRedisUrl();
  const client = openRedisConnection(url, 'events', logger);
  const log = createRedisEventLog({
    client,
    openReader: () => openRedisConnection(url, 'log-reader', logger),
    keyPrefix,
    logger,
  });
  opened.push(async () => {
    await log.close();
    await client.quit();
  });
  return log;
}

/** Pulls every item into `into` until the queue ends. */
function drain(queue: AsyncIterable<QueueItem>, into: QueueItem[]): Promise<void> {
  return (async () => {
    for await (const item of queue) into.push(item);
  })();
}

describe.each([
  ['in-memory', memoryLog],
  ['redis', () => redisLog()],
])('%s event log with bounded subscriber queues', (_name, makeLog) => {
  test('a subscriber that never reads does not delay one that does', async () => {
    const log = makeLog();
    const slow = await openSubscriberQueue({ log, environment: 'sandbox', limit: 100 });
    const fast = await openSubscriberQueue({ log, environment: 'sandbox', limit: 100 });
    const received: QueueItem[] = [];
    const fastDone = drain(fast, received);

    const events = Array.from({ length: 20 }, () => makeEvent());
    for (const event of events) await log.append(event);

    await waitFor(() => received.length === 20, 'the fast subscriber to receive all 20 events');
    expect(received.map((item) => (item.kind === 'event' ? item.event.id : item.kind))).toEqual(
      events.map((event) => event.id),
    );
    expect(slow.size).toBe(20);
    fast.end();
    slow.end();
    await fastDone;
  });

  test('an overflowing subscriber gets one notice to resume from its oldest missed event, then ends', async () => {
    const log = makeLog();
    const slow = await openSubscriberQueue({ log, environment: 'sandbox', limit: 3 });
    const fast = await openSubscriberQueue({ log, environment: 'sandbox', limit: 3 });
    const fastItems: QueueItem[] = [];
    const fastDone = drain(fast, fastItems);

    const times = [
      '2026-01-01T00:00:05Z',
      '2026-01-01T00:00:02Z',
      '2026-01-01T00:00:07Z',
      '2026-01-01T00:00:09Z',
    ];
    for (const occurredAt of times) await log.append(makeEvent({ occurredAt }));
    await waitFor(() => fastItems.length === 4, 'the fast subscriber to receive all 4 events');
    // The Redis log delivers asynchronously; give the slow queue the same four events.
    await waitFor(() => slow.size === 0, 'the slow subscriber to overflow');

    const slowItems: QueueItem[] = [];
    await drain(slow, slowItems);
    expect(slowItems).toEqual([
      {
        kind: 'overflow',
        limit: 3,
        dropped: 4,
        resumeSince: '2026-01-01T00:00:02Z',
        // Nothing was handed out: resume where the queue began listening.
        resumeAfter: slow.position,
      },
    ]);
    expect(fastItems.every((item) => item.kind === 'event')).toBe(true);

    // The fast subscriber keeps receiving after the slow one was ended.
    await log.append(makeEvent());
    await waitFor(() => fastItems.length === 5, 'the fast subscriber to receive a fifth event');
    fast.end();
    await fastDone;
  });

  test('a subscriber receives only the events of its environment that it accepts', async () => {
    const log = makeLog();
    const queue = await openSubscriberQueue({
      log,
      environment: 'live',
      accept: (event) => event.data.customerId === 'cus_mine',
    });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const mine = makeEvent({ environment: 'live', customerId: 'cus_mine' });
    await log.append(makeEvent({ environment: 'sandbox', customerId: 'cus_mine' }));
    await log.append(makeEvent({ environment: 'live', customerId: 'cus_other' }));
    const mineCursor = await log.append(mine);
    await waitFor(() => items.length === 1, 'the one matching event');
    await log.append(makeEvent({ environment: 'sandbox', customerId: 'cus_mine' }));
    // A marker published last on the same channel proves nothing else was on its way.
    const marker = makeEvent({ environment: 'live', customerId: 'cus_mine' });
    const markerCursor = await log.append(marker);
    await waitFor(() => items.length === 2, 'the marker');
    expect(items).toEqual([
      { kind: 'event', event: mine, cursor: mineCursor },
      { kind: 'event', event: marker, cursor: markerCursor },
    ]);
    queue.end();
    await done;
  });

  test('ending a queue answers a pending next() with done and stops listening', async () => {
    const log = makeLog();
    const queue = await openSubscriberQueue({ log, environment: 'sandbox' });
    const pending = queue.next();
    queue.end();
    expect(await pending).toEqual({ value: undefined, done: true });
    await log.append(makeEvent());
    expect(await queue.next()).toEqual({ value: undefined, done: true });
  });
});

describe('redis event log across replicas', () => {
  test('an event appended by one instance reaches a subscriber of another exactly once', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const publisherSide = redisLog(keyPrefix);
    const subscriberSide = redisLog(keyPrefix);
    const queue = await openSubscriberQueue({ log: subscriberSide, environment: 'sandbox' });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const event = makeEvent();
    const cursor = await publisherSide.append(event);
    await waitFor(() => items.length === 1, 'the event from the other instance');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(items).toEqual([{ kind: 'event', event, cursor }]);
    queue.end();
    await done;
  });

  test('drops a malformed entry written to the log by someone else', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const log = redisLog(keyPrefix);
    const queue = await openSubscriberQueue({ log, environment: 'sandbox' });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const raw = openRedisConnection(requireRedisUrl(), 'raw', logger);
    const key = `${keyPrefix}events:log:sandbox`;
    await raw.xadd(key, '*', 'm', '{"not":"an event"}');
    await raw.xadd(key, '*', 'm', 'not json');
    await raw.xadd(key, '*', 'other', 'field');
    await raw.xadd(key, '*', 'm', JSON.stringify(makeEvent({ environment: 'live' })));
    await raw.quit();
    const event = makeEvent();
    const cursor = await log.append(event);
    await waitFor(() => items.length === 1, 'the valid event');
    expect(items).toEqual([{ kind: 'event', event, cursor }]);
    queue.end();
    await done;
  });
});

describe.each([
  ['in-memory', memoryLog],
  ['redis', () => redisLog()],
])('%s event log: a queue resuming after a cursor', (_name, makeLog) => {
  test('yields the logged events after it, then live ones, each once, whatever is appended meanwhile', async () => {
    const log = makeLog();
    const cursors: string[] = [];
    for (let index = 0; index < 5; index += 1) cursors.push(await log.append(makeEvent()));
    const queue = await openSubscriberQueue({ log, environment: 'sandbox', after: cursors[1]! });
    // Appended after the queue listens and before its replay is read: in both, delivered once.
    for (let index = 0; index < 3; index += 1) cursors.push(await log.append(makeEvent()));
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    await waitFor(() => items.length === 6, 'the replayed and the live events');
    const marker = await log.append(makeEvent());
    await waitFor(() => items.length === 7, 'the marker');
    expect(items.map((item) => (item.kind === 'event' ? item.cursor : item.kind))).toEqual([
      ...cursors.slice(2),
      marker,
    ]);
    // Those logged before it listened come from the log; the marker is live.
    const replayed = items.map((item) => item.kind === 'event' && item.replayed === true);
    expect(replayed.slice(0, 3)).toEqual([true, true, true]);
    expect(replayed.at(-1)).toBe(false);
    queue.end();
    await done;
  });

  test('refuses a cursor whose events are no longer all held', async () => {
    const log = makeLog();
    await expect(
      openSubscriberQueue({ log, environment: 'sandbox', after: `${Date.now() + 60_000}-0` }),
    ).rejects.toMatchObject({ name: 'CursorExpiredError' });
  });

  test('an overflow while resuming names the last event it handed out as where to resume', async () => {
    const log = makeLog();
    const start = await log.append(makeEvent());
    const first = await log.append(makeEvent());
    // Both handed to the log's listeners already, so the live queue starts empty.
    await new Promise((resolve) => setImmediate(resolve));
    const queue = await openSubscriberQueue({ log, environment: 'sandbox', after: start, limit: 2 });
    expect(await queue.next()).toMatchObject({ value: { kind: 'event', cursor: first } });
    // Nobody pulls: two live events fill the queue, the third overflows it.
    await log.append(makeEvent());
    await log.append(makeEvent());
    await waitFor(() => queue.size === 2, 'the queue to fill');
    await log.append(makeEvent());
    await waitFor(() => queue.size === 0, 'the queue to overflow');
    const items: QueueItem[] = [];
    await drain(queue, items);
    expect(items).toEqual([expect.objectContaining({ kind: 'overflow', dropped: 3, resumeAfter: first })]);
  });
});
