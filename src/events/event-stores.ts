/**
 * The stores of the event pipeline, as the configuration asks for them: in this process's memory
 * (one replica), or in Redis, shared by every replica (the log, its readers, de-duplication, the
 * publisher that waits for the replicas, the reconciliation state), each Redis connection opened
 * through src/redis.ts.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { closeRedisConnection, openRedisConnection, replicaAcksOf } from '../redis.ts';
import type { EventsConfig } from './config.ts';
import type { EventDeduplicator } from './dedup/event-dedup.ts';
import { createMemoryEventDeduplicator } from './dedup/memory-event-dedup.ts';
import {
  createEventPublisher,
  createRedisEventPublisher,
  type EventPublisher,
} from './dedup/publish-once.ts';
import { createRedisEventDeduplicator } from './dedup/redis-event-dedup.ts';
import type { EventTracer } from './event-tracing.ts';
import type { EventLog } from './log/event-log.ts';
import { createMemoryEventLog } from './log/memory-event-log.ts';
import { createRedisEventLog } from './log/redis-event-log.ts';
import {
  createMemoryReconcileState,
  createRedisReconcileState,
  type ReconcileState,
} from './reconcile/reconcile-state.ts';

/** What {@link createEventStores} builds. */
export interface EventStores {
  log: EventLog;
  dedup: EventDeduplicator;
  publisher: EventPublisher;
  reconcileState: ReconcileState;
  /** The connection for short commands (PING for `/readyz`, PUBLISH of invalidations); with Redis only. */
  redis?: Redis;
  /** Closes the connections the stores opened (the log closes its readers itself). */
  closeRedis?: () => Promise<void>;
}

/**
 * The stores of the event pipeline as `config` asks for them: in memory, or in Redis (the log, its
 * readers, de-duplication and the publisher that waits for the replicas, the reconciliation state).
 * The runtime builds them; benchmarks build them alone (bench/event-durability.ts).
 */
export function createEventStores(
  config: EventsConfig,
  logger: Logger,
  tracer: EventTracer | undefined,
): EventStores {
  const retentionMs = config.webhooks.dedupRetentionSeconds * 1000;
  const retention = config.logRetention;
  const traced = tracer === undefined ? {} : { tracer };
  if (config.redis === undefined) {
    const log = createMemoryEventLog({ retention, keyPrefix: config.redisKeyPrefix, logger, ...traced });
    const dedup = createMemoryEventDeduplicator({ retentionMs });
    return {
      log,
      dedup,
      publisher: createEventPublisher({ dedup, log, logger }),
      reconcileState: createMemoryReconcileState(),
    };
  }
  // One connection for log reads, reconciliation and the other short commands; one for appends and
  // claims, whose WAIT for the replicas blocks it (so nothing else waits behind it); each
  // environment's blocking XREAD gets one of its own (opened by the log, closed by it).
  const { redis } = config;
  const client = openRedisConnection(redis, 'events', logger);
  const appender = openRedisConnection(redis, 'event-appends', logger);
  const log = createRedisEventLog({
    client,
    appender,
    acks: redis.acks,
    openReader: (environment) => openRedisConnection(redis, `log-reader-${environment}`, logger),
    keyPrefix: config.redisKeyPrefix,
    retention,
    logger,
    ...traced,
  });
  const dedup = createRedisEventDeduplicator({
    client: appender,
    keyPrefix: config.redisKeyPrefix,
    retentionMs,
  });
  return {
    redis: client,
    log,
    dedup,
    publisher: createRedisEventPublisher({ dedup, log, acks: replicaAcksOf(appender, redis.acks) }),
    reconcileState: createRedisReconcileState({
      client,
      keyPrefix: config.redisKeyPrefix,
      // A replica vouches for its watched customers for a few intervals; it refreshes every one.
      watchTtlMs: () => Math.max(3 * config.reconcile.intervalSeconds * 1000, 30_000),
    }),
    closeRedis: async () => {
      await Promise.all([closeRedisConnection(client), closeRedisConnection(appender)]);
    },
  };
}
