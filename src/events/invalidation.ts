/**
 * The response cache follows the platform's events: every verified, de-duplicated event drops the
 * answers it makes stale (`STALE_BY_EVENT_KIND`), on the replica that receives it before it is
 * acknowledged, and on every replica when the event reaches it through the pub/sub.
 */
import {
  COLLECTION_OF_RESOURCE_TYPE,
  type ResponseCache,
  type StaleReads,
} from '../upstream/response-cache.ts';
import type { PlatformEvent } from './receiving/platform-event.ts';
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
