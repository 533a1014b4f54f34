/**
 * The event pipeline of one facade process, assembled from configuration: the webhook route, the
 * pub/sub and de-duplication store (memory, or Redis when `REDIS_URL` is set), the live sessions
 * every live transport delivers through (src/edge/ admits their callers and operations),
 * registration of the webhook endpoint at start, and the shutdown order.
 */
import type { IncomingMessage } from 'node:http';
import type { Redis } from 'ioredis';
import type { ApolloServerPlugin } from '@apollo/server';
import type { Router } from 'express';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import type { UpstreamClient } from '../upstream/client.ts';
import { PLATFORM_SCOPE } from '../upstream/access.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import { invalidateForEvent, listenForInvalidations, shareWriteInvalidations } from './invalidation.ts';
import { WEBHOOK_PATH, type EventsConfig } from './config.ts';
import type { EventTracer } from './event-tracing.ts';
import { createMemoryEventBus, type EventBus } from './fan-out/event-bus.ts';
import type { EventDeduplicator } from './fan-out/event-dedup.ts';
import { SUBSCRIBED_EVENT_KINDS } from './receiving/event-kinds.ts';
import { createLiveSessions, type LiveSessions } from './delivery/live-sessions.ts';
import { createMemoryEventDeduplicator } from './fan-out/memory-event-dedup.ts';
import { openRedisConnection } from './fan-out/redis-connection.ts';
import { createRedisEventBus } from './fan-out/redis-event-bus.ts';
import { createRedisEventDeduplicator } from './fan-out/redis-event-dedup.ts';
import { registerWebhookEndpoint } from './receiving/register-webhook-endpoint.ts';
import { webhookBodyLimits } from './config.ts';
import { createUpstreamWebhookEndpointsApi } from './receiving/upstream-webhook-endpoints.ts';
import type { LiveObserver } from './delivery/live-context.ts';
import type { LifecycleEmitter } from '../observability/lifecycle.ts';
import {
  createWebhookRouter,
  type WebhookDeliveryOutcome,
  type WebhookRouter,
} from './receiving/webhook-route.ts';

/** Options of {@link createEventsRuntime}. */
export interface EventsRuntimeOptions {
  config: EventsConfig;
  /** The facade's configured key: registration uses it, and connections without a key of their own. */
  defaultApiKey: string;
  upstreamClient: UpstreamClient;
  logger: Logger;
  /** Told how each webhook delivery was answered (metrics). */
  onWebhookDelivery?: (outcome: WebhookDeliveryOutcome) => void;
  /** A webhook sender's address (trusted proxies applied), for the per-address webhook limits. */
  addressOf?: (request: IncomingMessage) => string;
  /** Told about deliveries to subscribers and queue overflows (metrics). */
  liveObserver?: LiveObserver;
  /** Told when a webhook event is published. */
  lifecycle?: LifecycleEmitter;
  /**
   * With tracing on: spans of each webhook's receipt, its publish (whose context travels with the
   * event) and its delivery to each subscriber. Absent, nothing of the kind is built.
   */
  tracer?: EventTracer;
}

/** The parts of the app the event pipeline plugs into. */
export interface EventsHost {
  routes: Router;
}

/** The event pipeline of one process, as the app mounts, starts and stops it. */
export interface EventsRuntime {
  /** Drains the pipeline while Apollo Server stops (Apollo runs every plugin's drainServer). */
  readonly apolloPlugin: ApolloServerPlugin<GraphContext>;
  /** Subscribers, their queues and shared event reads, for every live transport's adapter. */
  readonly live: LiveSessions;
  /** Mounts the webhook route at {@link WEBHOOK_PATH}. Call once. */
  attach(host: EventsHost): void;
  /**
   * Registers (or reuses) the webhook endpoint when registration is on. `baseUrl` is the facade's
   * listening URL, the default webhook address when `WEBHOOK_PUBLIC_URL` is unset.
   */
  start(baseUrl: string): Promise<void>;
  /** Stops taking webhooks and ends every subscriber's queue. Idempotent. */
  drain(): Promise<void>;
  /** Drains, then closes the pub/sub and Redis connections. Idempotent. */
  close(): Promise<void>;
  /** Whether Redis answers PING (within `timeoutMs`); undefined when `REDIS_URL` is not set. */
  checkRedis(timeoutMs?: number): Promise<RedisCheck | undefined>;
}

/** What `/readyz` reports about Redis. */
export type RedisCheck = { reachable: true } | { reachable: false; reason: string };

