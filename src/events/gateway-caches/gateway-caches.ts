/**
 * The gateways' response caches follow the platform's events as the facade's own does: whatever
 * drops answers from an environment's response cache (a verified webhook at receipt and again as
 * the event reaches each replica through the log, a change the reconciler found, a write through
 * any replica) drops the answers of the same tags (`src/upstream/cache-tags.ts`) from every
 * configured gateway: Hive Gateway's shared cache in Redis, Apollo Router's through its
 * invalidation endpoint.
 *
 * Why every replica, and not only the one that received the webhook: until an event reaches a
 * replica through the log, that replica's own cache may still answer the old record, and a gateway
 * could keep that answer after the receiving replica's invalidation. Each replica invalidates the
 * gateways again once its own cache dropped the record, so no gateway keeps an answer made before
 * that (Hive Gateway's store also refuses an answer whose fetch started before the last
 * invalidation of one of its tags). The replica that received the webhook hears its event twice (at
 * receipt and from the log) and invalidates once.
 *
 * Waits: a webhook is acknowledged, and a write answered, once the gateways dropped what it made
 * stale or `GATEWAY_INVALIDATION_WAIT_MS` passed, whichever is first; a gateway that failed is tried
 * again (`GATEWAY_INVALIDATION_ATTEMPTS`, backing off) after that. An invalidation never fails the
 * webhook or the write: the gateways' answers are bounded by the `max-age` they were given
 * (`CACHE_MAX_AGE_SECONDS` at most) whatever happens.
 */
import type { Redis } from 'ioredis';
import type { Logger } from '../../logger.ts';
import { closeRedisConnection, openRedisConnection } from '../../redis.ts';
import { cacheTagsOfStale } from '../../upstream/cache-tags.ts';
import type { ResponseCache, StaleReads } from '../../upstream/response-cache.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { GatewayCachesConfig } from './config.ts';
import { invalidateHiveGatewayCache } from './hive-gateway-cache.ts';
import { postRouterInvalidation, RouterRefusedInvalidation } from './router-invalidation.ts';

/** The kinds of gateway whose cache the facade invalidates (a metric label). */
export type GatewayKind = 'hive' | 'router';

/** Told how each invalidation of each gateway ended (metrics). */
export interface GatewayInvalidationObserver {
  /** `seconds`: from the invalidation's start to its last attempt's end. */
  invalidated(gateway: GatewayKind, outcome: 'done' | 'failed', seconds: number): void;
}

export interface GatewayCaches {
  /** Invalidates the gateways with every invalidation of `cache`, whose answers are `environment`'s. */
  follow(cache: ResponseCache, environment: PlatformEnvironment | undefined): void;
  /** Waits a moment for invalidations under way (at most the wait), then closes the Redis connection. */
  close(): Promise<void>;
}

export interface GatewayCachesOptions {
  config: GatewayCachesConfig;
  logger: Logger;
  observer?: GatewayInvalidationObserver;
}

/** One gateway: how one attempt invalidates `tags` there. */
interface Target {
  readonly kind: GatewayKind;
  send(tags: readonly string[]): Promise<unknown>;
}

/** How long an event's id is remembered: the receiving replica hears it at receipt, then from the log. */
const HEARD_EVENTS_WINDOW_MS = 5 * 60_000;
/** The first pause between two attempts; each next one doubles, up to {@link MAX_BACKOFF_MS}. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;

/** The gateways of `config`; undefined when none is configured. */
export function createGatewayCaches(options: GatewayCachesOptions): GatewayCaches | undefined {
  const { config, observer } = options;
  const logger = options.logger.child({ component: 'gateway-caches' });
  const redis: Redis | undefined =
    config.hive === undefined
      ? undefined
      : openRedisConnection(config.hive.redisUrl, 'gateway-cache', logger);
  const targets: Target[] = [];
  if (config.hive !== undefined && redis !== undefined) {
    const { keyPrefix } = config.hive;
    targets.push({ kind: 'hive', send: (tags) => invalidateHiveGatewayCache(redis, keyPrefix, tags) });
  }
  const { router } = config;
  if (router !== undefined)
    targets.push({ kind: 'router', send: (tags) => postRouterInvalidation(router, tags) });
  if (targets.length === 0) return undefined;

  const heard = new Map<string, { at: number; waited: Promise<void> }>();
  const under = new Set<Promise<void>>();
  let closed = false;

  /** One gateway, tried until it answers, a refusal no retry changes, or the attempts run out. */
  const invalidateAt = async (target: Target, tags: readonly string[]): Promise<void> => {
    const started = performance.now();
    for (let attempt = 1; ; attempt += 1) {
      try {
        await target.send(tags);
        observer?.invalidated(target.kind, 'done', (performance.now() - started) / 1000);
        return;
      } catch (error) {
        const final = attempt >= config.attempts || closed || error instanceof RouterRefusedInvalidation;
        if (final) {
          observer?.invalidated(target.kind, 'failed', (performance.now() - started) / 1000);
          // Never the key nor the URL: the message names the gateway's answer at most.
          logger.error("a gateway's cache could not be told what an event or a write made stale", {
            gateway: target.kind,
            attempts: attempt,
            error: error instanceof Error ? error.message : String(error),
          });
          return;
        }
        await delay(Math.min(FIRST_BACKOFF_MS * 2 ** (attempt - 1), MAX_BACKOFF_MS));
      }
    }
  };

  const invalidate = (
    stale: readonly StaleReads[],
    environment: PlatformEnvironment | undefined,
    cause: string | undefined,
  ): Promise<void> | undefined => {
    if (closed) return undefined;
    if (cause !== undefined) {
      forgetOldEvents(heard);
      const before = heard.get(cause);
      if (before !== undefined) return before.waited;
    }
    const tags = cacheTagsOfStale(stale, environment);
    if (tags.length === 0) return undefined;
    const work = Promise.all(targets.map((target) => invalidateAt(target, tags))).then(() => undefined);
    under.add(work);
    void work.finally(() => under.delete(work));
    const waited = Promise.race([work, delay(config.waitMs)]);
    if (cause !== undefined) heard.set(cause, { at: Date.now(), waited });
    return waited;
  };

  return {
    follow(cache, environment) {
      cache.onInvalidate((stale, cause) => invalidate(stale, environment, cause));
    },
    async close() {
      closed = true;
      await Promise.race([Promise.allSettled([...under]), delay(config.waitMs)]);
      if (redis !== undefined) await closeRedisConnection(redis);
    },
  };
}

/** Drops the events heard longer ago than the window (in insertion order: the oldest first). */
function forgetOldEvents(heard: Map<string, { at: number }>): void {
  const now = Date.now();
  for (const [cause, { at }] of heard) {
    if (now - at < HEARD_EVENTS_WINDOW_MS) break;
    heard.delete(cause);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
