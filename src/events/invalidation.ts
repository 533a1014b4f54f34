/**
 * The response cache follows the platform's events: every verified, de-duplicated event drops the
 * answers it makes stale (`STALE_BY_EVENT_KIND`), on the replica that receives it before it is
 * acknowledged, and on every replica when the event reaches it through the event log.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { COLLECTION_OF_RESOURCE_TYPE, type CustomerCollection } from '../records.ts';
import { PLATFORM_ENVIRONMENTS } from '../platform-environment.ts';
import type { ResponseCache, StaleReads } from '../upstream/response-cache.ts';
import type { EventLog } from './log/event-log.ts';
import { closeRedisConnection, openRedisConnection, whenRedisReady } from '../redis.ts';
import type { RedisConfig } from '../redis-config.ts';
import type { PlatformEvent } from './event-types.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import { STALE_BY_EVENT_KIND, type StaleByEvent } from './receiving/event-kinds.ts';

/** The answers `event` makes stale, in the cache's terms. */
function staleReadsOfEvent(event: PlatformEvent): readonly StaleReads[] {
  const { resourceType, resourceId } = event.data;
  const customerId = event.data.customerId ?? (resourceType === 'customer' ? resourceId : null);
  // Nothing to narrow it down with: a resource outside any customer the facade does not know.
  if (customerId === null) return [{ kind: 'everything' }];
  const kinds = (STALE_BY_EVENT_KIND as Readonly<Record<string, readonly StaleByEvent[]>>)[event.type];
  const collection = COLLECTION_OF_RESOURCE_TYPE[resourceType];
  if (kinds === undefined || (collection === undefined && resourceType !== 'customer')) {
    return [{ kind: 'all-of-customer', customerId }, { kind: 'customer-list' }];
  }
  return kinds.flatMap((kind): StaleReads[] => {
    switch (kind) {
      case 'record':
        return collection === undefined
          ? [{ kind: 'customer', customerId }]
          : [{ kind: 'record', customerId, collection, id: resourceId }];
      case 'list':
        return collection === undefined ? [] : [{ kind: 'list', customerId, collection }];
      case 'customer':
        return [{ kind: 'customer', customerId }];
      case 'customer-list':
        return [{ kind: 'customer-list' }];
      case 'accounts':
        return [{ kind: 'collection', customerId, collection: 'accounts' }];
      case 'quotes':
        return [{ kind: 'collection', customerId, collection: 'quotes' }];
    }
  });
}

/** Drops what `event` makes stale from `cache`; the count dropped (answers and reads in flight). */
export function invalidateForEvent(cache: ResponseCache, event: PlatformEvent): number {
  return cache.invalidate(staleReadsOfEvent(event), event.id);
}

/**
 * As {@link invalidateForEvent}, settling once the gateways' caches dropped the same (within
 * `GATEWAY_INVALIDATION_WAIT_MS`): what the replica that receives a webhook does before
 * acknowledging it.
 */
export function invalidateForEventAndWait(cache: ResponseCache, event: PlatformEvent): Promise<number> {
  return cache.invalidateAndWait(staleReadsOfEvent(event), event.id);
}

/** How long a failed subscription to the event log waits before it is tried again. */
const RESUBSCRIBE_DELAY_MS = 5_000;

/** The event log listener that keeps a replica's cache in step with the events every replica receives. */
export interface CacheInvalidationListener {
  /** Settles once the event log is listened to for both environments, or once that had to be put off. */
  readonly ready: Promise<void>;
  /** Stops trying (the log's own `close` ends the subscriptions). */
  stop(): void;
}

/**
 * Listens to the event log for both environments and drops what each event makes stale.
 * Subscribed as the pipeline is built, before any subscriber, so this listener hears each event
 * first.
 *
 * With Redis (`redis`, the log's connection), nothing is subscribed before that connection is
 * ready: the log reads its position there when the first listener subscribes. A Redis away at
 * start is logged and waited for, and a failed subscription is tried again every few seconds;
 * meanwhile the facade serves, its answers bounded by the maximum age alone.
 */
