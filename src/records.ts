/**
 * The catalogue of the upstream's records: one entry per record type the facade reads by key, and
 * everything the rest of the code needs to know about it. The tables that used to repeat this
 * knowledge are derived from here: the loaders (`loaders/index.ts`), the look-ahead's reads
 * (`graph/look-ahead.ts`), node ids (`graph/node.ts`), what an event's resource is and how a list
 * replays it (`graph/resource-feeds.ts`), what an event makes stale in the response cache
 * (`events/receiving/event-kinds.ts`, `events/invalidation.ts`) and which lists the reconciler
 * reads (`events/reconcile/reconciler.ts`). A new record type is one entry here
 * (docs/adding-a-resource.md); `test/unit/record-catalogue.test.ts` walks the catalogue and fails
 * when one of those tables misses an entry.
 *
 * GraphQL-free: the catalogue names GraphQL types only as strings, so the event pipeline and the
 * loaders can read it without the schema.
 */
import { getAccount, listAccounts } from './upstream/accounts.ts';
import { getCapability, listCapabilities } from './upstream/capabilities.ts';
import type { UpstreamContext } from './upstream/context.ts';
import { getCustomer, listCustomers } from './upstream/customers.ts';
import { getDocument, listDocuments } from './upstream/documents.ts';
import { getInstitution, listInstitutions } from './upstream/institutions.ts';
import { getQuote, getTransfer, listQuotes, listTransfers } from './upstream/money-movement.ts';
import { getRecipient, listRecipients } from './upstream/recipients.ts';
import { getRelatedParty, listRelatedParties } from './upstream/related-parties.ts';
import { getRule, listRules } from './upstream/rules.ts';
import { getTask, listTasks } from './upstream/tasks.ts';
import type { ListedRecord, Page, PageParams } from './upstream/types.ts';
import { getWebhookEndpoint, listWebhookEndpoints } from './upstream/webhook-endpoints.ts';

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

/** What every record type's entry holds, whatever its key. */
interface EntryBase<Kind extends string> {
  /** The prefix of its ids (`acc_`): a node id names its type by it. */
  idPrefix: `${string}_`;
  /** The path segment of its item and list routes (`accounts`). */
  collection: string;
  /** The upstream's `resourceType` for it in events. */
  resourceType: string;
  /** The names of its item and list loaders (`account`, `accounts`); the list is a customer's field too. */
  loaders: { item: string; list: string };
  /** Whether its list returns full records, which prime the item loader (a summary does not). */
  listPrimesItems: boolean;
  /** Its events; absent for a record type the platform sends no events for. */
  events?: EventSide<Kind>;
}

/** A record read by its own id: `/v3/<collection>/{id}`, its key `{ id }`. */
export interface TopLevelEntry<Kind extends string = string> extends EntryBase<Kind> {
  key: 'top-level';
  reads: {
    get: (up: UpstreamContext, id: string) => Promise<{ id: string }>;
    list: (up: UpstreamContext, page?: PageParams) => Promise<Page<{ id: string }>>;
  };
}

/** A record read under its customer: `/v3/customers/{customerId}/<collection>/{id}`, its key `{ customerId, id }`. */
export interface CustomerEntry<Kind extends string = string> extends EntryBase<Kind> {
  key: 'customer';
  reads: {
    get: (up: UpstreamContext, customerId: string, id: string) => Promise<{ id: string }>;
    list: (up: UpstreamContext, customerId: string, page?: PageParams) => Promise<Page<{ id: string }>>;
  };
}

/** One record type's entry, as the derived tables walk them. */
export type RecordEntry<Kind extends string = string> = TopLevelEntry<Kind> | CustomerEntry<Kind>;

/** What an entry of either key is given besides its reads (see {@link EntryBase}). */
interface EntryGiven<Names extends EntryBase<string>['loaders'], Collection extends string> {
  idPrefix: `${string}_`;
  collection: Collection;
  resourceType: string;
  loaders: Names;
  /** Default: true. */
  listPrimesItems?: boolean;
}

/** A record read by its own id. */
function topLevel<T, L, const Names extends { item: string; list: string }, const Collection extends string>(
  entry: EntryGiven<Names, Collection> & {
    get: (up: UpstreamContext, id: string) => Promise<T>;
    list: (up: UpstreamContext, page?: PageParams) => Promise<Page<L>>;
  },
) {
  const { get, list, ...given } = entry;
  return {
    ...withDefaults(given),
    key: 'top-level' as const,
    reads: { get, list },
    ...carried<T, L>(get, list),
  };
}

/** A record read under its customer. */
function ofCustomer<
  T,
  L,
  const Names extends { item: string; list: string },
  const Collection extends string,
>(
  entry: EntryGiven<Names, Collection> & {
    get: (up: UpstreamContext, customerId: string, id: string) => Promise<T>;
    list: (up: UpstreamContext, customerId: string, page?: PageParams) => Promise<Page<L>>;
  },
) {
  const { get, list, ...given } = entry;
  return {
    ...withDefaults(given),
    key: 'customer' as const,
    reads: { get, list },
    ...carried<T, L>(get, list),
  };
}

