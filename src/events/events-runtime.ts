/**
 * The event pipeline of one facade process, assembled from configuration: the webhook route, the
 * event log and de-duplication store (memory, or Redis when one is configured), the live sessions
 * every live transport delivers through (src/edge/ admits their callers and operations), the
 * reconciler of missed webhooks, registration of the webhook endpoint at start, and the shutdown
 * order.
 */
import type { IncomingMessage } from 'node:http';
import type { Redis } from 'ioredis';
import type { ApolloServerPlugin } from '@apollo/server';
import type { Router } from 'express';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import type { UpstreamClient } from '../upstream/client.ts';
import type { KeyEnvironments } from '../upstream/key-environments.ts';
import { PLATFORM_SCOPE } from '../upstream/access.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import { PLATFORM_ENVIRONMENTS } from '../platform-environment.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { createLiveQueries } from './delivery/live-queries.ts';
import { createEventStores } from './event-stores.ts';
import { listenForInvalidations, shareWriteInvalidations } from './invalidation.ts';
import { WEBHOOK_PATH, type EventsConfig } from './config.ts';
import type { EventTracer } from './event-tracing.ts';
import { cursorCodec } from './log/cursor-codec.ts';
import type { LogStats } from './log/event-log.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import { createReconciler } from './reconcile/reconciler.ts';
import { SUBSCRIBED_EVENT_KINDS } from './receiving/event-kinds.ts';
import { createLiveSessions, type LiveSessions } from './delivery/live-sessions.ts';
import { registerWebhookEndpoint } from './receiving/register-webhook-endpoint.ts';
import { webhookRouterOptions } from './receiving/webhook-route-options.ts';
import { createUpstreamWebhookEndpointsApi } from './receiving/upstream-webhook-endpoints.ts';
import type { LiveObserver } from './delivery/live-context.ts';
import type { LifecycleEmitter } from '../observability/lifecycle.ts';
import { createDeadLetterRecord, type DeadLetter, type DeadLetterRecord } from './receiving/dead-letters.ts';
import {
  createWebhookRouter,
  type WebhookDeliveryOutcome,
  type WebhookRouter,
} from './receiving/webhook-route.ts';
import { NOT_YET, settleWithin } from '../settle-within.ts';

/** Options of {@link createEventsRuntime}. */
export interface EventsRuntimeOptions {
  config: EventsConfig;
  /** The facade's configured key: registration uses it, and connections without a key of their own. */
  defaultApiKey: UpstreamKey;
  /** The environment of each upstream key: the reconciler reconciles its key's. */
  keyEnvironments: KeyEnvironments;
  upstreamClient: UpstreamClient;
  logger: Logger;
  /** Told how each webhook delivery was answered, and on whose environment's route (metrics). */
  onWebhookDelivery?: (outcome: WebhookDeliveryOutcome, environment: PlatformEnvironment | undefined) => void;
  /** A webhook sender's address (trusted proxies applied), for the per-address webhook limits. */
  addressOf?: (request: IncomingMessage) => string;
  /** Told about deliveries to subscribers and queue overflows (metrics). */
  liveObserver?: LiveObserver;
  /** Told of each signed webhook event parked as one that can never be processed (metrics). */
  onDeadLetter?: (letter: DeadLetter) => void;
  /** Told how many changes each reconciliation of missed webhooks appended (metrics). */
  onReconciled?: (count: number) => void;
  /** Told of each customer whose reconciliation reads failed in a run (metrics). */
  onReconcileFailed?: () => void;
  /** Told when a webhook event is published. */
  lifecycle?: LifecycleEmitter;
  /**
   * With tracing on: spans of each webhook's receipt, its publish (whose context travels with the
   * event) and its delivery to each subscriber. Absent, nothing of the kind is built.
   */
  tracer?: EventTracer;
  /**
   * With a key per environment, the one environment this pipeline serves: its webhook route is
   * `WEBHOOK_PATH/<environment>` and takes that environment's events only. Absent: one pipeline,
   * at {@link WEBHOOK_PATH}.
   */
  environment?: PlatformEnvironment;
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
  /** Signed webhook events that can never be processed, parked (in Redis with `REDIS_URL`). */
  readonly deadLetters: Pick<DeadLetterRecord, 'list'>;
  /** Mounts the webhook route at {@link WEBHOOK_PATH} (and the environment's name, when it serves one). Call once. */
  attach(host: EventsHost): void;
  /**
   * Registers (or reuses) the webhook endpoint when registration is on. `baseUrl` is the facade's
   * listening URL, the default webhook address when `WEBHOOK_PUBLIC_URL` is unset.
   */
  start(baseUrl: string): Promise<void>;
  /** Stops taking webhooks and ends every subscriber's queue. Idempotent. */
  drain(): Promise<void>;
  /** Drains, then closes the event log and Redis connections. Idempotent. */
  close(): Promise<void>;
  /** The event log's length and this replica's lag behind its head, per environment (metrics). */
  logStats(): Promise<(LogStats & { environment: PlatformEnvironment })[]>;
  /** Whether Redis answers PING (within `timeoutMs`); undefined without Redis. */
  checkRedis(timeoutMs?: number): Promise<RedisCheck | undefined>;
}

