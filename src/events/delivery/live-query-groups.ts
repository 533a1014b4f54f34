/**
 * The groups of live-query watchers that share executions (`live-queries.ts`), and the index that
 * finds them from what an invalidation names: which groups exist, which customers' answers each
 * read, and which customers each follows for the reconciler.
 */
import type { ExecutionArgs, ExecutionResult } from 'graphql';
import type { GraphContext } from '../../graph/context.ts';
import type { SharedReadCache } from '../../upstream/call.ts';
import type { createPushPullQueue } from './push-pull-queue.ts';
import { bucketOfStale, type StaleReads } from '../../upstream/response-cache.ts';

/**
 * A round of live-query re-runs whose upstream calls each caller's re-runs share in one pool of
 * `UPSTREAM_MAX_CALLS_PER_OPERATION` (`eventCallBudget` of the door): one invalidation, or one
 * refresh window. `windowMs` is how long the pool is kept.
 */
export interface CallRound {
  readonly id: string;
  /** How long its pool is kept; absent: as long as one subscription event's. */
  readonly windowMs?: number;
}

/** One caller's live query, as its transport admitted it. */
export interface LiveQueryRequest {
  readonly args: Pick<ExecutionArgs, 'schema' | 'document' | 'operationName' | 'variableValues'>;
  /**
   * Which watchers share executions: the same operation under the same key, scope and
   * environment; undefined shares with none (variables that cannot be written as JSON).
   */
  readonly group: string | undefined;
  /**
   * A fresh context (empty loaders, its own budgets) whose GET reads go through `reads`; for a
   * re-run, its calls also spend from the caller's pool for `round`.
   */
  contextFor(reads: SharedReadCache, round?: CallRound): GraphContext;
  /** Records that the query follows `customerId` (for the reconciler) until the returned function runs. */
  watchCustomer?(customerId: string): () => void;
  /** Called once when the watcher's stream has ended, by any path. */
  onDone?(): void;
  /**
   * An execution its watchers wait on begins (it reads the upstream); the returned function is
   * called once it ends (the memory release runs under none).
   */
  working?(): () => void;
}

/** One caller's live query: its request, its queue of results, the last result it was sent. */
export interface Watcher {
  readonly request: LiveQueryRequest;
  readonly queue: ReturnType<typeof createPushPullQueue<ExecutionResult>>;
  /** The last result sent, as JSON: an equal one is skipped. */
  lastSent: string;
}

/** The watchers of one operation under one key, scope and environment, run together. */
export interface Group {
  readonly key: string;
  readonly watchers: Set<Watcher>;
  /** The paths the last execution read, by customer (`''`: paths of no customer). */
  paths: Map<string, Set<string>>;
  /** The customers followed for the reconciler, and how to stop. */
  readonly followed: Map<string, () => void>;
  running: boolean;
  /** Made stale again while running: run once more after. */
  dirty: boolean;
  scheduled: boolean;
  /** The round whose pool the next run spends from (the latest that asked for a run). */
  round: CallRound | undefined;
  /** The last run found its round's pool spent: it runs at the start of the next refresh window. */
  owed: boolean;
  /** The reads of its last whole run: what a round's pool is expected to give its next. */
  expectedReads: number;
  refresh: NodeJS.Timeout | undefined;
  /** Runs that met an upstream outage in a row: how long the next waits for its return. */
  outageRuns: number;
  /** A run is owed once the upstream is back (one wait at a time). */
  awaitingUpstream: boolean;
  /** Aborted when the group closes: a run waiting for the upstream's return stops waiting. */
  readonly closed: AbortController;
}

/** The customer a path belongs to (still encoded, as paths carry it), or `''`. */
const CUSTOMER_OF_PATH = /^\/v3\/customers\/([^/]+)/;

/**
 * The groups of watchers that share executions, and the index that finds them from what an
 * invalidation names. Kept apart from running them: which groups exist, which customers' answers
 * each read and which customers each follows for the reconciler change together, and only here.
 */
export interface WatcherGroups {
  /** The group `key` names, made (empty, watching nothing) when there is none yet. */
  open(key: string): { group: Group; created: boolean };
  /** Whether `group` still stands for its key (its last watcher has not left). */
  isOpen(group: Group): boolean;
  /** The groups that read answers of the customers `stale` names (all of them for `everything`). */
  candidatesOf(stale: readonly StaleReads[]): Set<Group>;
  /**
   * Records `paths` as read by `group` (in place of what it read before when `replace`), indexes
   * the group by their customers and follows them for the reconciler, and stops following the
   * customers it no longer reads.
   */
  setPaths(group: Group, paths: Iterable<string>, request: LiveQueryRequest, replace: boolean): void;
  /** Removes `watcher`; its group's last one closes the group, its index entries and follows. */
  leave(group: Group, watcher: Watcher): void;
}

/** The groups of a replica's live queries, none yet. */
export function createWatcherGroups(): WatcherGroups {
  const groups = new Map<string, Group>();
  /** Groups by the customers their paths belong to: an invalidation looks at its customers' alone. */
  const byCustomer = new Map<string, Set<Group>>();

  function open(key: string): { group: Group; created: boolean } {
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
        round: undefined,
        owed: false,
        expectedReads: 1,
        refresh: undefined,
        outageRuns: 0,
        awaitingUpstream: false,
        closed: new AbortController(),
      };
      groups.set(key, group);
    }
    return { group, created };
  }

  function isOpen(group: Group): boolean {
    return groups.get(group.key) === group;
  }

  function candidatesOf(stale: readonly StaleReads[]): Set<Group> {
    const found = new Set<Group>();
    for (const reads of stale) {
      const customer = bucketOfStale(reads);
      if (customer === undefined) return new Set(groups.values());
      for (const group of byCustomer.get(customer) ?? []) found.add(group);
    }
    return found;
  }

  function setPaths(
    group: Group,
    paths: Iterable<string>,
    request: LiveQueryRequest,
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
      if (customer !== '' && !group.followed.has(customer) && request.watchCustomer !== undefined) {
        group.followed.set(customer, request.watchCustomer(safeDecode(customer)));
      }
    }
    for (const [customer, stop] of group.followed) {
      if (next.has(customer)) continue;
      stop();
      group.followed.delete(customer);
    }
  }

  function leave(group: Group, watcher: Watcher): void {
    group.watchers.delete(watcher);
    if (group.watchers.size > 0 || groups.get(group.key) !== group) return;
    groups.delete(group.key);
    clearTimeout(group.refresh);
    group.closed.abort();
    for (const customer of group.paths.keys()) byCustomer.get(customer)?.delete(group);
    for (const customer of [...byCustomer.keys()]) {
      if (byCustomer.get(customer)?.size === 0) byCustomer.delete(customer);
    }
    for (const stop of group.followed.values()) stop();
    group.followed.clear();
  }

  return { open, isOpen, candidatesOf, setPaths, leave };
}

function safeDecode(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}
