/**
 * What an event or a write makes stale, named by kind ({@link StaleReads}), and which held answers'
 * paths each names. The response cache drops by it, live queries re-run by it, and a write through
 * the facade is turned into it from its request alone ({@link staleReadsOfWrite}).
 */
import type { CustomerCollection } from './types.ts';

/** Answers made stale by a change: what an event or a write names. */
export type StaleReads =
  /** The list of every customer (any page or filter). */
  | { kind: 'customer-list' }
  /** One customer's own record (not what lies under it). */
  | { kind: 'customer'; customerId: string }
  /** One record of a customer's collection, and what lies under it (an account's fees). */
  | { kind: 'record'; customerId: string; collection: CustomerCollection; id: string }
  /** A customer's list of a collection (any page or filter). */
  | { kind: 'list'; customerId: string; collection: CustomerCollection }
  /** A customer's whole collection: every record of it, what lies under them, and its list. */
  | { kind: 'collection'; customerId: string; collection: CustomerCollection }
  /** Everything of one customer: its record and everything under it. */
  | { kind: 'all-of-customer'; customerId: string }
  /** Every answer held (an event of a kind the facade does not know). */
  | { kind: 'everything' };

/** The customer a path belongs to (still encoded, as paths carry it). */
const CUSTOMER_OF_PATH = /^\/v3\/customers\/([^/]+)/;
/** The index bucket of paths that belong to no customer. */
export const PLATFORM_BUCKET = '';

/**
 * Which paths (without query) `stale` names: what a live query that read one of them must run
 * again for. Made once per invalidation, then asked of every path read.
 */
export function pathMatcherOf(stale: StaleReads): (path: string) => boolean {
  return stale.kind === 'everything' ? () => true : matcherOf(stale);
}

/**
 * The bucket of the paths `stale` names: its customer as paths carry it (encoded), or the bucket
 * of paths that belong to no customer for the list of customers; undefined for everything.
 */
export function bucketOfStale(stale: StaleReads): string | undefined {
  if (stale.kind === 'everything') return undefined;
  return stale.kind === 'customer-list' ? PLATFORM_BUCKET : encodeURIComponent(stale.customerId);
}

/** The bucket of `path`: its customer as the path carries it (encoded), or {@link PLATFORM_BUCKET}. */
export function bucketOf(path: string): string {
  return CUSTOMER_OF_PATH.exec(path)?.[1] ?? PLATFORM_BUCKET;
}

/** Which paths (without query) `reads` names. */
function matcherOf(reads: Exclude<StaleReads, { kind: 'everything' }>): (path: string) => boolean {
  switch (reads.kind) {
    case 'customer-list':
      return (path) => path === '/v3/customers';
    case 'customer': {
      const record = customerPath(reads.customerId);
      return (path) => path === record;
    }
    case 'all-of-customer': {
      const record = customerPath(reads.customerId);
      return (path) => path === record || path.startsWith(`${record}/`);
    }
    case 'list': {
      const list = `${customerPath(reads.customerId)}/${reads.collection}`;
      return (path) => path === list;
    }
    case 'collection': {
      const list = `${customerPath(reads.customerId)}/${reads.collection}`;
      return (path) => path === list || path.startsWith(`${list}/`);
    }
    case 'record': {
      const record = `${customerPath(reads.customerId)}/${reads.collection}/${encodeURIComponent(reads.id)}`;
      return (path) => path === record || path.startsWith(`${record}/`);
    }
  }
}

/** The path of a customer's record, encoded as `restPath` encodes it. */
function customerPath(customerId: string): string {
  return `/v3/customers/${encodeURIComponent(customerId)}`;
}

/**
 * What a write through the facade makes stale: everything of the customer it acts for (the one its
 * path names, or `actingFor`) and the list of customers, whose records carry `updatedAt`. A superset
 * of what `src/loaders/written.ts` drops for its own operation, decided from the request alone, so
 * no write can leave an answer behind, including one that failed after reaching the upstream.
 * Creating a customer changes only the list; a webhook endpoint is never kept; any other write that
 * names no customer (an operator's sandbox top-up moves money on an account it names alone) drops
 * everything rather than guess.
 */
export function staleReadsOfWrite(path: string, actingFor: string | undefined): readonly StaleReads[] {
  if (path === '/v3/customers') return [{ kind: 'customer-list' }];
  if (/^\/v3\/webhooks(?:\/|$)/.test(path)) return [];
  const customer = /^\/v3\/(?:sandbox\/)?customers\/([^/]+)/.exec(path)?.[1];
  const customerId = customer === undefined ? actingFor : safeDecode(customer);
  if (customerId === undefined) return [{ kind: 'everything' }];
  return [{ kind: 'all-of-customer', customerId }, { kind: 'customer-list' }];
}

function safeDecode(encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}