/** What `/readyz` reports about Redis. */
export type RedisCheck = { reachable: true } | { reachable: false; reason: string };

/** Builds the event pipeline; nothing is mounted or registered until `attach` and `start`. */
export function createEventsRuntime(options: EventsRuntimeOptions): EventsRuntime {
  const { config, upstreamClient } = options;
  const webhookPath =
    options.environment === undefined ? WEBHOOK_PATH : `${WEBHOOK_PATH}/${options.environment}`;
  const logger = options.logger.child({
    component: 'events',
    ...(options.environment === undefined ? {} : { environment: options.environment }),
  });
  const { tracer } = options;
  const stores = createEventStores(config, logger, tracer);
  const { log, dedup, publisher, redis, closeRedis, reconcileState } = stores;
  const deadLetters = createDeadLetterRecord(redis, config, options.environment);
  const reconciler =
    config.reconcile.intervalSeconds > 0
      ? createReconciler({
          log,
          dedup,
          publisher,
          state: reconcileState,
          upstreamClient,
          apiKey: options.defaultApiKey,
          keyEnvironments: options.keyEnvironments,
          intervalSeconds: config.reconcile.intervalSeconds,
          graceSeconds: config.reconcile.graceSeconds,
          logger,
          ...(options.onReconciled === undefined ? {} : { onReconciled: options.onReconciled }),
          ...(options.onReconcileFailed === undefined ? {} : { onCustomerFailed: options.onReconcileFailed }),
        })
      : undefined;
  const liveObserver = tracedLiveObserver(options.liveObserver, tracer);
  const cache = upstreamClient.cache;
  // Every replica drops what each event makes stale as the event reaches it, before any subscriber
  // of this process hears it (this listener is the log's first). `start` waits for it.
  const invalidations = cache === undefined ? undefined : listenForInvalidations(log, cache, logger, redis);
  // Writes through this replica reach the others' caches through Redis, event or no event.
  const sharedWrites = shareWritesThroughRedis(config, cache, redis, logger);
  let secrets: readonly string[] = config.webhooks.secrets;
  let webhooks: WebhookRouter | undefined;
  const live = createLiveSessions({
    log,
    // With a key per environment, this pipeline's cursors name its environment.
    cursors: cursorCodec(options.environment),
    queueLimit: config.subscriberQueueLimit,
    observer: liveObserver,
    watchCustomer: (environment, customerId) => reconcileState.watch(environment, customerId),
    // Live queries re-run on what the cache's invalidations name: webhooks, writes, the reconciler.
    liveQueries: cache === undefined ? undefined : createLiveQueries(cache),
  });
  let draining: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const upstreamAs = (apiKey: UpstreamKey) =>
    createUpstreamContext(upstreamClient, { apiKey, scope: PLATFORM_SCOPE });

  /** Registers (or reuses) the webhook endpoint when registration is on. */
  const registerAtStart = async (baseUrl: string): Promise<void> => {
    if (!config.webhooks.register) {
      if (secrets.length === 0) {
        logger.warn(
          'webhooks are not registered and WEBHOOK_SECRETS is empty: every delivery will be refused',
        );
      }
      return;
    }
    const url =
      config.webhooks.publicUrl === undefined
        ? `${baseUrl}${webhookPath}`
        : options.environment === undefined
          ? config.webhooks.publicUrl
          : `${config.webhooks.publicUrl.replace(/\/+$/, '')}/${options.environment}`;
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
  };

  const runtime: EventsRuntime = {
    live,
    deadLetters,
    apolloPlugin: drainedWithApollo(() => runtime.drain()),

    attach(host) {
      if (webhooks !== undefined) throw new Error('the event pipeline is attached already');
      webhooks = createWebhookRouter(
        webhookRouterOptions(options, {
          secrets: () => secrets,
          dedup,
          log,
          publisher,
          logger,
          cache,
          deadLetters,
        }),
      );
      host.routes.use(webhookPath, webhooks.router);
    },

    async start(baseUrl) {
      await invalidations?.ready;
      await registerAtStart(baseUrl);
      reconciler?.start();
    },

    drain() {
      draining ??= (async () => {
        webhooks?.stopAccepting();
        await reconciler?.stop();
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
        await log.close();
        await closeRedis?.();
      })();
      return closing;
    },

    async logStats() {
      return Promise.all(
        PLATFORM_ENVIRONMENTS.map(async (environment) => ({
          environment,
          ...(await log.stats(environment)),
        })),
      );
    },
    checkRedis: (timeoutMs = 1_000) =>
      redis === undefined ? Promise.resolve(undefined) : pingRedis(redis, timeoutMs),
  };
  return runtime;
}

