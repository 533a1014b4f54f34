/**
 * How an entry of the record catalogue (`src/records.ts`) is written: what it says of its record
 * type, the upstream reads of each key shape, and the helpers that make an entry from its reads
 * (`topLevel`, `ofCustomer`, `ofCustomerSummarised`) and its events (`events`). An entry's types
 * are inferred from what it is given, so the tables derived from the catalogue are typed by it.
 */
import type { UpstreamContext } from './upstream/context.ts';
import type { CustomerCollection, ListedRecord, Page, PageParams } from './upstream/types.ts';

/**
 * What an event makes stale in the response cache (`events/invalidation.ts` applies it):
 * - `record`: the event's resource and what lies under it (an account's fees);
 * - `list`: its customer's list of that resource, every page and filter;
 * - `customer`: the parent customer's record; `customer-list`: the list of every customer;
 * - `accounts`, `quotes`: every account (balances) or quote (status) of the customer, records and lists.
 */
export type StaleByEvent = 'record' | 'list' | 'customer' | 'customer-list' | 'accounts' | 'quotes';

/** How a record's changes reach the subscriptions: its events, and how a `since` replays them. */
interface EventSide<Kind extends string> {
  /** The payload field of its `…Changed` subscription (`account`, with `accountId` beside it). */
  field: string;
  /**
   * The event kinds the platform sends for it, each with what it makes stale in the response
   * cache. A kind missing here (a new upstream kind) drops everything of its customer.
   */
  kinds: Readonly<Record<Kind, readonly StaleByEvent[]>>;
  /** The event kind a record read now stands for, as a `since` replay names it; absent: not replayed. */
  replayedKind?: (record: ListedRecord) => NoInfer<Kind>;
  /**
   * Whether its customer's list, filtered by `updatedSince`, shows its changes: the `since` replay
   * and the reconciler read it. Not for a customer (a scoped caller may not list customers; its
   * replay is its own read) nor for a record whose changes leave the list (archiving).
   */
  listedSince: boolean;
  /** Whether an archived record answers 404 to every read, so the event's record stands in for it. */
  unreadableOnceArchived?: boolean;
}

/** The read of one record, by key shape: by its own id, or under its customer. */
export interface GetOfShape<R> {
  'top-level': (up: UpstreamContext, id: string) => Promise<R>;
  customer: (up: UpstreamContext, customerId: string, id: string) => Promise<R>;
}

/** The read of one page of a list, by key shape: every record's, or one customer's. */
export interface ListOfShape<L> {
  'top-level': (up: UpstreamContext, page?: PageParams) => Promise<Page<L>>;
  customer: (up: UpstreamContext, customerId: string, page?: PageParams) => Promise<Page<L>>;
}

/**
 * How a record is read: by its own id (`/v3/<collection>/{id}`, `top-level`) or under its customer
 * (`/v3/customers/{customerId}/<collection>/{id}`, `customer`).
 */
export type KeyShape = keyof GetOfShape<unknown>;

/** What every entry is given besides its reads. */
interface Given<Kind extends string> {
  /** The prefix of its ids (`acc_`): a node id names its type by it. */
  idPrefix: `${string}_`;
  /** The upstream's `resourceType` for it in events. */
  resourceType: string;
  /** Its events; absent for a record type the platform sends no events for. */
  events?: EventSide<Kind>;
}

/** What a record read under its customer is given: its reads (a page of its list holds `L`) and the rest. */
type CustomerGiven<
  R,
  L,
  Collection extends CustomerCollection,
  Field extends string,
  Kind extends string,
> = Given<Kind> & {
  /** The path segment of its item and list routes (`accounts`), and the response cache's name for them. */
  collection: Collection;
  /** Its list's field on `Customer` (`accounts`). */
  listField: Field;
  get: GetOfShape<R>['customer'];
  list: ListOfShape<L>['customer'];
};

/**
 * A record read by its own id. Its list returns full records, which stand in for the record
 * (`listedAsRecord`): a record listed once is never read again.
 */
export function topLevel<R extends { id: string }, const Kind extends string = never>(
  entry: Given<Kind> & {
    /** The path segment of its item and list routes (`institutions`). */
    collection: string;
    get: GetOfShape<R>['top-level'];
    list: ListOfShape<NoInfer<R>>['top-level'];
  },
) {
  return entryOf('top-level', entry, (listed: R) => listed);
}

/** A record read under its customer, whose list returns full records (see {@link topLevel}). */
export function ofCustomer<
  R extends { id: string },
  const Collection extends CustomerCollection,
  const Field extends string,
  const Kind extends string = never,
>(entry: CustomerGiven<R, NoInfer<R>, Collection, Field, Kind>) {
  return entryOf('customer', entry, (listed: R) => listed);
}

/**
 * A record read under its customer whose list returns summaries (related parties): a summary must
 * not stand in for the record, so its list primes nothing.
 */
export function ofCustomerSummarised<
  R extends { id: string },
  L extends { id: string },
  const Collection extends CustomerCollection,
  const Field extends string,
  const Kind extends string = never,
>(entry: CustomerGiven<R, L, Collection, Field, Kind>) {
  return entryOf('customer', entry, undefined);
}

/** An entry: what it was given, its key shape, its reads, and how a listed item stands for its record. */
function entryOf<const Key extends KeyShape, Entry extends Given<string>, Get, List, AsRecord>(
  key: Key,
  { get, list, ...given }: Entry & { get: Get; list: List },
  listedAsRecord: AsRecord,
) {
  return { ...given, key, reads: { get, list }, listedAsRecord };
}

/** `created` when a record was never changed after its creation, `updated` otherwise. */
export const createdOrUpdated =
  <const C extends string, const U extends string>(created: C, updated: U) =>
  (record: ListedRecord): C | U =>
    record.createdAt === record.updatedAt ? created : updated;
