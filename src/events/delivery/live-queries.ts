/**
 * Live queries (`query @live { ... }`) as a source of results of the live wing: answered at once,
 * then again whenever an upstream answer the query read is made stale. The facade already knows
 * when that is: every verified webhook, every write (here or on another replica) and every change
 * the reconciler finds goes through the response cache's invalidation (`invalidation.ts`,
 * `response-cache.ts`), which names the answers it makes stale. So a live query records the GET
 * paths each execution read, and re-runs when an invalidation names one of them; no transport
 * knows anything of it (graphql-ws, SSE and every later live transport get the stream from
 * `subscribeWithEventContexts`).
 *
 * Shared re-execution: watchers of the same operation (document, operation name, variables) under
 * the same upstream key, scope and environment (their `group`) would read the same answers and
 * see the same result. They are one group, and one change runs the query once for the group, with
 * a context of one of its watchers, however many watch: one upstream read per invalidated answer
 * and scope. Each watcher's first answer is its own execution (through the response cache, whose
 * concurrent misses share one request), so the caller's scope is checked by its own reads before
 * it joins anything: a query whose first execution read nothing (refused by the scope, or reading
 * nothing the platform announces changes of) is answered once and ends, watching nothing.
 *
 * A result equal to the last one a watcher was sent is not sent again. A watcher that has not
 * taken its last result when a newer one comes gets only the newer one: a live query's state is
 * its latest answer, so a slow reader holds one result, never a backlog.
 *
 * The bound when an invalidation is missed: each group runs again at least every
 * `CACHE_MAX_AGE_SECONDS`, when the answers it read have left the cache, and the customers it reads
 * are watched for the reconciler like a subscription's (docs/events.md).
 */
