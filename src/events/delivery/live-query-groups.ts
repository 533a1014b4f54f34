/**
 * The live queries' groups of watchers (`live-queries.ts`): which groups exist, which customers'
 * answers each one's last execution read, and which customers each follows for the reconciler.
 * These change together, and only here; running the groups and telling their watchers does not.
 */
import { bucketOfStale, type StaleReads } from '../../upstream/response-cache.ts';

/** Follows a customer for the reconciler until the returned function runs. */
type WatchCustomer = (customerId: string) => () => void;

/** Watchers of one operation under one key, scope and environment, which share its executions. */
export interface Group<W> {
  readonly key: string;
  readonly watchers: Set<W>;
  /** The paths the last execution read, by customer (`''`: paths of no customer). */
  paths: Map<string, Set<string>>;
  /** The customers followed for the reconciler, and how to stop. */
  readonly followed: Map<string, () => void>;
  running: boolean;
  /** Made stale again while running: run once more after. */
  dirty: boolean;
  scheduled: boolean;
  refresh: NodeJS.Timeout | undefined;
}

/** The customer a path belongs to (still encoded, as paths carry it), or `''`. */
const CUSTOMER_OF_PATH = /^\/v3\/customers\/([^/]+)/;

/**
 * The groups of watchers that share executions, and the index that finds them from what an
 * invalidation names. Kept apart from running them: which groups exist, which customers' answers
 * each read and which customers each follows for the reconciler change together, and only here.
 */
export interface WatcherGroups<W> {
  /** The group `key` names, made (empty, watching nothing) when there is none yet. */
  open(key: string): { group: Group<W>; created: boolean };
  /** Whether `group` still stands for its key (its last watcher has not left). */
  isOpen(group: Group<W>): boolean;
  /** The groups that read answers of the customers `stale` names (all of them for `everything`). */
  candidatesOf(stale: readonly StaleReads[]): Set<Group<W>>;
  /**
   * Records `paths` as read by `group` (in place of what it read before when `replace`), indexes
   * the group by their customers and follows them for the reconciler (`watchCustomer`, the
   * request's), and stops following the customers it no longer reads.
   */
  setPaths(
    group: Group<W>,
    paths: Iterable<string>,
    watchCustomer: WatchCustomer | undefined,
    replace: boolean,
  ): void;
  /** Removes `watcher`; its group's last one closes the group, its index entries and follows. */
  leave(group: Group<W>, watcher: W): void;
}

export function createWatcherGroups<W>(): WatcherGroups<W> {
  const groups = new Map<string, Group<W>>();
  /** Groups by the customers their paths belong to: an invalidation looks at its customers' alone. */
  const byCustomer = new Map<string, Set<Group<W>>>();

  function open(key: string): { group: Group<W>; created: boolean } {
    let group = groups.get(key);
    const created = group === undefined;
    if (group === undefined) {
      group = {
        key,
        watchers: new Set(),
        paths: new Map(),
        followed: new Map(),
        running: false,
        dirty: false,
        scheduled: false,
        refresh: undefined,
      };
      groups.set(key, group);
    }
    return { group, created };
  }

  function isOpen(group: Group<W>): boolean {
    return groups.get(group.key) === group;
  }

  function candidatesOf(stale: readonly StaleReads[]): Set<Group<W>> {
    const found = new Set<Group<W>>();
    for (const reads of stale) {
      const customer = bucketOfStale(reads);
      if (customer === undefined) return new Set(groups.values());
      for (const group of byCustomer.get(customer) ?? []) found.add(group);
    }
    return found;
  }

  function setPaths(
    group: Group<W>,
    paths: Iterable<string>,
    watchCustomer: WatchCustomer | undefined,
    replace: boolean,
  ): void {
    const next = replace ? new Map<string, Set<string>>() : group.paths;
    for (const path of paths) {
      const customer = CUSTOMER_OF_PATH.exec(path)?.[1] ?? '';
      let bucket = next.get(customer);
      if (bucket === undefined) next.set(customer, (bucket = new Set()));
      bucket.add(path);
    }
    for (const customer of group.paths.keys()) {
      if (!next.has(customer)) byCustomer.get(customer)?.delete(group);
    }
    group.paths = next;
    for (const customer of next.keys()) {
      let members = byCustomer.get(customer);
      if (members === undefined) byCustomer.set(customer, (members = new Set()));
      members.add(group);
      if (customer !== '' && !group.followed.has(customer) && watchCustomer !== undefined) {
        group.followed.set(customer, watchCustomer(safeDecode(customer)));
      }
    }
    for (const [customer, stop] of group.followed) {
      if (next.has(customer)) continue;
      stop();
      group.followed.delete(customer);
    }
  }

  function leave(group: Group<W>, watcher: W): void {
    group.watchers.delete(watcher);
    if (group.watchers.size > 0 || groups.get(group.key) !== group) return;
    groups.delete(group.key);
    clearTimeout(group.refresh);
    for (const customer of group.paths.keys()) byCustomer.get(customer)?.delete(group);
    for (const customer of [...byCustomer.keys()]) {
      if (byCustomer.get(customer)?.size === 0) byCustomer.delete(customer);
    }
    for (const stop of group.followed.values()) stop();
    group.followed.clear();
  }

  return { open, isOpen, candidatesOf, setPaths, leave };
}

/**
 * Whether `group`'s last execution read an answer `reads` names: the paths of its bucket, or of
 * every bucket when it names everything.
 */
export function readsAny(
  group: Group<unknown>,
  reads: { bucket: string | undefined; matches: (path: string) => boolean },
): boolean {
  const buckets = reads.bucket === undefined ? group.paths.values() : [group.paths.get(reads.bucket)];
  for (const paths of buckets) {
    for (const path of paths ?? []) if (reads.matches(path)) return true;
  }
  return false;
}

function safeDecode(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}
