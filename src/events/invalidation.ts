/**
 * The response cache follows the platform's events: every verified, de-duplicated event drops the
 * answers it makes stale (`STALE_BY_EVENT_KIND`), on the replica that receives it before it is
 * acknowledged, and on every replica when the event reaches it through the pub/sub.
 */
import type { Logger } from '../logger.ts';
import {
  COLLECTION_OF_RESOURCE_TYPE,
  type ResponseCache,
  type StaleReads,
} from '../upstream/response-cache.ts';
import type { EventBus } from './fan-out/event-bus.ts';
import type { PlatformEnvironment, PlatformEvent } from './receiving/platform-event.ts';
import { STALE_BY_EVENT_KIND, type StaleByEvent } from './receiving/event-kinds.ts';

/** The answers `event` makes stale, in the cache's terms. */
export function staleReadsOfEvent(event: PlatformEvent): readonly StaleReads[] {
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
  return cache.invalidate(staleReadsOfEvent(event));
}

/** How long a failed subscription of the bus waits before it is tried again. */
const RESUBSCRIBE_DELAY_MS = 5_000;

/** The bus listener that keeps a replica's cache in step with the events every replica receives. */
export interface CacheInvalidationListener {
  /** Settles once the bus is listened to for both environments, or once a first attempt failed. */
  readonly ready: Promise<void>;
  /** Stops retrying (the bus's own `close` ends the subscriptions). */
  stop(): void;
}

/**
 * Listens to the bus for both environments and drops what each event makes stale. Subscribed as
 * the pipeline is built, before any subscriber, so this listener hears each event first. A
 * subscription that fails (Redis unreachable at start) is logged and tried again every few
 * seconds: the facade still starts, its answers then bounded by the maximum age alone.
 */
export function listenForInvalidations(
  bus: EventBus,
  cache: ResponseCache,
  logger: Logger,
): CacheInvalidationListener {
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const subscribe = (environment: PlatformEnvironment): Promise<void> =>
    bus
      .subscribe(environment, (event) => invalidateForEvent(cache, event))
      .then(
        () => undefined,
        (error: unknown) => {
          logger.error('the response cache does not hear events yet; retrying', {
            environment,
            error: String(error),
          });
          if (stopped) return;
          const timer = setTimeout(() => {
            timers.delete(timer);
            if (!stopped) void subscribe(environment);
          }, RESUBSCRIBE_DELAY_MS);
          timer.unref();
          timers.add(timer);
        },
      );
  const ready = Promise.all((['sandbox', 'live'] as const).map(subscribe)).then(() => undefined);
  return {
    ready,
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
