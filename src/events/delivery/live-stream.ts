/**
 * One subscription's stream: changes replayed from a list (when asked with `since`), then live
 * events from the subscriber's bounded queue, each turned into a payload read with a fresh context
 * (one per event, shared by the subscribers that read alike).
 */
import { CursorExpiredError } from '../../errors/cursor-expired.ts';
import type { GraphContext } from '../../graph/context.ts';
import type { CursorCodec } from '../log/cursor-codec.ts';
import type { DeliveryTrace } from '../event-tracing.ts';
import type { LiveSession } from './live-context.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { LiveQueueItem, QueueItem } from './subscriber-queue.ts';
import { pullThrough, SKIP } from './push-pull-queue.ts';
import { DIRECT_CHANGES, DirectPump, DROPPED, READ_ALONE, type DirectChanges } from './direct-delivery.ts';
import type { ResultWrite } from '../../direct-delivery-contract.ts';
import { isDegraded, waitForUpstream } from '../../upstream/outage.ts';

/**
 * What the stream yields; `executeLiveEvent` runs the operation once per delivery with its `context`
 * (and, with tracing on, under the delivery's span `traced`, which it ends).
 */
export type LiveDelivery =
  | {
      kind: 'change';
      context: GraphContext;
      payload: unknown;
      /**
       * Where the change sits in the event log, as the subscriber is handed it (`cursor-codec.ts`):
       * the live event's cursor, or where the queue began listening for a replayed change. It
       * travels beside the result (an SSE `id`), whatever the document selects.
       */
      cursor: string;
      /** The live event it came from; absent for a replayed change (its context is the subscriber's own). */
      eventId?: string;
      traced?: DeliveryTrace;
    }
  | { kind: 'overflow'; limit: number; dropped: number; resumeSince: string; resumeAfter?: string }
  | { kind: 'revoked' }
  | { kind: 'expired'; after: string; oldest: string | undefined };

/** A change recovered from a list read, with what identifies it at the seam. */
export interface ReplayedChange<P> {
  resourceId: string;
  /** The record's `updatedAt`: live events of this resource at or before it are already covered. */
  updatedAt: string;
  payload: P;
}

/** Returned by {@link ChangeFeed.toPayload} when the subscriber may not see an event. */
export const DROP = Symbol('drop');

/** What one subscription field listens to and how it turns an event into its payload. */
export interface ChangeFeed<P> {
  /** Cheap filter applied before queueing (customer, resource, kind). Must not throw. */
  accept: (event: PlatformEvent) => boolean;
  /**
   * The payload of `event` at `cursor` in the log, reading the resource as it is now with `context`
   * (fresh loaders, the subscriber's credentials). {@link DROP} when the upstream refuses the
   * subscriber that read. `resumed`: the event was read from the log for a subscriber resuming
   * after a cursor, not received live (its payload says so: `replayed`).
   */
  toPayload(
    event: PlatformEvent,
    cursor: string,
    context: GraphContext,
    resumed: boolean,
  ): Promise<P | typeof DROP>;
  /**
   * What the subscription reads once its queue listens, before any live event: the changes since a
   * time (from the upstream's updated-since reads; none when not asked), after any check that may
   * refuse the subscription by throwing (the queue is then closed). Absent when there is neither.
   * `cursor` is where the queue began listening: the cursor a replayed change carries.
   */
  replay?: (context: GraphContext, cursor: string) => Promise<ReplayedChange<P>[]>;
  /**
   * The log position to resume after (a cursor the subscriber gave, decoded with its session's
   * `cursors`): the logged events after it come first (instead of a `since` replay).
   */
  after?: string;
  /** The customer the subscription follows, if one: its missed webhooks are reconciled meanwhile. */
  customerId?: string;
  /**
   * The check of the subscription against the caller's scope, made before anything shared is
   * touched (no queue, no log read, no cursor judged, no watch): throws the refusal. Must make no
   * upstream call, so a refused subscription costs nobody anything.
   */
  admit?: (context: GraphContext) => Promise<void>;
}