/**
 * The record types `get` and `list` answer, carried for the derived tables' types (no value at run
 * time).
 */
function carried<T, L>(
  _get: (...args: never[]) => Promise<T>,
  _list: (...args: never[]) => Promise<Page<L>>,
): { record: T; listed: L } {
  return { record: undefined as unknown as T, listed: undefined as unknown as L };
}

/** `listPrimesItems` unless an entry says otherwise: a list of full records primes the item loader. */
function withDefaults<Given extends EntryGiven<{ item: string; list: string }, string>>(given: Given) {
  return { ...given, listPrimesItems: given.listPrimesItems ?? true };
}

/** A record type's events: its kinds are what the webhook endpoint subscribes to. */
function events<const Kind extends string>(side: EventSide<Kind>): EventSide<Kind> {
  return side;
}

/** `created` when a record was never changed after its creation, `updated` otherwise. */
const createdOrUpdated =
  <const C extends string, const U extends string>(created: C, updated: U) =>
  (record: ListedRecord): C | U =>
    record.createdAt === record.updatedAt ? created : updated;

/**
 * Every record type, by its GraphQL type. `record` and `listed` carry the types of a record and of
 * a listed item for the derived tables (they hold no value).
 */
export const RECORDS = {
  Customer: {
    ...topLevel({
      idPrefix: 'cus_',
      collection: 'customers',
      resourceType: 'customer',
      loaders: { item: 'customer', list: 'customers' },
      get: getCustomer,
      list: listCustomers,
    }),
    events: events({
      field: 'customer',
      kinds: {
        'customer.created': ['record', 'customer-list'],
        'customer.updated': ['record', 'customer-list'],
      },
      replayedKind: createdOrUpdated('customer.created', 'customer.updated'),
      listedSince: false,
    }),
  },
  Account: {
    ...ofCustomer({
      idPrefix: 'acc_',
      collection: 'accounts',
      resourceType: 'account',
      loaders: { item: 'account', list: 'accounts' },
      get: getAccount,
      list: listAccounts,
    }),
    events: events({
      field: 'account',
      kinds: { 'account.created': ['record', 'list'], 'account.updated': ['record', 'list'] },
      replayedKind: createdOrUpdated('account.created', 'account.updated'),
      listedSince: true,
    }),
  },
  Capability: {
    ...ofCustomer({
      idPrefix: 'cap_',
      collection: 'capabilities',
      resourceType: 'capability',
      loaders: { item: 'capability', list: 'capabilities' },
      get: getCapability,
      list: listCapabilities,
    }),
    events: events({
      field: 'capability',
      kinds: { 'capability.created': ['record', 'list'], 'capability.status_changed': ['record', 'list'] },
      replayedKind: createdOrUpdated('capability.created', 'capability.status_changed'),
      listedSince: true,
    }),
  },
  RelatedParty: {
    ...ofCustomer({
      idPrefix: 'rp_',
      collection: 'related-parties',
      resourceType: 'related_party',
      loaders: { item: 'relatedParty', list: 'relatedParties' },
      // Summaries, not full records: they do not prime `relatedParty`.
      listPrimesItems: false,
      get: getRelatedParty,
      list: listRelatedParties,
    }),
    events: events({
      field: 'relatedParty',
      // A party's creation or archiving advances its customer's `updatedAt` in the same transaction.
      kinds: {
        'related_party.created': ['record', 'list', 'customer', 'customer-list'],
        'related_party.archived': ['record', 'list', 'customer', 'customer-list'],
      },
      // Parties are never updated, only created or archived, and archived ones leave the list.
      replayedKind: () => 'related_party.created',
      listedSince: true,
      unreadableOnceArchived: true,
    }),
  },
  CustomerDocument: {
    ...ofCustomer({
      idPrefix: 'doc_',
      collection: 'documents',
      resourceType: 'document',
      loaders: { item: 'document', list: 'documents' },
      get: getDocument,
      list: listDocuments,
    }),
    events: events({
      field: 'document',
      kinds: { 'document.archived': ['record', 'list'] },
      // Its one event is archiving, and archived documents leave the list: nothing to replay.
      listedSince: false,
      unreadableOnceArchived: true,
    }),
  },
  Transfer: {
    ...ofCustomer({
      idPrefix: 'trf_',
      collection: 'transfers',
      resourceType: 'transfer',
      loaders: { item: 'transfer', list: 'transfers' },
      get: getTransfer,
      list: listTransfers,
    }),
    events: events({
      field: 'transfer',
      // A transfer moves balances and, when it executes a quote, changes the quote, so those go
      // with it even though the platform also sends `account.updated`.
      kinds: {
        'transfer.created': ['record', 'list', 'accounts', 'quotes'],
        'transfer.completed': ['record', 'list', 'accounts', 'quotes'],
      },
      replayedKind: (transfer) =>
        transfer.state === 'completed' ? 'transfer.completed' : 'transfer.created',
      listedSince: true,
    }),
  },
  Rule: {
    ...ofCustomer({
      idPrefix: 'rul_',
      collection: 'rules',
      resourceType: 'rule',
      loaders: { item: 'rule', list: 'rules' },
      get: getRule,
      list: listRules,
    }),
    events: events({
      field: 'rule',
      kinds: {
        'rule.created': ['record', 'list'],
        'rule.updated': ['record', 'list'],
        'rule.archived': ['record', 'list'],
      },
      replayedKind: (rule) =>
        rule.status === 'archived'
          ? 'rule.archived'
          : rule.createdAt === rule.updatedAt
            ? 'rule.created'
            : 'rule.updated',
      listedSince: true,
    }),
  },
  Recipient: ofCustomer({
    idPrefix: 'rcp_',
    collection: 'recipients',
    resourceType: 'recipient',
    loaders: { item: 'recipient', list: 'recipients' },
    get: getRecipient,
    list: listRecipients,
  }),
  Task: ofCustomer({
    idPrefix: 'tsk_',
    collection: 'tasks',
    resourceType: 'task',
    loaders: { item: 'task', list: 'tasks' },
    get: getTask,
    list: listTasks,
  }),
  Quote: ofCustomer({
    idPrefix: 'quo_',
    collection: 'quotes',
    resourceType: 'quote',
    loaders: { item: 'quote', list: 'quotes' },
    get: getQuote,
    list: listQuotes,
  }),
  Institution: topLevel({
    idPrefix: 'ins_',
    collection: 'institutions',
    resourceType: 'institution',
    loaders: { item: 'institution', list: 'institutions' },
    get: getInstitution,
    list: listInstitutions,
  }),
  WebhookEndpoint: topLevel({
    idPrefix: 'we_',
    collection: 'webhooks',
    resourceType: 'webhook_endpoint',
    loaders: { item: 'webhookEndpoint', list: 'webhookEndpoints' },
    get: getWebhookEndpoint,
    list: listWebhookEndpoints,
  }),
} as const;

