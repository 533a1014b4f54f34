/**
 * The pub/sub between the webhook route and the subscribers: what lets an event received by one
 * replica reach the subscribers of every replica.
 */
import { PubSub, type PubSubEngine } from 'graphql-subscriptions';
import {
  toPlatformEvent,
  type PlatformEnvironment,
  type PlatformEvent,
} from '../receiving/platform-event.ts';
import type { Logger } from '../../logger.ts';
import {
  readEventTraceContext,
  TRACE_CONTEXT_MEMBER,
  type EventTraceContext,
  type EventTracer,
} from '../event-tracing.ts';

/**
 * Fan-out of verified upstream events to every subscriber of every replica.
 *
 * One channel per environment (`<prefix>events:sandbox`, `<prefix>events:live`): a subscriber
 * listens only to the channel of the environment its credentials belong to, so an event of the
 * other environment cannot reach it, whatever the filters above do. Filtering by customer, resource
 * and kind happens in the subscriber, which needs the whole event anyway; one channel per kind would
 * multiply Redis subscriptions for `events(types: [...])` and gain nothing.
 *
 * A message is the event's JSON, with, when tracing is on, the W3C trace context of its publish
 * span beside the event's own members (`traceContext`, see `../event-tracing.ts`): a replica that
 * does not read it still reads the event, and a message without it (or with a garbled one) is
 * delivered all the same.
 */
export interface EventBus {
  /** Hands `event` to every subscriber of its environment. Resolves once the pub/sub accepted it. */
  publish(event: PlatformEvent): Promise<void>;
  /**
   * Calls `onEvent` for every event of `environment` published from now on. Resolves once the
   * subscription is active, so what is published after that is not missed. `onEvent` must not throw
   * or block: the listener of one subscriber is called in line with the others. With a tracer,
   * `published` is the trace context the message carried (undefined when none, or not well formed).
   *
   * @returns A function that ends this subscription; calling it twice is harmless.
   */
  subscribe(
    environment: PlatformEnvironment,
    onEvent: (event: PlatformEvent, published?: EventTraceContext) => void,
  ): Promise<() => void>;
  /** Ends every subscription and releases connections. */
  close(): Promise<void>;
}

/** Options of {@link createPubSubEventBus}. */
export interface PubSubEventBusOptions {
  /** What the bus uses of an engine: `RedisPubSub` implements graphql-subscriptions' class, not extends it. */
  engine: Pick<PubSubEngine, 'publish' | 'subscribe' | 'unsubscribe'>;
  /** Channel name prefix, so deployments sharing one Redis stay apart. Default `facade:`. */
  channelPrefix?: string;
  logger: Logger;
  /** Releases what the engine holds (Redis connections). */
  closeEngine?: () => Promise<void>;
  /** Traces each publication and carries its context (tracing on); absent, messages are bare events. */
  tracer?: EventTracer;
}

/** A local listener of the bus: the event, and the trace context its message carried. */
type BusListener = (event: PlatformEvent, published?: EventTraceContext) => void;

/**
 * An {@link EventBus} over any graphql-subscriptions engine (in-memory `PubSub`, `RedisPubSub`).
 *
 * The engine is subscribed once per environment and process, not once per subscriber: what
 * arrives is checked once, then handed to every local listener in turn. Ten thousand subscribers
 * cost one Redis subscription and one parse of each event, not ten thousand of each.
 */
export function createPubSubEventBus(options: PubSubEventBusOptions): EventBus {
  const { engine, logger, tracer } = options;
  const prefix = options.channelPrefix ?? 'facade:';
  const channelOf = (environment: PlatformEnvironment): string => `${prefix}events:${environment}`;
  // Per environment: the local listeners, and the engine subscription feeding them (once active).
  const channels = new Map<
    PlatformEnvironment,
    { listeners: Set<BusListener>; engineSubscription: Promise<number> }
  >();
  let closed = false;

  const deliver = (environment: PlatformEnvironment, message: unknown) => {
    // What arrives through Redis was written by another process: check it like any input.
    const parsed = toPlatformEvent(message);
    if (!parsed.ok || parsed.event.environment !== environment) {
      logger.warn('dropped a malformed message from the event bus', {
        channel: channelOf(environment),
        reason: parsed.ok ? 'environment does not match the channel' : parsed.message,
      });
      return;
    }
    // Only a tracer reads the trace context; a garbled one is dropped, the event delivered.
    const published =
      tracer === undefined
        ? undefined
        : readEventTraceContext((message as Record<string, unknown>)[TRACE_CONTEXT_MEMBER]);
    for (const listener of channels.get(environment)?.listeners ?? []) {
      try {
        listener(parsed.event, published);
      } catch (error) {
        // A throwing listener would stop the loop and starve the other subscribers.
        logger.error('an event listener threw', { error: String(error) });
      }
    }
  };

  const channelFor = (environment: PlatformEnvironment) => {
    let channel = channels.get(environment);
    if (channel === undefined) {
      const engineSubscription = engine.subscribe(
        channelOf(environment),
        (message: unknown) => deliver(environment, message),
        {},
      );
      channel = { listeners: new Set(), engineSubscription };
      channels.set(environment, channel);
      // A failed subscription is retried by the next subscriber rather than remembered.
      engineSubscription.catch(() => {
        if (channels.get(environment) === channel) channels.delete(environment);
      });
    }
    return channel;
  };

  return {
    async publish(event) {
      if (closed) throw new Error('the event bus is closed');
      const channel = channelOf(event.environment);
      if (tracer === undefined) return engine.publish(channel, event);
      await tracer.publish(event, channel, (carried) =>
        engine.publish(
          channel,
          carried === undefined ? event : { ...event, [TRACE_CONTEXT_MEMBER]: carried },
        ),
      );
    },

    async subscribe(environment, onEvent) {
      if (closed) throw new Error('the event bus is closed');
      const channel = channelFor(environment);
      await channel.engineSubscription;
      // Each call is its own listener, even for the same function: its own unsubscribe removes it.
      const listener: BusListener = (event, published) => onEvent(event, published);
      channel.listeners.add(listener);
      return () => {
        channel.listeners.delete(listener);
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      const subscriptions = [...channels.values()];
      channels.clear();
      for (const channel of subscriptions) {
        channel.listeners.clear();
        try {
          engine.unsubscribe(await channel.engineSubscription);
        } catch {
          // Never subscribed: nothing to end.
        }
      }
      await options.closeEngine?.();
    },
  };
}

/**
 * graphql-subscriptions' in-memory `PubSub`, except that a message reaches the listeners on the
 * next turn of the event loop rather than inside `publish`: the webhook is acknowledged before
 * thousands of subscribers' queues are filled, as it is with Redis, where the message comes back
 * on a socket of its own. Messages keep their order (`setImmediate` runs in the order it is called).
 */
class NextTurnPubSub extends PubSub {
  override publish(triggerName: string, payload: unknown): Promise<void> {
    setImmediate(() => {
      void super.publish(triggerName, payload);
    });
    return Promise.resolve();
  }
}

/** The default {@link EventBus}: an in-memory pub/sub, for a single replica. */
export function createMemoryEventBus(logger: Logger, tracer?: EventTracer): EventBus {
  return createPubSubEventBus({
    engine: new NextTurnPubSub(),
    logger,
    ...(tracer === undefined ? {} : { tracer }),
  });
}