import { execute, GraphQLError, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { GraphContext } from '../../graph/context.ts';
import type { SharedReadCache, UpstreamResponse } from '../../upstream/client.ts';
import {
  bucketOfStale,
  pathMatcherOf,
  type ResponseCache,
  type StaleReads,
} from '../../upstream/response-cache.ts';
import { createPushPullQueue, type EndableIterator } from './push-pull-queue.ts';

/** One caller's live query, as its transport admitted it. */
export interface LiveQueryRequest {
  readonly args: Pick<ExecutionArgs, 'schema' | 'document' | 'operationName' | 'variableValues'>;
  /**
   * Which watchers share executions: the same operation under the same key, scope and
   * environment; undefined shares with none (variables that cannot be written as JSON).
   */
  readonly group: string | undefined;
  /** A fresh context (empty loaders, its own budgets) whose GET reads go through `reads`. */
  contextFor(reads: SharedReadCache): GraphContext;
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

/** A watcher's results: the first answer, then one per change. */
export interface LiveQueryStream extends EndableIterator<ExecutionResult> {
  /** Ends the stream (shutdown): a pending `next()` answers `done`. */
  end(): void;
  /** The caller's credential expired: one UNAUTHENTICATED error, then the stream ends. */
  revoke(): void;
}

export interface LiveQueries {
  /**
   * Runs `request` once: its result alone when it read nothing to follow, else the stream of its
   * results (the first included).
   */
  watch(request: LiveQueryRequest): Promise<ExecutionResult | LiveQueryStream>;
}

/** The GET answers one execution read: a read cache that remembers every path it was asked for. */
class ReadLog extends Map<string, Promise<UpstreamResponse>> {
  readonly paths = new Set<string>();
  override set(key: string, value: Promise<UpstreamResponse>): this {
    // The key is the path and the query string: the cache's invalidations name paths.
    this.paths.add(key.split('?', 1)[0] ?? key);
    return super.set(key, value);
  }
}

interface Watcher {
  readonly request: LiveQueryRequest;
  readonly queue: ReturnType<typeof createPushPullQueue<ExecutionResult>>;
  /** The last result sent, as JSON: an equal one is skipped. */
  lastSent: string;
}

interface Group {
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
  refresh: NodeJS.Timeout | undefined;
}

/** The customer a path belongs to (still encoded, as paths carry it), or `''`. */
const CUSTOMER_OF_PATH = /^\/v3\/customers\/([^/]+)/;

/**
 * How long an event id is remembered: the same event reaches the log listener well within it. A
 * run started after the first hearing already reads what the event announced.
 */
const HEARD_EVENTS_WINDOW_MS = 60_000;

/** Results that end their stream once taken (the UNAUTHENTICATED notice of an expired token). */
const FINAL = new WeakSet<ExecutionResult>();

export function createLiveQueries(cache: ResponseCache): LiveQueries {
  const groups = createWatcherGroups();
  const reruns = createGroupReruns(groups, Math.max(1, cache.maxAgeSeconds) * 1000);
  const invalidationsHeard = listenForInvalidations(cache, groups, (group) => reruns.schedule(group));
  let solo = 0;

  return {
    async watch(request) {
      const before = invalidationsHeard();
      const reads = new ReadLog();
      const ended = request.working?.();
      let first: ExecutionResult;
      try {
        first = await execute({ ...request.args, contextValue: request.contextFor(reads) });
      } finally {
        ended?.();
      }
      // Nothing read (the scope refused every read, or nothing it reads is ever announced): answered once.
      if (reads.paths.size === 0) return first;
      const key = request.group ?? `solo:${(solo += 1)}`;
      const { group: joined, created } = groups.open(key);
      groups.setPaths(joined, reads.paths, request, created);
      const queue = createPushPullQueue<ExecutionResult>({
        endsAfter: (result) => FINAL.has(result),
        // Called only once the stream ends, which `watcher` (made just below) is in place for.
        onEnd: () => {
          groups.leave(joined, watcher);
          request.onDone?.();
        },
      });
      const watcher: Watcher = { request, queue, lastSent: JSON.stringify(first) };
      joined.watchers.add(watcher);
      queue.push(first);
      if (created) reruns.armRefresh(joined);
      // Something was made stale while the first answer was read: it may be older than that.
      if (invalidationsHeard() !== before) reruns.schedule(joined);
      return Object.assign(queue, {
        revoke() {
          deliver(queue, expired());
        },
      });
    },
  };
}

/**
 * The groups of watchers that share executions, and the index that finds them from what an
 * invalidation names. Kept apart from running them: which groups exist, which customers' answers
 * each read and which customers each follows for the reconciler change together, and only here.
 */
interface WatcherGroups {
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

function createWatcherGroups(): WatcherGroups {
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
        refresh: undefined,
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
    for (const customer of group.paths.keys()) byCustomer.get(customer)?.delete(group);
    for (const customer of [...byCustomer.keys()]) {
      if (byCustomer.get(customer)?.size === 0) byCustomer.delete(customer);
    }
    for (const stop of group.followed.values()) stop();
    group.followed.clear();
  }

  return { open, isOpen, candidatesOf, setPaths, leave };
}

/** Running a group again: when it is made stale, and at the latest after the cache's maximum age. */
interface GroupReruns {
  /** Runs `group` after the current turn (once more after, if it is running now). */
  schedule(group: Group): void;
  /** (Re)starts the timer that runs `group` after the maximum age if nothing made it stale sooner. */
  armRefresh(group: Group): void;
}

/**
 * One execution serves every watcher of a group, with the context of one of them; each is sent the
 * result unless it equals the last one it was sent. Apart from the groups' bookkeeping: this part
 * knows when to run and whom to tell, not who reads what.
 */
function createGroupReruns(groups: WatcherGroups, refreshMs: number): GroupReruns {
  function schedule(group: Group): void {
    if (group.running) {
      group.dirty = true;
      return;
    }
    if (group.scheduled) return;
    group.scheduled = true;
    // After the current turn: one invalidation often names several answers, one run serves them all.
    setImmediate(() => {
      group.scheduled = false;
      void run(group);
    });
  }

  async function run(group: Group): Promise<void> {
    if (group.running) {
      group.dirty = true;
      return;
    }
    group.running = true;
    try {
      do {
        group.dirty = false;
        const [watcher] = group.watchers;
        if (watcher === undefined) return;
        const reads = new ReadLog();
        let result: ExecutionResult;
        const ended = watcher.request.working?.();
        try {
          result = await execute({
            ...watcher.request.args,
            contextValue: watcher.request.contextFor(reads),
          });
        } catch {
          // Only arguments graphql-js rejects throw here, and they were valid for the first answer.
          continue;
        } finally {
          ended?.();
        }
        if (!groups.isOpen(group)) return;
        groups.setPaths(group, reads.paths, watcher.request, true);
        sendUnlessUnchanged(group, result);
      } while (staleAgain(group) && group.watchers.size > 0);
    } finally {
      group.running = false;
      armRefresh(group);
    }
  }

  /** The group runs again after the maximum age even if no invalidation came (one was missed). */
  function armRefresh(group: Group): void {
    clearTimeout(group.refresh);
    if (group.watchers.size === 0) return;
    group.refresh = setTimeout(() => schedule(group), refreshMs);
    group.refresh.unref();
  }

  return { schedule, armRefresh };
}

/**
 * Schedules every group whose last reads an invalidation names, acting on each event once. Returns
 * how many invalidations have been acted on so far: a first answer read while one came may be
 * older than it, and `watch` runs its group again then.
 */
function listenForInvalidations(
  cache: ResponseCache,
  groups: WatcherGroups,
  schedule: (group: Group) => void,
): () => number {
  let invalidations = 0;
  /** Events already acted on, by when: the receiving replica hears each at receipt and from the log. */
  const heardEvents = new Map<string, number>();
  cache.onInvalidate((stale, cause) => {
    if (cause !== undefined && alreadyHeard(cause)) return;
    invalidations += 1;
    const named = stale.map((reads) => ({ bucket: bucketOfStale(reads), matches: pathMatcherOf(reads) }));
    for (const group of groups.candidatesOf(stale)) {
      if (named.some((reads) => readsAny(group, reads))) schedule(group);
    }
  });

  /** Whether event `id` made answers stale before (within the window); remembers it either way. */
  function alreadyHeard(id: string): boolean {
    const at = Date.now();
    // In insertion order: the expired ones are at the front.
    for (const [heard, heardAt] of heardEvents) {
      if (at - heardAt < HEARD_EVENTS_WINDOW_MS) break;
      heardEvents.delete(heard);
    }
    if (heardEvents.has(id)) return true;
    heardEvents.set(id, at);
    return false;
  }

  return () => invalidations;
}

/**
 * Whether `group`'s last execution read an answer `reads` names: the paths of its bucket, or of
 * every bucket when it names everything.
 */
function readsAny(
  group: Group,
  reads: { bucket: string | undefined; matches: (path: string) => boolean },
): boolean {
  const buckets = reads.bucket === undefined ? group.paths.values() : [group.paths.get(reads.bucket)];
  for (const paths of buckets) {
    for (const path of paths ?? []) if (reads.matches(path)) return true;
  }
  return false;
}

/** Sends `result` to every watcher of `group` whose last result differs: an equal one is news to none. */
function sendUnlessUnchanged(group: Group, result: ExecutionResult): void {
  const text = JSON.stringify(result);
  for (const watcher of group.watchers) {
    if (watcher.lastSent === text) continue;
    watcher.lastSent = text;
    deliver(watcher.queue, result);
  }
}

/**
 * Whether `group` was made stale while it ran (read anew: an invalidation sets it meanwhile, which
 * a read of the field right after setting it false could not show the type checker).
 */
function staleAgain(group: Group): boolean {
  return group.dirty;
}

/** Hands `result` to the watcher, replacing what it has not taken yet (only the latest state matters). */
function deliver(
  queue: ReturnType<typeof createPushPullQueue<ExecutionResult>>,
  result: ExecutionResult,
): void {
  if (queue.ended || queue.waiting.some((waiting) => FINAL.has(waiting))) return;
  queue.waiting.length = 0;
  queue.push(result);
}

function expired(): ExecutionResult {
  const result: ExecutionResult = {
    errors: [
      new GraphQLError(
        'The access token of this connection has expired; the live query has ended. Reconnect with a fresh token and send it again.',
        { extensions: { code: 'UNAUTHENTICATED' } },
      ),
    ],
  };
  FINAL.add(result);
  return result;
}

function safeDecode(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}
