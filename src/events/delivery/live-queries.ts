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
 *
 * What re-runs cost a caller: as a subscription's executions of one event share the caller's one
 * pool of `UPSTREAM_MAX_CALLS_PER_OPERATION` calls, a caller's re-runs of one invalidation share one
 * (its round), and its refreshes one per window of `CACHE_MAX_AGE_SECONDS`, however many groups
 * it watches (distinct variables make distinct groups). A re-run the round's pool has no room for
 * (`live-query-rounds.ts`), or that finds it spent, sends nothing: its watchers keep their last
 * answer (the `TOO_MANY_UPSTREAM_CALLS` error a subscription would get would replace a true answer
 * by none), the group keeps what it read, so the next invalidation still finds it, and it is owed
 * a run at the start of the next refresh window, before the refreshes that window's timers bring;
 * so every watcher is sent the current state within a few windows, and the caller's re-runs never
 * cost more than one pool per invalidation and one per window. A group shared by two callers of
 * one scope runs with its first watcher's context, so on that caller's pools.
 *
 * Through an upstream outage a re-run sends nothing (its watchers keep their last answer) and the
 * group runs again once the upstream is back; a first answer read past its freshness is sent
 * marked `extensions.stale`, as over HTTP.
 */
import { execute, GraphQLError, type ExecutionResult } from 'graphql';
import type { GraphContext } from '../../graph/context.ts';
import type { UpstreamResponse } from '../../upstream/client.ts';
import { bucketOfStale, pathMatcherOf, type ResponseCache } from '../../upstream/response-cache.ts';
import { isDegraded, waitForUpstream } from '../../upstream/outage.ts';
import {
  createWatcherGroups,
  type CallRound,
  type Group,
  type LiveQueryRequest,
  type Watcher,
  type WatcherGroups,
} from './live-query-groups.ts';
import {
  createRoundAdmission,
  invalidationRounds,
  poolSpent,
  refreshRound,
  untilNextRefreshWindow,
} from './live-query-rounds.ts';

export type { LiveQueryRequest } from './live-query-groups.ts';
import { createPushPullQueue, type EndableIterator } from './push-pull-queue.ts';

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
  const invalidationRound = invalidationRounds();
  const invalidationsHeard = listenForInvalidations(cache, groups, invalidationRound, (group, round) =>
    reruns.schedule(group, round),
  );
  let solo = 0;

  return {
    async watch(request) {
      const before = invalidationsHeard();
      const reads = new ReadLog();
      const ended = request.working?.();
      let first: ExecutionResult;
      const context = request.contextFor(reads);
      try {
        first = withStaleMark(await execute({ ...request.args, contextValue: context }), context);
      } finally {
        ended?.();
      }
      // Nothing read (the scope refused every read, or nothing it reads is ever announced): answered once.
      if (reads.paths.size === 0) return first;
      const key = request.group ?? `solo:${(solo += 1)}`;
      const { group: joined, created } = groups.open(key);
      if (created) joined.expectedReads = Math.max(1, reads.size);
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
      // Read while the upstream was down: run again once it is back.
      if (isDegraded(context.upstream.degraded)) reruns.afterOutage(joined, context);
      // Something was made stale while the first answer was read: it may be older than that.
      else if (invalidationsHeard() !== before)
        reruns.schedule(joined, invalidationRound(invalidationsHeard()));
      return Object.assign(queue, {
        revoke() {
          deliver(queue, expired());
        },
      });
    },
  };
}

/** Running a group again: when it is made stale, and at the latest after the cache's maximum age. */
interface GroupReruns {
  /**
   * Runs `group` after the current turn (once more after, if it is running now), spending from the
   * caller's pool for `round`.
   */
  schedule(group: Group, round: CallRound): void;
  /** (Re)starts the timer that runs `group` after the maximum age if nothing made it stale sooner. */
  armRefresh(group: Group): void;
  /** Runs `group` once the upstream is back, after a run (with `context`) met an outage. */
  afterOutage(group: Group, context: GraphContext): void;
}

/**
 * One execution serves every watcher of a group, with the context of one of them; each is sent the
 * result unless it equals the last one it was sent. Apart from the groups' bookkeeping: this part
 * knows when to run and whom to tell, not who reads what.
 */
