/**
 * The per-operation DataLoaders over the upstream API. One set is created for each GraphQL
 * operation (and each subscription event), so nothing is shared between callers or outlives the
 * operation: within it, the same upstream request is made at most once, and independent reads run
 * in parallel.
 */
import type DataLoader from 'dataloader';
import {
  getAccount,
  getAccountFees,
  getCapability,
  getCustomer,
  getDocument,
  getInstitution,
  getQuote,
  getRecipient,
  getRelatedParty,
  getRule,
  getTask,
  getTaskSubmission,
  getTransfer,
  getWebhookEndpoint,
  listAccounts,
  listCapabilities,
  listCustomers,
  listDocuments,
  listInstitutions,
  listQuotes,
  listRecipients,
  listRelatedParties,
  listRules,
  listTaskSubmissions,
  listTasks,
  listTransfers,
  listWebhookEndpoints,
} from '../upstream/index.ts';
import type { UpstreamContext } from '../upstream/context.ts';
import type {
  Account,
  AccountFees,
  Capability,
  Customer,
  CustomerDocument,
  Institution,
  Page,
  Quote,
  Recipient,
  RelatedParty,
  RelatedPartySummary,
  Rule,
  Task,
  TaskSubmission,
  Transfer,
  WebhookEndpoint,
} from '../upstream/types.ts';
import { createFanOutLoader, type LoaderStats } from './fan-out-loader.ts';
import {
  pageCacheKey,
  scopedCacheKey,
  taskSubmissionCacheKey,
  type PageKey,
  type ScopedKey,
  type ScopedPageKey,
  type TaskSubmissionKey,
  type TaskSubmissionsPageKey,
} from './keys.ts';

export type { PageKey, ScopedKey, ScopedPageKey, TaskSubmissionKey, TaskSubmissionsPageKey } from './keys.ts';

/** A loader of one record by id. */
export type ByIdLoader<T> = DataLoader<string, T, string>;
/** A loader of one record of a customer, by customer id and record id. */
export type ScopedLoader<T> = DataLoader<ScopedKey, T, string>;
/** A loader of pages of a list. */
export type PageLoader<K, T> = DataLoader<K, Page<T>, string>;

/**
 * Every loader of one operation. Item loaders are primed by the lists that return full records, so
 * a record listed once is never read again; the related-party list returns summaries, which are
 * completed through `relatedParty` only when a field the summary lacks is selected.
 */
export interface Loaders {
  customer: ByIdLoader<Customer>;
  customers: PageLoader<PageKey, Customer>;
  account: ScopedLoader<Account>;
  accounts: PageLoader<ScopedPageKey, Account>;
  /** The fees endpoint; read only for an account record that lacks its `fees`. */
  accountFees: ScopedLoader<AccountFees>;
  relatedParty: ScopedLoader<RelatedParty>;
  relatedParties: PageLoader<ScopedPageKey, RelatedPartySummary>;
  capability: ScopedLoader<Capability>;
  capabilities: PageLoader<ScopedPageKey, Capability>;
  document: ScopedLoader<CustomerDocument>;
  documents: PageLoader<ScopedPageKey, CustomerDocument>;
  recipient: ScopedLoader<Recipient>;
  recipients: PageLoader<ScopedPageKey, Recipient>;
  task: ScopedLoader<Task>;
  tasks: PageLoader<ScopedPageKey, Task>;
  taskSubmission: DataLoader<TaskSubmissionKey, TaskSubmission, string>;
  taskSubmissions: PageLoader<TaskSubmissionsPageKey, TaskSubmission>;
  quote: ScopedLoader<Quote>;
  quotes: PageLoader<ScopedPageKey, Quote>;
  transfer: ScopedLoader<Transfer>;
  transfers: PageLoader<ScopedPageKey, Transfer>;
  rule: ScopedLoader<Rule>;
  rules: PageLoader<ScopedPageKey, Rule>;
  institution: ByIdLoader<Institution>;
  institutions: PageLoader<PageKey, Institution>;
  webhookEndpoint: ByIdLoader<WebhookEndpoint>;
  webhookEndpoints: PageLoader<PageKey, WebhookEndpoint>;
}

/**
 * Builds one loader of an operation; `loaders` gives the others (a list loader primes its items),
 * and `stats`, when given, counts its loads and upstream reads for the metrics.
 */
type LoaderFactory<L> = (up: UpstreamContext, loaders: Loaders, stats: LoaderStats | undefined) => L;

const identity = (id: string): string => id;
const pageParams = ({ limit, cursor, updatedSince }: PageKey): PageKey => ({ limit, cursor, updatedSince });

/** A customer-scoped item loader. */
function scopedItem<T>(get: (up: UpstreamContext, customerId: string, id: string) => Promise<T>) {
  return (up: UpstreamContext, _loaders: Loaders, stats: LoaderStats | undefined): ScopedLoader<T> =>
    createFanOutLoader<ScopedKey, T>((key) => get(up, key.customerId, key.id), scopedCacheKey, stats);
}

