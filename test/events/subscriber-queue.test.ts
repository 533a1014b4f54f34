import { afterEach, describe, expect, test } from 'vitest';
import { createMemoryEventBus, type EventBus } from '../../src/events/fan-out/event-bus.ts';
import { openRedisConnection } from '../../src/events/fan-out/redis-connection.ts';
import { createRedisEventBus } from '../../src/events/fan-out/redis-event-bus.ts';
import { openSubscriberQueue, type QueueItem } from '../../src/events/delivery/subscriber-queue.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';

const logger = createLogger({ level: 'silent' });
const opened: EventBus[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((bus) => bus.close()));
});

function memoryBus(): EventBus {
  const bus = createMemoryEventBus(logger);
  opened.push(bus);
  return bus;
}

function redisBus(channelPrefix = uniqueRedisPrefix()): EventBus {
  const url = requireRedisUrl();
  const bus = createRedisEventBus({
    publisher: openRedisConnection(url, 'publisher', logger),
    subscriber: openRedisConnection(url, 'subscriber', logger),
    channelPrefix,
    logger,
  });
  opened.push(bus);
  return bus;
}

/** Pulls every item into `into` until the queue ends. */
function drain(queue: AsyncIterable<QueueItem>, into: QueueItem[]): Promise<void> {
  return (async () => {
    for await (const item of queue) into.push(item);
  })();
}

describe.each([
  ['in-memory', memoryBus],
  ['redis', () => redisBus()],
])('%s bus with bounded subscriber queues', (_name, makeBus) => {
  test('a subscriber that never reads does not delay one that does', async () => {
    const bus = makeBus();
    const slow = await openSubscriberQueue({ bus, environment: 'sandbox', limit: 100 });
    const fast = await openSubscriberQueue({ bus, environment: 'sandbox', limit: 100 });
    const received: QueueItem[] = [];
    const fastDone = drain(fast, received);

    const events = Array.from({ length: 20 }, () => makeEvent());
    for (const event of events) await bus.publish(event);

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
    const bus = makeBus();
    const slow = await openSubscriberQueue({ bus, environment: 'sandbox', limit: 3 });
    const fast = await openSubscriberQueue({ bus, environment: 'sandbox', limit: 3 });
    const fastItems: QueueItem[] = [];
    const fastDone = drain(fast, fastItems);

    const times = [
      '2026-01-01T00:00:05Z',
      '2026-01-01T00:00:02Z',
      '2026-01-01T00:00:07Z',
      '2026-01-01T00:00:09Z',
    ];
    for (const occurredAt of times) await bus.publish(makeEvent({ occurredAt }));
    await waitFor(() => fastItems.length === 4, 'the fast subscriber to receive all 4 events');
    // The Redis bus delivers asynchronously; give the slow queue the same four events.
    await waitFor(() => slow.size === 0, 'the slow subscriber to overflow');

    const slowItems: QueueItem[] = [];
    await drain(slow, slowItems);
    expect(slowItems).toEqual([
      { kind: 'overflow', limit: 3, dropped: 4, resumeSince: '2026-01-01T00:00:02Z' },
    ]);
    expect(fastItems.every((item) => item.kind === 'event')).toBe(true);

    // The fast subscriber keeps receiving after the slow one was ended.
    await bus.publish(makeEvent());
    await waitFor(() => fastItems.length === 5, 'the fast subscriber to receive a fifth event');
    fast.end();
    await fastDone;
  });

  test('a subscriber receives only the events of its environment that it accepts', async () => {
    const bus = makeBus();
    const queue = await openSubscriberQueue({
      bus,
      environment: 'live',
      accept: (event) => event.data.customerId === 'cus_mine',
    });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const mine = makeEvent({ environment: 'live', customerId: 'cus_mine' });
    await bus.publish(makeEvent({ environment: 'sandbox', customerId: 'cus_mine' }));
    await bus.publish(makeEvent({ environment: 'live', customerId: 'cus_other' }));
    await bus.publish(mine);
    await waitFor(() => items.length === 1, 'the one matching event');
    await bus.publish(makeEvent({ environment: 'sandbox', customerId: 'cus_mine' }));
    // A marker published last on the same channel proves nothing else was on its way.
    const marker = makeEvent({ environment: 'live', customerId: 'cus_mine' });
    await bus.publish(marker);
    await waitFor(() => items.length === 2, 'the marker');
    expect(items).toEqual([
      { kind: 'event', event: mine },
      { kind: 'event', event: marker },
    ]);
    queue.end();
    await done;
  });

  test('ending a queue answers a pending next() with done and stops listening', async () => {
    const bus = makeBus();
    const queue = await openSubscriberQueue({ bus, environment: 'sandbox' });
    const pending = queue.next();
    queue.end();
    expect(await pending).toEqual({ value: undefined, done: true });
    await bus.publish(makeEvent());
    expect(await queue.next()).toEqual({ value: undefined, done: true });
  });
});

describe('redis bus across replicas', () => {
  test('an event published by one instance reaches a subscriber of another exactly once', async () => {
    const channelPrefix = uniqueRedisPrefix();
    const publisherSide = redisBus(channelPrefix);
    const subscriberSide = redisBus(channelPrefix);
    const queue = await openSubscriberQueue({ bus: subscriberSide, environment: 'sandbox' });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const event = makeEvent();
    await publisherSide.publish(event);
    await waitFor(() => items.length === 1, 'the event from the other instance');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(items).toEqual([{ kind: 'event', event }]);
    queue.end();
    await done;
  });

  test('drops a malformed message written to the channel by someone else', async () => {
    const channelPrefix = uniqueRedisPrefix();
    const bus = redisBus(channelPrefix);
    const queue = await openSubscriberQueue({ bus, environment: 'sandbox' });
    const items: QueueItem[] = [];
    const done = drain(queue, items);
    const raw = openRedisConnection(requireRedisUrl(), 'raw', logger);
    await raw.publish(`${channelPrefix}events:sandbox`, '{"not":"an event"}');
    await raw.publish(`${channelPrefix}events:sandbox`, 'not json');
    await raw.quit();
    const event = makeEvent();
    await bus.publish(event);
    await waitFor(() => items.length === 1, 'the valid event');
    expect(items).toEqual([{ kind: 'event', event }]);
    queue.end();
    await done;
  });
});
