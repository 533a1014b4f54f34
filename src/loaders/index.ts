/**
 * The per-operation DataLoaders over the upstream API. One set is created for each GraphQL
 * operation (and each subscription event), so nothing is shared between callers or outlives the
 * operation: within it, the same upstream request is made at most once, and independent reads run
 * in parallel.
 */
import type DataLoader from 'dataloader';
import type { GetOfShape, KeyShape, ListOfShape } from '../record-entry.ts';
import {
  RECORD_TYPES,
  RECORDS,
  type KeyShapeOf,
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
  type TopLevelKey,
} from './keys.ts';
import { lazyTable } from './lazy-table.ts';

export type {
  PageKey,
  ScopedKey,
  ScopedPageKey,
  TaskSubmissionKey,
  TaskSubmissionsPageKey,
  TopLevelKey,
} from './keys.ts';

/** A loader of one record of a customer, by customer id and record id. */
export type ScopedLoader<T> = DataLoader<ScopedKey, T, string>;
/** A loader of pages of a list. */
export type PageLoader<K, T> = DataLoader<K, Page<T>, string>;

/** The keys of each key shape: of one record, and of one page of a list. */
interface KeysOfShape {
  'top-level': { record: TopLevelKey; page: PageKey };
  customer: { record: ScopedKey; page: ScopedPageKey };
}

/** The key a record of a key shape is read by: `{ id }`, or `{ customerId, id }` under its customer. */
export type RecordKeyOfShape<S extends KeyShape> = KeysOfShape[S]['record'];
/** The key a type's records are read by (see {@link RecordKeyOfShape}). */
export type RecordKeyOf<T extends RecordTypeName> = RecordKeyOfShape<KeyShapeOf<T>>;
/** The key of one page of a type's list: with its customer's id where it is read under one. */
export type PageKeyOf<T extends RecordTypeName> = KeysOfShape[KeyShapeOf<T>]['page'];

/** The item loader of a record type: one read per distinct key. */
export type ItemLoader<T extends RecordTypeName> = DataLoader<RecordKeyOf<T>, RecordOf<T>, string>;
/** The list loader of a record type: one read per distinct page. */
export type ListLoader<T extends RecordTypeName> = PageLoader<PageKeyOf<T>, ListedOf<T>>;

/** The item loader of each record type of the catalogue: `loaders.item.Account.load({ customerId, id })`. */
export type ItemLoaders = { readonly [T in RecordTypeName]: ItemLoader<T> };
/** The list loader of each record type of the catalogue: `loaders.list.Account.load({ customerId })`. */
export type ListLoaders = { readonly [T in RecordTypeName]: ListLoader<T> };

/**
 * Every loader of one operation: an item and a list loader per record type of the catalogue
 * (`src/records.ts`), and the reads that are not records of their own. Item loaders are primed by
 * the lists that return full records, so a record listed once is never read again; the
 * related-party list returns summaries, which are completed through `item.RelatedParty` only when a
 * field the summary lacks is selected.
 */
export interface Loaders {
  item: ItemLoaders;
  list: ListLoaders;
  /** The fees endpoint; read only for an account record that lacks its `fees`. */
  accountFees: ScopedLoader<AccountFees>;
  taskSubmission: DataLoader<TaskSubmissionKey, TaskSubmission, string>;
  taskSubmissions: PageLoader<TaskSubmissionsPageKey, TaskSubmission>;
}

/** What one operation's loaders are built from; `stats`, when given, counts loads and upstream reads. */
interface Built {
  up: UpstreamContext;
  stats: LoaderStats | undefined;
}

const pageParams = ({ limit, cursor, updatedSince }: PageKey): PageKey => ({ limit, cursor, updatedSince });

/** The catalogue as the loaders read it: each record type's reads in the terms of its key shape. */
const LOADED: {
  readonly [T in RecordTypeName]: {
    key: KeyShapeOf<T>;
    reads: { get: GetOfShape<RecordOf<T>>[KeyShapeOf<T>]; list: ListOfShape<ListedOf<T>>[KeyShapeOf<T>] };
    listedAsRecord: ((listed: ListedOf<T>) => RecordOf<T>) | undefined;
  };
} = RECORDS;