/** A customer-scoped list loader that primes the item loader `items` with every record it lists. */
function scopedPages<T extends { id: string }>(
  list: (up: UpstreamContext, customerId: string, page: PageKey) => Promise<Page<T>>,
  items: (loaders: Loaders) => ScopedLoader<T>,
) {
  return (
    up: UpstreamContext,
    loaders: Loaders,
    stats: LoaderStats | undefined,
  ): PageLoader<ScopedPageKey, T> =>
    createFanOutLoader<ScopedPageKey, Page<T>>(
      async (key) => {
        const page = await list(up, key.customerId, pageParams(key));
        const item = items(loaders);
        for (const record of page.data) item.prime({ customerId: key.customerId, id: record.id }, record);
        return page;
      },
      pageCacheKey,
      stats,
    );
}

/** A top-level item loader. */
function topLevelItem<T>(get: (up: UpstreamContext, id: string) => Promise<T>) {
  return (up: UpstreamContext, _loaders: Loaders, stats: LoaderStats | undefined): ByIdLoader<T> =>
    createFanOutLoader<string, T>((id) => get(up, id), identity, stats);
}

/** A top-level list loader that primes the item loader `items` with every record it lists. */
function topLevelPages<T extends { id: string }>(
  list: (up: UpstreamContext, page: PageKey) => Promise<Page<T>>,
  items: (loaders: Loaders) => ByIdLoader<T>,
) {
  return (up: UpstreamContext, loaders: Loaders, stats: LoaderStats | undefined): PageLoader<PageKey, T> =>
    createFanOutLoader<PageKey, Page<T>>(
      async (key) => {
        const page = await list(up, pageParams(key));
        const item = items(loaders);
        for (const record of page.data) item.prime(record.id, record);
        return page;
      },
      pageCacheKey,
      stats,
    );
}

/** How each loader of an operation is built. */
const LOADER_FACTORIES: { readonly [K in keyof Loaders]: LoaderFactory<Loaders[K]> } = {
  customer: topLevelItem(getCustomer),
  customers: topLevelPages(listCustomers, (loaders) => loaders.customer),
  account: scopedItem(getAccount),
  accounts: scopedPages(listAccounts, (loaders) => loaders.account),
  accountFees: scopedItem(getAccountFees),
  relatedParty: scopedItem(getRelatedParty),
  // Summaries, not full records: they do not prime `relatedParty`.
  relatedParties: (up, _loaders, stats) =>
    createFanOutLoader(
      (key: ScopedPageKey) => listRelatedParties(up, key.customerId, pageParams(key)),
      pageCacheKey,
      stats,
    ),
  capability: scopedItem(getCapability),
  capabilities: scopedPages(listCapabilities, (loaders) => loaders.capability),
  document: scopedItem(getDocument),
  documents: scopedPages(listDocuments, (loaders) => loaders.document),
  recipient: scopedItem(getRecipient),
  recipients: scopedPages(listRecipients, (loaders) => loaders.recipient),
  task: scopedItem(getTask),
  tasks: scopedPages(listTasks, (loaders) => loaders.task),
  taskSubmission: (up, _loaders, stats) =>
    createFanOutLoader(
      (key: TaskSubmissionKey) => getTaskSubmission(up, key.customerId, key.taskId, key.id),
      taskSubmissionCacheKey,
      stats,
    ),
  // Lists prime the item loader, so a submission listed once is never read again.
  taskSubmissions: (up, loaders, stats) =>
    createFanOutLoader(
      async (key: TaskSubmissionsPageKey) => {
        const page = await listTaskSubmissions(up, key.customerId, key.taskId, pageParams(key));
        for (const record of page.data)
          loaders.taskSubmission.prime(
            { customerId: key.customerId, taskId: key.taskId, id: record.id },
            record,
          );
        return page;
      },
      pageCacheKey,
      stats,
    ),
  quote: scopedItem(getQuote),
  quotes: scopedPages(listQuotes, (loaders) => loaders.quote),
  transfer: scopedItem(getTransfer),
  transfers: scopedPages(listTransfers, (loaders) => loaders.transfer),
  rule: scopedItem(getRule),
  rules: scopedPages(listRules, (loaders) => loaders.rule),
  institution: topLevelItem(getInstitution),
  institutions: topLevelPages(listInstitutions, (loaders) => loaders.institution),
  webhookEndpoint: topLevelItem(getWebhookEndpoint),
  webhookEndpoints: topLevelPages(listWebhookEndpoints, (loaders) => loaders.webhookEndpoint),
};

/**
 * The loaders of one operation, each built the first time it is used: an operation touches a few
 * of them, and building all of them for each one (`{ __typename }` included) was measurable work.
 * The getters live on the prototype, defined once, so an operation costs one small object here.
 */
class OperationLoaders {
  readonly upstream: UpstreamContext;
  readonly stats: LoaderStats | undefined;
  readonly built: Partial<Record<keyof Loaders, unknown>> = {};
  constructor(upstream: UpstreamContext, stats: LoaderStats | undefined) {
    this.upstream = upstream;
    this.stats = stats;
  }
}
for (const name of Object.keys(LOADER_FACTORIES) as (keyof Loaders)[]) {
  const factory = LOADER_FACTORIES[name] as LoaderFactory<unknown>;
  Object.defineProperty(OperationLoaders.prototype, name, {
    get(this: OperationLoaders) {
      return (this.built[name] ??= factory(this.upstream, this as unknown as Loaders, this.stats));
    },
  });
}

/**
 * Creates the loaders of one operation, calling the upstream with that operation's context
 * (credentials, request id, retry budget).
 */
export function createLoaders(up: UpstreamContext, stats?: LoaderStats): Loaders {
  return new OperationLoaders(up, stats) as unknown as Loaders;
}
