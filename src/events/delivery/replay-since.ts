/**
 * The `since` replay of a subscription: the changes a customer's records show since a time, read
 * from the upstream's updated-since lists (and the customer's own record), each named by the event
 * kind it stands for. One function for every subscription field; what a change's payload looks
 * like is the field's business (`graph/resource-feeds.ts`).
 */
import { readAllPages } from '../../upstream/all-pages.ts';
import type { ListedRecord, Page, PageParams } from '../../upstream/types.ts';
import type { ReplayedChange } from './live-stream.ts';

/** Pages of 100 read at most to replay; more changes than that ask for a later `since`. */
const MAX_REPLAY_PAGES = 20;
const REPLAY_PAGE_SIZE = 100;

/** One record type's list as the replay reads it. */
export interface ReplayedList {
  /** The upstream's `resourceType` of its records. */
  resourceType: string;
  /** Reads one page of the customer's list with the updated-since filter. */
  readPage: (page: PageParams) => Promise<Page<ListedRecord>>;
  /** The event kind a listed record stands for. */
  kindOf: (record: ListedRecord) => string;
}

/** What {@link replaySince} replays. */
export interface ReplaySince<P> {
  since: string;
  /** The customer's own record and its kind, when its own change is replayed. */
  customer?: { record: ListedRecord; kindOf: (record: ListedRecord) => string };
  /** The lists to read, one after the other (each is paged). */
  lists: readonly ReplayedList[];
  /** Whether a change of this kind and record is kept. */
  keep: (kind: string, record: ListedRecord) => boolean;
  /** The replayed change of `record` of `resourceType`, standing for an event of `kind`. */
  toChange: (resourceType: string, record: ListedRecord, kind: string) => ReplayedChange<P>;
}

/**
 * The changes since `since`: the customer's record when it changed at or after then (the
 * upstream's updated-since is inclusive too), then each list's records the upstream filtered.
 *
 * @throws PageLimitExceededError when a list holds more changes than the replay reads.
 */
export async function replaySince<P>(request: ReplaySince<P>): Promise<ReplayedChange<P>[]> {
  const { since, customer, keep, toChange } = request;
  const changes: ReplayedChange<P>[] = [];
  const add = (resourceType: string, record: ListedRecord, kind: string) => {
    if (keep(kind, record)) changes.push(toChange(resourceType, record, kind));
  };
  if (customer !== undefined && Date.parse(customer.record.updatedAt) >= Date.parse(since)) {
    add('customer', customer.record, customer.kindOf(customer.record));
  }
  for (const list of request.lists) {
    const records = await readAllPages(list.readPage, {
      maxPages: MAX_REPLAY_PAGES,
      pageSize: REPLAY_PAGE_SIZE,
      updatedSince: since,
    });
    for (const record of records) add(list.resourceType, record, list.kindOf(record));
  }
  return changes;
}