type Catalogue = typeof RECORDS;

/** The GraphQL type of each record type, the catalogue's key. */
export type RecordTypeName = keyof Catalogue;

/** The record types the platform sends events for: the members of the schema's `EventResource`. */
export type EventRecordTypeName = {
  [T in RecordTypeName]: Catalogue[T] extends { events: object } ? T : never;
}[RecordTypeName];

/** The record types read under their customer. */
export type CustomerRecordTypeName = {
  [T in RecordTypeName]: Catalogue[T]['key'] extends 'customer' ? T : never;
}[RecordTypeName];

/** A collection under a customer, as the upstream names it in its paths (`related-parties`). */
export type CustomerCollection = Catalogue[CustomerRecordTypeName]['collection'];

/** The record a type's item loader answers. */
export type RecordOf<T extends RecordTypeName> = Catalogue[T]['record'];
/** An item of a type's list (a summary, for related parties). */
export type ListedOf<T extends RecordTypeName> = Catalogue[T]['listed'];

/** The event kinds the platform sends, every record type's together. */
export type SubscribedEventKind = {
  [T in RecordTypeName]: Catalogue[T] extends { events: { kinds: infer K } } ? keyof K & string : never;
}[RecordTypeName];

/** The catalogue's entries, in its order, typed alike. */
export const RECORD_ENTRIES = Object.entries(RECORDS) as unknown as readonly (readonly [
  RecordTypeName,
  RecordEntry<SubscribedEventKind>,
])[];

/** The entry whose events name `resourceType`, with its GraphQL type; undefined for a type no record has. */
function recordOfResourceType(
  resourceType: string,
): { typename: RecordTypeName; entry: RecordEntry<SubscribedEventKind> } | undefined {
  return RECORD_BY_RESOURCE_TYPE.get(resourceType);
}

const RECORD_BY_RESOURCE_TYPE = new Map(
  RECORD_ENTRIES.map(([typename, entry]) => [entry.resourceType, { typename, entry }] as const),
);

/** The collection that holds each customer record type, by the `resourceType` events name it with. */
export const COLLECTION_OF_RESOURCE_TYPE: Readonly<Record<string, CustomerCollection>> = Object.fromEntries(
  RECORD_ENTRIES.flatMap(([, entry]) =>
    entry.key === 'customer' ? [[entry.resourceType, entry.collection as CustomerCollection]] : [],
  ),
);

/**
 * The event kind a record read from a list stands for (`account.created`, `rule.archived`, ...),
 * as a `since` replay and the reconciler name it; undefined for a resource type whose changes are
 * not replayed.
 */
export function replayedKindOf(resourceType: string, record: ListedRecord): SubscribedEventKind | undefined {
  return recordOfResourceType(resourceType)?.entry.events?.replayedKind?.(record);
}
