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
import { getCustomer, listCustomers } from './upstream/customers.ts';
import { getDocument, listDocuments } from './upstream/documents.ts';
import { getInstitution, listInstitutions } from './upstream/institutions.ts';
import { getQuote, getTransfer, listQuotes, listTransfers } from './upstream/money-movement.ts';
import { getRecipient, listRecipients } from './upstream/recipients.ts';
import { getRelatedParty, listRelatedParties } from './upstream/related-parties.ts';
import { getRule, listRules } from './upstream/rules.ts';
import { getTask, listTasks } from './upstream/tasks.ts';
import type { CustomerCollection, ListedRecord, Page } from './upstream/types.ts';
import { getWebhookEndpoint, listWebhookEndpoints } from './upstream/webhook-endpoints.ts';
import { createdOrUpdated, ofCustomer, ofCustomerSummarised, topLevel } from './record-entry.ts';

export type { StaleByEvent } from './record-entry.ts';
export type { CustomerCollection } from './upstream/types.ts';

/** Every record type, by its GraphQL type (docs/adding-a-resource.md says what each entry holds). */
export const RECORDS = {
  Customer: topLevel({
    idPrefix: 'cus_',
    collection: 'customers',
    resourceType: 'customer',
    get: getCustomer,
    list: listCustomers,
    events: {
      field: 'customer',
      kinds: {
        'customer.created': ['record', 'customer-list'],
        'customer.updated': ['record', 'customer-list'],
      },
      replayedKind: createdOrUpdated('customer.created', 'customer.updated'),
      listedSince: false,
    },
  }),
  Account: ofCustomer({
    idPrefix: 'acc_',
    collection: 'accounts',
    resourceType: 'account',
    listField: 'accounts',
    get: getAccount,
    list: listAccounts,
    events: {
      field: 'account',
      kinds: { 'account.created': ['record', 'list'], 'account.updated': ['record', 'list'] },
      replayedKind: createdOrUpdated('account.created', 'account.updated'),
      listedSince: true,
    },
  }),
  Capability: ofCustomer({
    idPrefix: 'cap_',
    collection: 'capabilities',
    resourceType: 'capability',
    listField: 'capabilities',
    get: getCapability,
    list: listCapabilities,
    events: {
      field: 'capability',
      kinds: { 'capability.created': ['record', 'list'], 'capability.status_changed': ['record', 'list'] },
      replayedKind: createdOrUpdated('capability.created', 'capability.status_changed'),
      listedSince: true,
    },
  }),
  // Its list returns summaries, not full records.
  RelatedParty: ofCustomerSummarised({
    idPrefix: 'rp_',
    collection: 'related-parties',
    resourceType: 'related_party',
    listField: 'relatedParties',
    get: getRelatedParty,
    list: listRelatedParties,
    events: {
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
    },
  }),
  CustomerDocument: ofCustomer({
    idPrefix: 'doc_',
    collection: 'documents',
    resourceType: 'document',
    listField: 'documents',
    get: getDocument,
    list: listDocuments,
    events: {
      field: 'document',
      kinds: { 'document.archived': ['record', 'list'] },
      // Its one event is archiving, and archived documents leave the list: nothing to replay.
      listedSince: false,
      unreadableOnceArchived: true,
    },
  }),
  Transfer: ofCustomer({
    idPrefix: 'trf_',
    collection: 'transfers',
    resourceType: 'transfer',
    listField: 'transfers',
    get: getTransfer,
    list: listTransfers,
    events: {
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
    },
  }),
  Rule: ofCustomer({
    idPrefix: 'rul_',
    collection: 'rules',
    resourceType: 'rule',
    listField: 'rules',
    get: getRule,
    list: listRules,
    events: {
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
    },
  }),
  Recipient: ofCustomer({
    idPrefix: 'rcp_',
    collection: 'recipients',
    resourceType: 'recipient',
    listField: 'recipients',
    get: getRecipient,
    list: listRecipients,
  }),
  Task: ofCustomer({
    idPrefix: 'tsk_',
    collection: 'tasks',
    resourceType: 'task',
    listField: 'tasks',
    get: getTask,
    list: listTasks,
  }),
  Quote: ofCustomer({
    idPrefix: 'quo_',
    collection: 'quotes',
    resourceType: 'quote',
    listField: 'quotes',
    get: getQuote,
    list: listQuotes,
  }),
  Institution: topLevel({
    idPrefix: 'ins_',
    collection: 'institutions',
    resourceType: 'institution',
    get: getInstitution,
    list: listInstitutions,
  }),
  WebhookEndpoint: topLevel({
    idPrefix: 'we_',
    collection: 'webhooks',
    resourceType: 'webhook_endpoint',
    get: getWebhookEndpoint,
    list: listWebhookEndpoints,
  }),
} as const;

type Catalogue = typeof RECORDS;

/** The GraphQL type of each record type, the catalogue's key. */
export type RecordTypeName = keyof Catalogue;

/** The record types the platform sends events for: the members of the schema's `EventResource`. */
export type EventRecordTypeName = {
  [T in RecordTypeName]: [EventKindOf<T>] extends [never] ? never : T;
}[RecordTypeName];
/** The event kinds of a record type's entry (none, for a type without events). */
type EventKindOf<T extends RecordTypeName> = Catalogue[T] extends { events?: { kinds: infer K } }
  ? keyof K & string
  : never;