/** The plugin that drains the pipeline when Apollo Server drains (it runs every plugin's `drainServer`). */
function drainedWithApollo(drain: () => Promise<void>): ApolloServerPlugin<GraphContext> {
  return {
    async serverWillStart() {
      return {
        async drainServer() {
          await drain();
        },
      };
    },
  };
}

/** {@link shareWriteInvalidations} when the pipeline has a response cache and Redis; else nothing to share. */
function shareWritesThroughRedis(
  config: EventsConfig,
  cache: UpstreamClient['cache'],
  redis: Redis | undefined,
  logger: Logger,
): ReturnType<typeof shareWriteInvalidations> | undefined {
  if (cache === undefined || redis === undefined || config.redis === undefined) return undefined;
  const { redisKeyPrefix: keyPrefix } = config;
  return shareWriteInvalidations({ cache, redis: config.redis, keyPrefix, publisher: redis, logger });
}

/** `observer`, with delivery spans opened where the metrics hear of deliveries (tracing on). */
function tracedLiveObserver(
  observer: LiveObserver | undefined,
  tracer: EventTracer | undefined,
): LiveObserver | undefined {
  if (tracer === undefined) return observer;
  const working = observer?.working?.bind(observer);
  return {
    ...(working === undefined ? {} : { working }),
    delivered: (event) => observer?.delivered(event),
    replayed: () => observer?.replayed?.(),
    overflowed: () => observer?.overflowed(),
    traceDelivery: (event, published, operationName) => tracer.deliver(event, published, operationName),
  };
}

/** Whether `redis` answers PING within `timeoutMs`, for `/readyz`. */
async function pingRedis(redis: Redis, timeoutMs: number): Promise<RedisCheck> {
  try {
    const answered = await settleWithin(redis.ping(), timeoutMs);
    return answered === NOT_YET ? { reachable: false, reason: 'timeout' } : { reachable: true };
  } catch {
    // No message kept: an ioredis error never carries the URL, but a reason must stay short.
    return { reachable: false, reason: 'unreachable' };
  }
}
