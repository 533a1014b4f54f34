/**
 * The event bus over Redis pub/sub, for more than one replica: an event received by one reaches
 * the subscribers of all.
 */
import { RedisPubSub } from 'graphql-redis-subscriptions';
import type { Redis } from 'ioredis';
import { createPubSubEventBus, type EventBus } from './event-bus.ts';
import type { Logger } from '../../logger.ts';
import type { EventTracer } from '../event-tracing.ts';

/** Options of {@link createRedisEventBus}. */
export interface RedisEventBusOptions {
  /** Connection for PUBLISH. Quit by `close()`. */
  publisher: Redis;
  /** A second connection: one in subscriber mode can run nothing but (P)SUBSCRIBE. Quit by `close()`. */
  subscriber: Redis;
  /** Channel name prefix shared by every replica of one deployment. Default `facade:`. */
  channelPrefix?: string;
  logger: Logger;
  /** Traces each publication and carries its context to the other replicas (tracing on). */
  tracer?: EventTracer;
}

/**
 * An {@link EventBus} over Redis pub/sub (graphql-redis-subscriptions on ioredis), shared by every
 * replica connected to the same Redis: an event published by one reaches the subscribers of all.
 */
export function createRedisEventBus(options: RedisEventBusOptions): EventBus {
  const engine = new RedisPubSub({ publisher: options.publisher, subscriber: options.subscriber });
  return createPubSubEventBus({
    engine,
    logger: options.logger,
    ...(options.channelPrefix === undefined ? {} : { channelPrefix: options.channelPrefix }),
    ...(options.tracer === undefined ? {} : { tracer: options.tracer }),
    closeEngine: async () => {
      await engine.close().catch(() => undefined);
    },
  });
}
