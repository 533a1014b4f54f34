/**
 * The per-operation DataLoaders over the upstream API. One set is created for each GraphQL
 * operation (and each subscription event), so nothing is shared between callers or outlives the
 * operation: within it, the same upstream request is made at most once, and independent reads run
 * in parallel.
 */
import type DataLoader from 'dataloader';
import {
  RECORD_ENTRIES,
  type RECORDS,
  type ListedOf,
  type RecordOf,
  type RecordTypeName,
} from '../records.ts';
import { getAccountFees } from '../upstream/accounts.ts';
import type { UpstreamContext } from '../upstream/context.ts';
import { getTaskSubmission, listTaskSubmissions } from '../upstream/tasks.ts';
import type { AccountFees, Page, TaskSubmission } from '../upstream/types.ts';
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

type Catalogue = typeof RECORDS;

/** The item loader of each record type, named as the catalogue names it (`account`). */
type ItemLoaders = {
  [T in RecordTypeName as Catalogue[T]['loaders']['item']]: Catalogue[T]['key'] extends 'customer'
    ? ScopedLoader<RecordOf<T>>
    : ByIdLoader<RecordOf<T>>;
};

/** The list loader of each record type, named as the catalogue names it (`accounts`). */
type ListLoaders = {
  [T in RecordTypeName as Catalogue[T]['loaders']['list']]: Catalogue[T]['key'] extends 'customer'
    ? PageLoader<ScopedPageKey, ListedOf<T>>
    : PageLoader<PageKey, ListedOf<T>>;
};

/**
 * Every loader of one operation: an item and a list loader per record type of the catalogue
 * (`src/records.ts`), and the reads that are not records of their own. Item loaders are primed by
 * the lists that return full records, so a record listed once is never read again; the
 * related-party list returns summaries, which are completed through `relatedParty` only when a
 * field the summary lacks is selected.
 */
export interface Loaders extends ItemLoaders, ListLoaders {
  /** The fees endpoint; read only for an account record that lacks its `fees`. */
  accountFees: ScopedLoader<AccountFees>;
  taskSubmission: DataLoader<TaskSubmissionKey, TaskSubmission, string>;
  taskSubmissions: PageLoader<TaskSubmissionsPageKey, TaskSubmission>;
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

/**
 * A customer-scoped list loader; with `items`, it primes that item loader with every record it
 * lists.
 */
function scopedPages<T extends { id: string }>(
  list: (up: UpstreamContext, customerId: string, page: PageKey) => Promise<Page<T>>,
  items?: (loaders: Loaders) => ScopedLoader<T>,
) {
  return (
    up: UpstreamContext,
    loaders: Loaders,
    stats: LoaderStats | undefined,
  ): PageLoader<ScopedPageKey, T> =>
    createFanOutLoader<ScopedPageKey, Page<T>>(
      async (key) => {
        const page = await list(up, key.customerId, pageParams(key));
        if (items === undefined) return page;
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

/** The item and list loaders of every record type of the catalogue, by loader name. */
function recordLoaderFactories(): Record<string, LoaderFactory<unknown>> {
  const factories: Record<string, LoaderFactory<unknown>> = {};
  for (const [, entry] of RECORD_ENTRIES) {
    const { item, list } = entry.loaders;
    // The loader `item` names, as the list that primes it sees it.
    const itemLoader = <K>(loaders: Loaders) =>
      (loaders as unknown as Record<string, DataLoader<K, { id: string }, string>>)[item]!;
    if (entry.key === 'customer') {
      factories[item] = scopedItem(entry.reads.get);
      factories[list] = scopedPages(
        entry.reads.list,
        entry.listPrimesItems ? itemLoader<ScopedKey> : undefined,
      );
    } else {
      factories[item] = topLevelItem(entry.reads.get);
      factories[list] = topLevelPages(entry.reads.list, itemLoader<string>);
    }
  }
  return factories;
}

/** How each loader of an operation is built: the catalogue's, and the reads that are no record type. */
const LOADER_FACTORIES = {
  ...recordLoaderFactories(),
  accountFees: scopedItem(getAccountFees),
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
} satisfies Record<string, LoaderFactory<unknown>> as unknown as {
  readonly [K in keyof Loaders]: LoaderFactory<Loaders[K]>;
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