function createGroupReruns(groups: WatcherGroups, refreshMs: number): GroupReruns {
  const admitted = createRoundAdmission();

  function schedule(group: Group, round: CallRound): void {
    group.round = round;
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
        const context = watcher.request.contextFor(reads, group.round);
        // The round's pool is promised to the runs let in before: this one is owed, spending nothing.
        const admission = admitted(context.upstream.callBudget, group.expectedReads);
        group.owed = admission === 'refused';
        if (group.owed) continue;
        let result: ExecutionResult;
        const ended = watcher.request.working?.();
        try {
          result = await execute({ ...watcher.request.args, contextValue: context });
        } catch {
          // Only arguments graphql-js rejects throw here, and they were valid for the first answer.
          continue;
        } finally {
          ended?.();
        }
        if (!groups.isOpen(group)) return;
        if (isDegraded(context.upstream.degraded)) {
          afterOutage(group, context);
          return;
        }
        group.outageRuns = 0;
        // The caller's pool for this round is spent by its other re-runs: nothing sent, what it
        // read kept, a run owed. A run alone in the pool met its own size: sent as any query's.
        group.owed = admission === 'shared' && poolSpent(result, context.upstream.callBudget);
        if (group.owed) continue;
        group.expectedReads = Math.max(1, reads.size);
        groups.setPaths(group, reads.paths, watcher.request, true);
        sendUnlessUnchanged(group, result);
      } while (staleAgain(group) && group.watchers.size > 0);
    } finally {
      group.running = false;
      armRefresh(group);
    }
  }

  /**
   * The group runs again after the maximum age even if no invalidation came (one was missed); one
   * owed a run (its pool was spent), at the start of the next refresh window, whose pool is new.
   */
  function armRefresh(group: Group): void {
    clearTimeout(group.refresh);
    if (group.watchers.size === 0) return;
    const wait = group.owed ? untilNextRefreshWindow(refreshMs) : refreshMs;
    group.refresh = setTimeout(() => schedule(group, refreshRound(refreshMs)), wait);
    group.refresh.unref();
  }

  /**
   * A run that met an upstream outage (a read failed for the upstream, or was answered past its
   * freshness) sends nothing: the watchers keep their last answer, which is at least as current,
   * and the group runs again once the upstream is back (`waitForUpstream`), so the next answer
   * they are sent is the current state.
   */
  function afterOutage(group: Group, context: GraphContext): void {
    group.outageRuns += 1;
    if (group.awaitingUpstream) return;
    group.awaitingUpstream = true;
    const { circuit } = context.upstream.client;
    void waitForUpstream(circuit, group.outageRuns, group.closed.signal).then(() => {
      group.awaitingUpstream = false;
      if (groups.isOpen(group)) schedule(group, refreshRound(refreshMs));
    });
  }

  return { schedule, armRefresh, afterOutage };
}

/**
 * `result` marked `extensions.stale: { ageSeconds }` when `context` read anything past its
 * freshness (the upstream failing), as an HTTP answer is: a first answer is sent as it was read.
 */
function withStaleMark(result: ExecutionResult, context: GraphContext): ExecutionResult {
  const ageSeconds = context.upstream.degraded.staleAgeSeconds;
  return ageSeconds === undefined
    ? result
    : { ...result, extensions: { ...result.extensions, stale: { ageSeconds } } };
}

/**
 * Schedules every group whose last reads an invalidation names, acting on each event once. Returns
 * how many invalidations have been acted on so far: a first answer read while one came may be
 * older than it, and `watch` runs its group again then.
 */
function listenForInvalidations(
  cache: ResponseCache,
  groups: WatcherGroups,
  invalidationRound: (count: number) => CallRound,
  schedule: (group: Group, round: CallRound) => void,
): () => number {
  let invalidations = 0;
  /** Events already acted on, by when: the receiving replica hears each at receipt and from the log. */
  const heardEvents = new Map<string, number>();
  cache.onInvalidate((stale, cause) => {
    if (cause !== undefined && alreadyHeard(cause)) return;
    invalidations += 1;
    const round = invalidationRound(invalidations);
    const named = stale.map((reads) => ({ bucket: bucketOfStale(reads), matches: pathMatcherOf(reads) }));
    for (const group of groups.candidatesOf(stale)) {
      if (named.some((reads) => readsAny(group, reads))) schedule(group, round);
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
