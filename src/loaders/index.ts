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
import { createFanOutLoader as createCountedLoader, type LoaderStats } from './fan-out-loader.ts';
import {
  pageCacheKey,
  scopedCacheKey,
  type PageKey,
  type ScopedKey,
  type ScopedPageKey,
  type TaskSubmissionsPageKey,
} from './keys.ts';

export type { PageKey, ScopedKey, ScopedPageKey, TaskSubmissionsPageKey } from './keys.ts';

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
 * Creates the loaders of one operation, calling the upstream with that operation's context
 * (credentials, request id, retry budget). `stats`, when given, counts loads and upstream reads.
 */
export function createLoaders(up: UpstreamContext, stats?: LoaderStats): Loaders {
  const createFanOutLoader = <K, V>(load: (key: K) => Promise<V>, cacheKeyFn: (key: K) => string) =>
    createCountedLoader(load, cacheKeyFn, stats);
  const identity = (id: string): string => id;
  const pageParams = ({ limit, cursor, updatedSince }: PageKey): PageKey => ({ limit, cursor, updatedSince });

  /** A customer-scoped item loader and the list loader that primes it. */
  function scoped<T extends { id: string }>(
    get: (up: UpstreamContext, customerId: string, id: string) => Promise<T>,
    list: (up: UpstreamContext, customerId: string, page: PageKey) => Promise<Page<T>>,
  ): [ScopedLoader<T>, PageLoader<ScopedPageKey, T>] {
    const item = createFanOutLoader<ScopedKey, T>((key) => get(up, key.customerId, key.id), scopedCacheKey);
    const pages = createFanOutLoader<ScopedPageKey, Page<T>>(async (key) => {
      const page = await list(up, key.customerId, pageParams(key));
      for (const record of page.data) item.prime({ customerId: key.customerId, id: record.id }, record);
      return page;
    }, pageCacheKey);
    return [item, pages];
  }

  /** A top-level item loader and the list loader that primes it. */
  function topLevel<T extends { id: string }>(
    get: (up: UpstreamContext, id: string) => Promise<T>,
    list: (up: UpstreamContext, page: PageKey) => Promise<Page<T>>,
  ): [ByIdLoader<T>, PageLoader<PageKey, T>] {
    const item = createFanOutLoader<string, T>((id) => get(up, id), identity);
    const pages = createFanOutLoader<PageKey, Page<T>>(async (key) => {
      const page = await list(up, pageParams(key));
      for (const record of page.data) item.prime(record.id, record);
      return page;
    }, pageCacheKey);
    return [item, pages];
  }

  const [customer, customers] = topLevel(getCustomer, listCustomers);
  const [institution, institutions] = topLevel(getInstitution, listInstitutions);
  const [webhookEndpoint, webhookEndpoints] = topLevel(getWebhookEndpoint, listWebhookEndpoints);
  const [account, accounts] = scoped(getAccount, listAccounts);
  const [capability, capabilities] = scoped(getCapability, listCapabilities);
  const [document, documents] = scoped(getDocument, listDocuments);
  const [recipient, recipients] = scoped(getRecipient, listRecipients);
  const [task, tasks] = scoped(getTask, listTasks);
  const [quote, quotes] = scoped(getQuote, listQuotes);
  const [transfer, transfers] = scoped(getTransfer, listTransfers);
  const [rule, rules] = scoped(getRule, listRules);

  return {
    customer,
    customers,
    account,
    accounts,
    accountFees: createFanOutLoader(
      (key: ScopedKey) => getAccountFees(up, key.customerId, key.id),
      scopedCacheKey,
    ),
    relatedParty: createFanOutLoader(
      (key: ScopedKey) => getRelatedParty(up, key.customerId, key.id),
      scopedCacheKey,
    ),
    // Summaries, not full records: they do not prime `relatedParty`.
    relatedParties: createFanOutLoader(
      (key: ScopedPageKey) => listRelatedParties(up, key.customerId, pageParams(key)),
      pageCacheKey,
    ),
    capability,
    capabilities,
    document,
    documents,
    recipient,
    recipients,
    task,
    tasks,
    taskSubmissions: createFanOutLoader(
      (key: TaskSubmissionsPageKey) => listTaskSubmissions(up, key.customerId, key.taskId, pageParams(key)),
      pageCacheKey,
    ),
    quote,
    quotes,
    transfer,
    transfers,
    rule,
    rules,
    institution,
    institutions,
    webhookEndpoint,
    webhookEndpoints,
  };
}