/**
 * Opens the stream of one subscription.
 *
 * In this order, so a refused subscription steers no shared work: the scope check
 * ({@link ChangeFeed.admit}), then the queue (which judges an `after` cursor), then the replay
 * (which reads the customer with the subscriber's credentials, NOT_FOUND when it does not exist),
 * and only then the watch that has the reconciler read the customer's lists with the facade's key.
 *
 * No gap and no duplicate at the seam between replay and live: the queue subscribes first (and
 * buffers), then the list is read, then the buffer drains, skipping each event whose resource was
 * replayed with an `updatedAt` at or after the event's `occurredAt` (the replay already showed that
 * state or a later one). An event that happens while the list is read is thus either in the list,
 * or in the buffer, or both, and delivered once. The watch taking effect after the replay loses
 * nothing: the reconciler's window starts where its last run ended, not where a watch began.
 *
 * The returned iterator's `return()` ends the queue at once, even while a `next()` waits, so a
 * client that stops a subscription (or disconnects) frees its event log listener immediately.
 *
 * Every cursor that leaves here (a payload's, a delivery's, an overflow's `resumeAfter`, an expired
 * cursor's error) is the log position encoded with the session's `cursors`: the subscriber is
 * handed its environment's form of them, and the queue and the log deal in positions alone.
 */
export async function openLiveStream<P>(
  live: LiveSession,
  feed: ChangeFeed<P>,
): Promise<AsyncIterableIterator<LiveDelivery>> {
  // The subscriber waits while its stream opens: the admission and the replay read the upstream.
  const ended = live.observer?.working?.();
  try {
    return await openStream(live, feed);
  } finally {
    ended?.();
  }
}

async function openStream<P>(
  live: LiveSession,
  feed: ChangeFeed<P>,
): Promise<AsyncIterableIterator<LiveDelivery>> {
  const { cursors } = live;
  const context = live.createEventContext();
  await feed.admit?.(context);
  const queue = await openQueue(live, feed);
  const replayed: LiveDelivery[] = [];
  /** Per resource id, the latest `updatedAt` replayed, in epoch ms: its live events up to then are skipped. */
  const replayedMsByResource = new Map<string, number>();
  if (feed.replay) {
    let changes: ReplayedChange<P>[];
    try {
      changes = await feed.replay(context, cursors.encode(queue.position));
    } catch (error) {
      await queue.return();
      throw error;
    }
    changes.sort((a, b) => Date.parse(a.updatedAt) - Date.parse(b.updatedAt));
    for (const change of changes) {
      replayed.push({
        kind: 'change',
        context,
        payload: change.payload,
        cursor: cursors.encode(queue.position),
      });
      const at = Date.parse(change.updatedAt);
      replayedMsByResource.set(
        change.resourceId,
        Math.max(at, replayedMsByResource.get(change.resourceId) ?? at),
      );
    }
  }
  const unwatch =
    feed.customerId === undefined
      ? () => undefined
      : (live.watchCustomer?.(feed.customerId) ?? (() => undefined));
  // Aborted once the stream ends: a delivery waiting for the upstream's return stops waiting.
  const stopped = new AbortController();

  const slow = async (item: QueueItem): Promise<LiveDelivery | typeof SKIP> => {
    if (item.kind === 'overflow') live.observer?.overflowed();
    if (item.kind !== 'event') return handedOut(item, cursors);
    const event = item.event;
    // With tracing on: this delivery's span (a trace of its own, linked to the publish).
    const traced = live.observer?.traceDelivery?.(event, item.published, live.operationName);
    if (coveredByReplay(event)) {
      traced?.end('skipped');
      return SKIP;
    }

    const resumed = item.replayed === true;
    const cursor = cursors.encode(item.cursor);
    const read = await readThroughOutage(
      live,
      stopped.signal,
      (context) => {
        const once = () => feed.toPayload(event, cursor, context, resumed);
        return traced === undefined ? once() : traced.run(once);
      },
      live.eventContext(event, resumed),
    );
    if (read === undefined) {
      // The subscriber left while the upstream was down: nothing was delivered.
      traced?.end('failed');
      return SKIP;
    }
    const { context, payload } = read;
    if (payload === DROP) {
      traced?.end('dropped');
      return SKIP;
    }
    live.observer?.delivered(event);
    if (item.replayed) live.observer?.replayed?.();
    const change = { kind: 'change', context, payload, cursor, eventId: event.id } as const;
    return traced === undefined ? change : { ...change, traced };
  };
  /** Whether the replay already showed this event's resource as it was then, or later. */
  const coveredByReplay = (event: PlatformEvent): boolean => {
    const covered = replayedMsByResource.get(event.data.resourceId);
    return covered !== undefined && Date.parse(event.occurredAt) <= covered;
  };
  const onDone = (): void => {
    stopped.abort();
    unwatch();
  };
  const stream = pullThrough(queue, slow, { first: replayed, onDone });
  const { sharedOutcome } = live;
  // Tracing gives every delivery a span of its own: no shared outcome then.
  if (sharedOutcome === undefined || live.observer?.traceDelivery !== undefined) return stream;
  const direct: DirectChanges<LiveChange, LiveDelivery> = {
    [DIRECT_CHANGES]: <R>(toResult: (change: LiveChange) => Promise<R>, write: ResultWrite<R>) =>
      new DirectPump<R, LiveQueueItem, LiveDelivery>({
        takeLive: () => queue.takeLive(),
        next: () => queue.next(),
        onQueued: (listener) => queue.onQueued(listener),
        stop: () => queue.return(),
        shared: (item: LiveQueueItem) => {
          if (coveredByReplay(item.event)) return SKIP;
          return sharedOutcome<R>(item.event, () =>
            sharedRead(live, feed, item, cursors.encode(item.cursor), toResult),
          );
        },
        delivered: (item) => live.observer?.delivered(item.event),
        slow: (item) => slow(item as QueueItem),
        first: replayed,
        write,
        onDone,
      }),
  };
  return Object.assign(stream, direct);
}