/** The record types read under their customer. */
export type CustomerRecordTypeName = {
  [T in RecordTypeName]: Catalogue[T]['key'] extends 'customer' ? T : never;
}[RecordTypeName];

/** The record types read by their own id. */
export type TopLevelRecordTypeName = Exclude<RecordTypeName, CustomerRecordTypeName>;

/** How a type's records are read: by their own id, or under their customer. */
export type KeyShapeOf<T extends RecordTypeName> = Catalogue[T]['key'];

/**
 * What each record type's reads answer: a record, and an item of its list. An interface, so that
 * `Answers[T]` of any record type `T` is one of these answers (every listed item a `ListedRecord`).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- an interface, for the reason above
interface Answers extends AnswersTable {}
type AnswersTable = {
  [T in RecordTypeName]: {
    record: Answer<Catalogue[T]['reads']['get']>;
    listed: Answer<Catalogue[T]['reads']['list']> extends Page<infer L> ? L : never;
  };
};
type Answer<Read> = Read extends (...args: never[]) => Promise<infer A> ? A : never;

/** The record a type's item read answers. */
export type RecordOf<T extends RecordTypeName> = Answers[T]['record'];
/** An item of a type's list (a summary, for related parties). */
export type ListedOf<T extends RecordTypeName> = Answers[T]['listed'];
/** The field of `Customer` that lists a customer record type (`accounts`). */
export type ListFieldOf<T extends CustomerRecordTypeName> = Catalogue[T]['listField'];

/** The event kinds the platform sends, every record type's together. */
export type SubscribedEventKind = { [T in RecordTypeName]: EventKindOf<T> }[RecordTypeName];

/** The catalogue's record types, in its order. */
// `Object.keys` names any object's keys as strings; these are the catalogue's own.
export const RECORD_TYPES = Object.keys(RECORDS) as readonly RecordTypeName[];

/** The record types read under their customer, in the catalogue's order. */
export const CUSTOMER_RECORD_TYPES = RECORD_TYPES.filter(
  (type): type is CustomerRecordTypeName => RECORDS[type].key === 'customer',
);

/** The record types read by their own id, in the catalogue's order. */
export const TOP_LEVEL_RECORD_TYPES = RECORD_TYPES.filter(
  (type): type is TopLevelRecordTypeName => RECORDS[type].key === 'top-level',
);

/** Whether the platform sends events for records of `type`. */
export function isEventRecordType(type: RecordTypeName): type is EventRecordTypeName {
  return RECORDS[type].events !== undefined;
}

/** One entry of the catalogue, whichever. */
export type RecordEntry = Catalogue[RecordTypeName];

/** The catalogue's entries, in its order. */
export const RECORD_ENTRIES = RECORD_TYPES.map((type): readonly [RecordTypeName, RecordEntry] => [
  type,
  RECORDS[type],
]);

/**
 * A table of `make(type)` under each record type. `Table` says what `make` makes for each type:
 * `make` is generic in its type and checked by its own return type (`<T>(type: T) => X<T>` for
 * `{ [T in RecordTypeName]: X<T> }`); TypeScript cannot check a generic result against `Table[T]`,
 * which is why the table's type is given here, once, rather than inferred.
 */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- see above
export function perRecordType<Table extends Readonly<Record<RecordTypeName, unknown>>>(
  make: (type: RecordTypeName) => unknown,
): Table {
  return Object.fromEntries(RECORD_TYPES.map((type) => [type, make(type)])) as Table;
}

/**
 * A table of `make(type)` under the list field on `Customer` (`accounts`) of each customer record
 * type; `Values` says what `make` makes for each type, as for {@link perRecordType}.
 */
export function perListField<Values extends Readonly<Record<CustomerRecordTypeName, unknown>>>(
  make: (type: CustomerRecordTypeName) => unknown,
): { readonly [T in CustomerRecordTypeName as ListFieldOf<T>]: Values[T] } {
  return Object.fromEntries(CUSTOMER_RECORD_TYPES.map((type) => [RECORDS[type].listField, make(type)])) as {
    readonly [T in CustomerRecordTypeName as ListFieldOf<T>]: Values[T];
  };
}

const RECORD_BY_RESOURCE_TYPE = new Map(RECORD_ENTRIES.map(([, entry]) => [entry.resourceType, entry]));

/** The collection that holds each customer record type, by the `resourceType` events name it with. */
export const COLLECTION_OF_RESOURCE_TYPE: Readonly<Record<string, CustomerCollection>> = Object.fromEntries(
  RECORD_ENTRIES.flatMap(([, entry]) =>
    entry.key === 'customer' ? [[entry.resourceType, entry.collection]] : [],
  ),
);

/**
 * The event kind a record read from a list stands for (`account.created`, `rule.archived`, ...),
 * as a `since` replay and the reconciler name it; undefined for a resource type whose changes are
 * not replayed.
 */
export function replayedKindOf(resourceType: string, record: ListedRecord): SubscribedEventKind | undefined {
  return RECORD_BY_RESOURCE_TYPE.get(resourceType)?.events?.replayedKind?.(record);
}