/** What the loaders do by key shape: read a record or a page by its key, and tell keys apart. */
const SHAPES: {
  readonly [S in KeyShape]: {
    get: <R>(read: GetOfShape<R>[S], up: UpstreamContext, key: KeysOfShape[S]['record']) => Promise<R>;
    list: <L>(read: ListOfShape<L>[S], up: UpstreamContext, key: KeysOfShape[S]['page']) => Promise<Page<L>>;
    /** The string that identifies a record's key: two loads whose strings are equal are one request. */
    cacheKey: (key: KeysOfShape[S]['record']) => string;
    /** The key of record `id` of the customer `owner` names, as a page key of its list does. */
    recordKey: (owner: KeysOfShape[S]['page'], id: string) => KeysOfShape[S]['record'];
    /** The key of a page of the list of the customer `customerId` names. */
    pageKey: (customerId: string, page: PageKey) => KeysOfShape[S]['page'];
  };
} = {
  'top-level': {
    get: (read, up, key) => read(up, key.id),
    list: (read, up, key) => read(up, pageParams(key)),
    cacheKey: (key) => key.id,
    recordKey: (_owner, id) => ({ id }),
    pageKey: (_customerId, page) => page,
  },
  customer: {
    get: (read, up, key) => read(up, key.customerId, key.id),
    list: (read, up, key) => read(up, key.customerId, pageParams(key)),
    cacheKey: scopedCacheKey,
    recordKey: ({ customerId }, id) => ({ customerId, id }),
    pageKey: (customerId, page) => ({ customerId, ...page }),
  },
};

/** The key of record `id` of `type`, of the customer `customerId` where its records are read under one. */
export function recordKeyOf<T extends RecordTypeName>(
  type: T,
  customerId: string,
  id: string,
): RecordKeyOf<T> {
  return SHAPES[LOADED[type].key].recordKey({ customerId }, id);
}

/** The key of a page of `type`'s list, of the customer `customerId` where it is read under one. */
export function pageKeyOf<T extends RecordTypeName>(
  type: T,
  customerId: string,
  page: PageKey,
): PageKeyOf<T> {
  return SHAPES[LOADED[type].key].pageKey(customerId, page);
}

/** The item loader of `type`: one upstream read per distinct key. */
function itemLoader<T extends RecordTypeName>(type: T, { up, stats }: Built): ItemLoader<T> {
  const { key, reads } = LOADED[type];
  const shape = SHAPES[key];
  return createFanOutLoader<RecordKeyOf<T>, RecordOf<T>>(
    (recordKey) => shape.get<RecordOf<T>>(reads.get, up, recordKey),
    shape.cacheKey,
    stats,
  );
}

/** The list loader of `type`; a list of full records primes `items`, its item loader, with each. */
function listLoader<T extends RecordTypeName>(
  type: T,
  { up, stats, items }: Built & { items: ItemLoaders },
): ListLoader<T> {
  const { key, reads, listedAsRecord } = LOADED[type];
  const shape = SHAPES[key];
  return createFanOutLoader<PageKeyOf<T>, Page<ListedOf<T>>>(
    async (pageKey) => {
      const page = await shape.list<ListedOf<T>>(reads.list, up, pageKey);
      if (listedAsRecord === undefined) return page;
      const item = items[type];
      for (const listed of page.data) {
        const record = listedAsRecord(listed);
        item.prime(shape.recordKey(pageKey, record.id), record);
      }
      return page;
    },
    pageCacheKey,
    stats,
  );
}

const itemLoaders = lazyTable<ItemLoaders, Built>(RECORD_TYPES, itemLoader);
const listLoaders = lazyTable<ListLoaders, Built & { items: ItemLoaders }>(RECORD_TYPES, listLoader);

/** How each loader of an operation is built: the catalogue's, and the reads that are no record type. */
const LOADER_FACTORIES: { readonly [K in keyof Loaders]: (built: Built, loaders: Loaders) => Loaders[K] } = {
  item: (built) => itemLoaders(built),
  list: (built, loaders) => listLoaders({ ...built, items: loaders.item }),
  accountFees: ({ up, stats }) =>
    createFanOutLoader<ScopedKey, AccountFees>(
      (key) => getAccountFees(up, key.customerId, key.id),
      scopedCacheKey,
      stats,
    ),
  taskSubmission: ({ up, stats }) =>
    createFanOutLoader(
      (key: TaskSubmissionKey) => getTaskSubmission(up, key.customerId, key.taskId, key.id),
      taskSubmissionCacheKey,
      stats,
    ),
  // Lists prime the item loader, so a submission listed once is never read again.
  taskSubmissions: ({ up, stats }, loaders) =>
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
};

/**
 * The loaders of one operation, each built the first time it is used: an operation touches a few
 * of them, and building all of them for each one (`{ __typename }` included) was measurable work.
 */
const operationLoaders = lazyTable<Loaders, Built>(
  Object.keys(LOADER_FACTORIES) as (keyof Loaders)[],
  (name, built, loaders) => LOADER_FACTORIES[name](built, loaders),
);

/**
 * Creates the loaders of one operation, calling the upstream with that operation's context
 * (credentials, request id, retry budget).
 */
export function createLoaders(up: UpstreamContext, stats?: LoaderStats): Loaders {
  return operationLoaders({ up, stats });
}