export function listenForInvalidations(
  log: Pick<EventLog, 'subscribe'>,
  cache: ResponseCache,
  logger: Logger,
  redis?: Redis,
): CacheInvalidationListener {
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const retryLater = (environment: PlatformEnvironment): void => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      void subscribe(environment);
    }, RESUBSCRIBE_DELAY_MS);
    timer.unref();
    timers.add(timer);
  };
  const subscribe = async (environment: PlatformEnvironment): Promise<void> => {
    if (stopped) return;
    if (redis !== undefined && redis.status !== 'ready') {
      logger.warn('the response cache waits for Redis to hear events', { environment });
      redis.once('ready', () => void subscribe(environment));
      return;
    }
    try {
      await log.subscribe(environment, ({ event }) => invalidateForEvent(cache, event));
    } catch (error) {
      logger.error('the response cache does not hear events yet; retrying', {
        environment,
        error: String(error),
      });
      // A retry after `stop` returns at once: `subscribe` checks it first.
      retryLater(environment);
    }
  };
  const subscribeAll = async (): Promise<void> => {
    await Promise.all(PLATFORM_ENVIRONMENTS.map(subscribe));
  };
  const ready = redis === undefined ? subscribeAll() : whenRedisReady(redis).then(subscribeAll);
  return {
    ready,
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}

/** The collections a message from another replica may name: what the cache itself knows. */
const COLLECTIONS = new Set<string>(Object.values(COLLECTION_OF_RESOURCE_TYPE));

/** Options of {@link shareWriteInvalidations}. */
export interface SharedWriteInvalidationsOptions {
  cache: ResponseCache;
  /** The facade's Redis: the listener opens a connection of its own there. */
  redis: RedisConfig;
  /** `REDIS_KEY_PREFIX`: the channel is `<prefix>cache:writes`. */
  keyPrefix: string;
  /** A connection that may PUBLISH (the event log's). */
  publisher: Redis;
  logger: Logger;
}

/**
 * Carries what writes through this facade made stale to every replica, over Redis: a write is
 * visible to the next read on the replica that made it at once, and on the others as soon as the
 * message reaches them, whether or not the platform sends an event for it. A connection of its own
 * listens (one in subscriber mode can do nothing else), subscribed once it is ready; what arrives
 * was written by another process and is checked like any input.
 */
export function shareWriteInvalidations(options: SharedWriteInvalidationsOptions): {
  close(): Promise<void>;
} {
  const { cache, publisher, logger } = options;
  const channel = `${options.keyPrefix}cache:writes`;
  // Its own messages come back too; it has dropped what they name already.
  const origin = randomUUID();
  const listener = openRedisConnection(options.redis, 'cache-invalidations', logger);
  let closed = false;
  const subscribe = (): void => {
    listener.subscribe(channel).catch((error: unknown) => {
      logger.error('the response cache does not hear other replicas’ writes', { error: String(error) });
    });
  };
  if (listener.status === 'ready') subscribe();
  else listener.once('ready', subscribe);
  listener.on('message', (received: string, message: string) => {
    if (received !== channel) return;
    const parsed = parseWriteMessage(message);
    if (parsed === undefined) {
      logger.warn('dropped a malformed cache invalidation from Redis', { channel });
      return;
    }
    if (parsed.origin !== origin) cache.invalidate(parsed.stale);
  });
  cache.onWrite((stale) => {
    if (closed || stale.length === 0) return;
    publisher.publish(channel, JSON.stringify({ origin, stale })).catch((error: unknown) => {
      logger.error('could not tell the other replicas what a write made stale', { error: String(error) });
    });
  });
  return {
    async close() {
      closed = true;
      await closeRedisConnection(listener);
    },
  };
}

/** A message of {@link shareWriteInvalidations}, checked; undefined when it is not one. */
function parseWriteMessage(message: string): { origin: string; stale: StaleReads[] } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { origin, stale } = value as { origin?: unknown; stale?: unknown };
  if (typeof origin !== 'string' || !Array.isArray(stale)) return undefined;
  const checked: StaleReads[] = [];
  for (const reads of stale as unknown[]) {
    const one = toStaleReads(reads);
    if (one === undefined) return undefined;
    checked.push(one);
  }
  return { origin, stale: checked };
}

function toStaleReads(value: unknown): StaleReads | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { kind, customerId, collection, id } = value as Record<string, unknown>;
  const isId = (text: unknown): text is string =>
    typeof text === 'string' && text.length > 0 && text.length <= 512;
  const isCollection = (text: unknown): text is CustomerCollection =>
    typeof text === 'string' && COLLECTIONS.has(text);
  switch (kind) {
    case 'everything':
    case 'customer-list':
      return { kind };
    case 'customer':
    case 'all-of-customer':
      return isId(customerId) ? { kind, customerId } : undefined;
    case 'list':
    case 'collection':
      return isId(customerId) && isCollection(collection) ? { kind, customerId, collection } : undefined;
    case 'record':
      return isId(customerId) && isCollection(collection) && isId(id)
        ? { kind, customerId, collection, id }
        : undefined;
    default:
      return undefined;
  }
}