/** A live delivery of a change, as the execution receives it. */
type LiveChange = Extract<LiveDelivery, { kind: 'change' }>;

/**
 * The shared outcome of a live event (`direct-delivery.ts`): its payload read once with the context
 * its subscribers share, then `toResult` (the execution), once. An upstream outage met by the read
 * sends every subscriber the ordinary way, where each waits for the upstream and reads again.
 */
async function sharedRead<R, P>(
  live: LiveSession,
  feed: ChangeFeed<P>,
  item: LiveQueueItem,
  cursor: string,
  toResult: (change: LiveChange) => Promise<R>,
): Promise<R | typeof DROPPED | typeof READ_ALONE> {
  const { event } = item;
  const ended = live.observer?.working?.();
  try {
    const context = live.eventContext(event, false);
    const payload = await feed.toPayload(event, cursor, context, false);
    if (payload === DROP) return DROPPED;
    if (isDegraded((context as Partial<GraphContext>).upstream?.degraded)) return READ_ALONE;
    return await toResult({ kind: 'change', context, payload, cursor, eventId: event.id });
  } finally {
    ended?.();
  }
}

/**
 * An event's payload, read with `first` (the context shared by the subscribers that read alike);
 * when that read met an upstream outage (a read failed for the upstream, or was answered past its
 * freshness), read again once the upstream is back ({@link waitForUpstream}), each time with a
 * context of the subscriber's own (fresh loaders: a failed load is not kept for the next). So a
 * subscriber is sent nothing while the upstream is down and then every event, in order, read as it
 * is then: its queue holds the events meanwhile (its overflow policy bounds a long outage), and its
 * cursor stays where it was. Undefined when the stream ended while waiting.
 */
async function readThroughOutage<P>(
  live: LiveSession,
  stopped: AbortSignal,
  read: (context: GraphContext) => Promise<P>,
  first: GraphContext,
): Promise<{ context: GraphContext; payload: P } | undefined> {
  let context = first;
  for (let retry = 1; ; retry += 1) {
    const ended = live.observer?.working?.();
    let payload: P;
    try {
      payload = await read(context);
    } finally {
      ended?.();
    }
    // A context without an upstream (a stand-in of the tests) met nothing.
    const upstream = (context as Partial<GraphContext>).upstream;
    if (payload === DROP || !isDegraded(upstream?.degraded)) return { context, payload };
    await waitForUpstream(upstream?.client.circuit, retry, stopped);
    if (stopped.aborted) return undefined;
    context = live.createEventContext();
  }
}

/** The feed's queue; a cursor the log no longer resumes from is refused in the subscriber's form. */
async function openQueue<P>(live: LiveSession, feed: ChangeFeed<P>) {
  try {
    return await live.openQueue(feed.accept, feed.after);
  } catch (error) {
    if (!(error instanceof CursorExpiredError)) throw error;
    const { cursors } = live;
    throw new CursorExpiredError(
      cursors.encode(error.cursor),
      error.oldest === undefined ? undefined : cursors.encode(error.oldest),
      error.ahead,
    );
  }
}

/** A queue's notice as the subscriber is handed it: its cursors in the subscriber's form. */
function handedOut(item: Exclude<QueueItem, { kind: 'event' }>, cursors: CursorCodec): LiveDelivery {
  switch (item.kind) {
    case 'overflow':
      return item.resumeAfter === undefined
        ? { ...item }
        : { ...item, resumeAfter: cursors.encode(item.resumeAfter) };
    case 'expired':
      return {
        kind: 'expired',
        after: cursors.encode(item.after),
        oldest: item.oldest === undefined ? undefined : cursors.encode(item.oldest),
      };
    case 'revoked':
      return { ...item };
  }
}
