/**
 * The bus subscribes its engine once per environment and process, however many subscribers
 * listen, and hands each event to every local listener: in memory and through the real Redis.
 */
import { PubSub } from 'graphql-subscriptions';
import { afterEach, describe, expect, test } from 'vitest';
import {
  createMemoryEventBus,
  createPubSubEventBus,
  type EventBus,
} from '../../src/events/fan-out/event-bus.ts';
import { createRedisEventBus } from '../../src/events/fan-out/redis-event-bus.ts';
import type { PlatformEvent } from '../../src/events/receiving/platform-event.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { connectRedis, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';

const logger = createLogger({ level: 'silent' });
const buses: EventBus[] = [];
afterEach(async () => {
  await Promise.all(buses.splice(0).map((bus) => bus.close()));
});

/** An in-memory engine that counts what the bus asks of it. */
class CountingPubSub extends PubSub {
  subscribed = 0;
  unsubscribed = 0;
  override subscribe(trigger: string, onMessage: (message: unknown) => void): Promise<number> {
    this.subscribed += 1;
    return super.subscribe(trigger, onMessage);
  }
  override unsubscribe(subscriptionId: number): void {
    this.unsubscribed += 1;
    super.unsubscribe(subscriptionId);
  }
}

describe('the in-memory bus', () => {
  test('subscribes its engine once per environment for any number of listeners', async () => {
    const engine = new CountingPubSub();
    const bus = createPubSubEventBus({ engine, logger });
    buses.push(bus);
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const received: PlatformEvent[][] = Array.from({ length: 50 }, () => []);
      const ends = await Promise.all(
        received.map((events) => bus.subscribe('sandbox', (event) => events.push(event))),
      );
      const live: PlatformEvent[] = [];
      await bus.subscribe('live', (event) => live.push(event));
      expect(engine.subscribed).toBe(2);

      const event = makeEvent({ environment: 'sandbox' });
      await bus.publish(event);
      expect(received.map((events) => events.map(({ id }) => id))).toEqual(received.map(() => [event.id]));
      expect(live).toEqual([]);

      // One listener ends; the others keep hearing.
      ends[0]!();
      ends[0]!();
      await bus.publish(makeEvent({ environment: 'sandbox' }));
      expect(received[0]).toHaveLength(1);
      expect(received[1]).toHaveLength(2);
      // Node warns past 10 listeners on one emitter event; the bus adds one per environment.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('one listener that throws does not keep the event from the others', async () => {
    const bus = createPubSubEventBus({ engine: new PubSub(), logger });
    buses.push(bus);
    const received: string[] = [];
    await bus.subscribe('sandbox', () => {
      throw new Error('listener failed');
    });
    await bus.subscribe('sandbox', (event) => received.push(event.id));
    const event = makeEvent({ environment: 'sandbox' });
    await bus.publish(event);
    expect(received).toEqual([event.id]);
  });

  test('the default in-memory bus hands events over after publish has resolved, in order', async () => {
    const bus = createMemoryEventBus(logger);
    buses.push(bus);
    const received: string[] = [];
    await bus.subscribe('sandbox', (event) => received.push(event.id));
    const first = makeEvent({ environment: 'sandbox' });
    const second = makeEvent({ environment: 'sandbox' });
    await bus.publish(first);
    await bus.publish(second);
    // What the webhook route awaits before acknowledging: no subscriber's queue was filled yet.
    expect(received).toEqual([]);
    await waitFor(() => received.length === 2, 'both events');
    expect(received).toEqual([first.id, second.id]);
  });

  test('close ends the engine subscriptions and refuses new ones', async () => {
    const engine = new CountingPubSub();
    const bus = createPubSubEventBus({ engine, logger });
    await bus.subscribe('sandbox', () => {});
    await bus.subscribe('sandbox', () => {});
    await bus.close();
    expect(engine.unsubscribed).toBe(1);
    await expect(bus.subscribe('sandbox', () => {})).rejects.toThrow(/closed/);
  });
});

describe('the Redis bus', () => {
  test('one Redis subscription per replica carries an event to all its listeners', async () => {
    const prefix = uniqueRedisPrefix();
    const open = () =>
      createRedisEventBus({
        publisher: connectRedis(),
        subscriber: connectRedis(),
        channelPrefix: prefix,
        logger,
      });
    const publishing = open();
    const listening = open();
    buses.push(publishing, listening);
    const received: string[][] = Array.from({ length: 100 }, () => []);
    await Promise.all(received.map((ids) => listening.subscribe('sandbox', (event) => ids.push(event.id))));

    const observer = connectRedis();
    try {
      const [, subscribers] = (await observer.pubsub('NUMSUB', `${prefix}events:sandbox`)) as [
        string,
        number,
      ];
      expect(subscribers).toBe(1);
    } finally {
      observer.disconnect();
    }

    const event = makeEvent({ environment: 'sandbox' });
    await publishing.publish(event);
    await waitFor(() => received.every((ids) => ids.length === 1), 'the event on every listener');
    expect(new Set(received.flat())).toEqual(new Set([event.id]));
  });
});
