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

/**
 * Fan-out of verified upstream events to every subscriber of every replica.
 *
 * One channel per environment (`<prefix>events:sandbox`, `<prefix>events:live`): a subscriber
 * listens only to the channel of the environment its credentials belong to, so an event of the
 * other environment cannot reach it, whatever the filters above do. Filtering by customer, resource
 * and kind happens in the subscriber, which needs the whole event anyway; one channel per kind would
 * multiply Redis subscriptions for `events(types: [...])` and gain nothing.
 */
export interface EventBus {
  /** Hands `event` to every subscriber of its environment. Resolves once the pub/sub accepted it. */
  publish(event: PlatformEvent): Promise<void>;
  /**
   * Calls `onEvent` for every event of `environment` published from now on. Resolves once the
   * subscription is active, so what is published after that is not missed. `onEvent` must not throw
   * or block: the listener of one subscriber is called in line with the others.
   *
   * @returns A function that ends this subscription; calling it twice is harmless.
   */
  subscribe(environment: PlatformEnvironment, onEvent: (event: PlatformEvent) => void): Promise<() => void>;
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
}

/** An {@link EventBus} over any graphql-subscriptions engine (in-memory `PubSub`, `RedisPubSub`). */
export function createPubSubEventBus(options: PubSubEventBusOptions): EventBus {
  const { engine, logger } = options;
  const prefix = options.channelPrefix ?? 'facade:';
  const channelOf = (environment: PlatformEnvironment): string => `${prefix}events:${environment}`;
  const active = new Set<number>();
  let closed = false;

  return {
    async publish(event) {
      if (closed) throw new Error('the event bus is closed');
      await engine.publish(channelOf(event.environment), event);
    },

    async subscribe(environment, onEvent) {
      if (closed) throw new Error('the event bus is closed');
      const subscriptionId = await engine.subscribe(
        channelOf(environment),
        (message: unknown) => {
          // What arrives through Redis was written by another process: check it like any input.
          const parsed = toPlatformEvent(message);
          if (!parsed.ok || parsed.event.environment !== environment) {
            logger.warn('dropped a malformed message from the event bus', {
              channel: channelOf(environment),
              reason: parsed.ok ? 'environment does not match the channel' : parsed.message,
            });
            return;
          }
          try {
            onEvent(parsed.event);
          } catch (error) {
            // A throwing listener would stop the engine's loop and starve the other subscribers.
            logger.error('an event listener threw', { error: String(error) });
          }
        },
        {},
      );
      active.add(subscriptionId);
      return () => {
        if (!active.delete(subscriptionId)) return;
        engine.unsubscribe(subscriptionId);
      };
    },

    async close() {
      if (closed) return;
      closed = true;
      for (const subscriptionId of active) engine.unsubscribe(subscriptionId);
      active.clear();
      await options.closeEngine?.();
    },
  };
}

/** The default {@link EventBus}: graphql-subscriptions' in-memory `PubSub`, for a single replica. */
export function createMemoryEventBus(logger: Logger): EventBus {
  return createPubSubEventBus({ engine: new PubSub(), logger });
}