/** Builds the event pipeline; nothing is mounted or registered until `attach` and `start`. */
export function createEventsRuntime(options: EventsRuntimeOptions): EventsRuntime {
  const { config, upstreamClient, lifecycle } = options;
  const logger = options.logger.child({ component: 'events' });
  const { tracer } = options;
  const { bus, dedup, redis, subscriber } = createStores(config, logger, tracer);
  // Delivery spans are opened where the metrics hear of deliveries.
  const liveObserver: LiveObserver | undefined =
    tracer === undefined
      ? options.liveObserver
      : {
          delivered: (event) => options.liveObserver?.delivered(event),
          overflowed: () => options.liveObserver?.overflowed(),
          traceDelivery: (event, published, operationName) => tracer.deliver(event, published, operationName),
        };
  const cache = upstreamClient.cache;
  // Every replica drops what each event makes stale as the event reaches it, before any subscriber
  // of this process hears it (this listener is the bus's first). `start` waits for it.
  const invalidations =
    cache === undefined ? undefined : listenForInvalidations(bus, cache, logger, subscriber);
  // Writes through this replica reach the others' caches through Redis, event or no event.
  const sharedWrites =
    cache === undefined || redis === undefined || config.redisUrl === undefined
      ? undefined
      : shareWriteInvalidations({
          cache,
          redisUrl: config.redisUrl,
          keyPrefix: config.redisKeyPrefix,
          publisher: redis,
          logger,
        });
  let secrets: readonly string[] = config.webhooks.secrets;
  let webhooks: WebhookRouter | undefined;
  const live = createLiveSessions({ bus, queueLimit: config.subscriberQueueLimit, observer: liveObserver });
  let draining: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const upstreamAs = (apiKey: string) =>
    createUpstreamContext(upstreamClient, { apiKey, scope: PLATFORM_SCOPE });

  const runtime: EventsRuntime = {
    live,
    apolloPlugin: {
      async serverWillStart() {
        return {
          async drainServer() {
            await runtime.drain();
          },
        };
      },
    },

    attach(host) {
      if (webhooks !== undefined) throw new Error('the event pipeline is attached already');
      webhooks = createWebhookRouter({
        secrets: () => secrets,
        dedup,
        bus,
        logger,
        maxBodyBytes: config.webhooks.maxBodyBytes,
        bodyLimits: webhookBodyLimits(config.webhooks),
        refusals: { limit: config.webhooks.maxRefusalsPerMinute, windowMs: 60_000 },
        ...(options.addressOf === undefined ? {} : { addressOf: options.addressOf }),
        toleranceSeconds: config.webhooks.toleranceSeconds,
        ...(options.onWebhookDelivery === undefined ? {} : { onDelivery: options.onWebhookDelivery }),
        // The receiving replica drops the stale answers before acknowledging: a read that starts
        // after the acknowledgement asks the upstream.
        ...(cache === undefined ? {} : { beforePublish: (event) => invalidateForEvent(cache, event) }),
        ...(lifecycle === undefined
          ? {}
          : {
              onPublished: (event) => {
                if (!lifecycle.observed('webhookEventPublished')) return;
                lifecycle.emit('webhookEventPublished', {
                  eventId: event.id,
                  type: event.type,
                  environment: event.environment,
                  customerId: event.data.customerId,
                });
              },
            }),
        ...(tracer === undefined ? {} : { tracer }),
      });
      host.routes.use(WEBHOOK_PATH, webhooks.router);
    },

    async start(baseUrl) {
      await invalidations?.ready;
      if (!config.webhooks.register) {
        if (secrets.length === 0) {
          logger.warn(
            'webhooks are not registered and WEBHOOK_SECRETS is empty: every delivery will be refused',
          );
        }
        return;
      }
      const url = config.webhooks.publicUrl ?? `${baseUrl}${WEBHOOK_PATH}`;
      // A failed registration fails the start: a facade that cannot receive events would serve
      // subscriptions that never deliver anything.
      const registration = await registerWebhookEndpoint({
        api: createUpstreamWebhookEndpointsApi(() => upstreamAs(options.defaultApiKey)),
        url,
        events: SUBSCRIBED_EVENT_KINDS,
        configuredSecrets: config.webhooks.secrets,
        logger,
      });
      secrets = registration.secrets;
    },

    drain() {
      draining ??= (async () => {
        webhooks?.stopAccepting();
        live.endAll();
      })();
      return draining;
    },

    close() {
      closing ??= (async () => {
        await runtime.drain();
        invalidations?.stop();
        await sharedWrites?.close();
        await dedup.close();
        await bus.close();
      })();
      return closing;
    },

    async checkRedis(timeoutMs = 1_000) {
      if (redis === undefined) return undefined;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      });
      try {
        await Promise.race([redis.ping(), timeout]);
        return { reachable: true };
      } catch (error) {
        // The message only: an ioredis error never carries the URL, but a reason must stay short.
        const reason = error instanceof Error && error.message === 'timeout' ? 'timeout' : 'unreachable';
        return { reachable: false, reason };
      } finally {
        clearTimeout(timer);
      }
    },
  };
  return runtime;
}

function createStores(
  config: EventsConfig,
  logger: Logger,
  tracer: EventTracer | undefined,
): { bus: EventBus; dedup: EventDeduplicator; redis?: Redis; subscriber?: Redis } {
  const retentionMs = config.webhooks.dedupRetentionSeconds * 1000;
  if (config.redisUrl === undefined) {
    return {
      bus: createMemoryEventBus(logger, tracer),
      dedup: createMemoryEventDeduplicator({ retentionMs }),
    };
  }
  // Two connections: one in subscriber mode can run nothing else, so PUBLISH and the
  // de-duplication commands share the other. The bus quits both on close.
  const publisher = openRedisConnection(config.redisUrl, 'publisher', logger);
  const subscriber = openRedisConnection(config.redisUrl, 'subscriber', logger);
  return {
    redis: publisher,
    subscriber,
    bus: createRedisEventBus({
      publisher,
      subscriber,
      channelPrefix: config.redisKeyPrefix,
      logger,
      ...(tracer === undefined ? {} : { tracer }),
    }),
    dedup: createRedisEventDeduplicator({ client: publisher, keyPrefix: config.redisKeyPrefix, retentionMs }),
  };
}
