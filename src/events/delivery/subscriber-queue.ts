/**
 * One subscriber's bounded queue of its environment's events, with the overflow policy below: the
 * step between the fan-out, which must never wait for a subscriber, and a subscriber that reads at
 * its own pace.
 */
import type { EventTraceContext } from '../../observability/trace-context.ts';
import { CursorExpiredError } from '../../errors/cursor-expired.ts';
import { compareCursors, type EventLog, type LoggedEvent } from '../log/event-log.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { startLogReplay, type LogReplay } from './log-replay.ts';
import { createPushPullQueue, type PushPullQueue } from './push-pull-queue.ts';

/** Default bound of one subscriber's queue. */
export const DEFAULT_SUBSCRIBER_QUEUE_LIMIT = 1000;

/**
 * What a subscriber's queue yields: an event, or, once, the notice that it fell too far behind.
 *
 * Overflow policy: a subscriber that lets more than `limit` events wait (a slow network, a slow
 * client, slow reads of the resources it selects) is not allowed to hold memory for ever, nor to
 * slow the others down, nor to lose events silently. When one more event arrives than it may hold,
 * its queue is emptied, it stops listening, and the next thing it yields is an `overflow` item
 * carrying `resumeSince`, the earliest `occurredAt` among the events it did not get; then it ends.
 * A client that subscribes again with `since: resumeSince` (where the subscription replays)
 * receives what it missed.
 */
export type QueueItem =
  /**
   * `cursor`: the event's place in the log; `published`: the trace context of the event's append
   * span, when tracing carried one; `replayed`: read from the log for a subscriber resuming after a
   * cursor, rather than received live.
   */
  | { kind: 'event'; event: PlatformEvent; cursor: string; published?: EventTraceContext; replayed?: true }
  /**
   * `resumeAfter`: the cursor of the last event the queue handed out before the ones it dropped
   * (or where it began), from which a resumed subscription receives exactly what was missed.
   */
  | { kind: 'overflow'; limit: number; dropped: number; resumeSince: string; resumeAfter?: string }
  /** The subscriber's credentials expired: nothing more is delivered. */
  | { kind: 'revoked' }
  /** The log trimmed events of the replay before they were read: nothing more is delivered. */
  | { kind: 'expired'; after: string; oldest: string | undefined };

/** A live event as the queue hands it out. */
export type LiveQueueItem = Extract<QueueItem, { kind: 'event' }>;

/** A subscriber's bounded queue: an async iterator that never blocks the publisher or the other subscribers. */
export interface SubscriberQueue extends AsyncIterableIterator<QueueItem> {
  /** Stops listening at once; a pending `next()` answers `done`. */
  return(): Promise<IteratorResult<QueueItem>>;
  /** Ends the queue: a pending or later `next()` answers `done`. For shutdown. */
  end(): void;
  /**
   * Ends the queue because the subscriber's credentials expired: what waits is dropped, the next
   * `next()` yields one `revoked` item, then the queue is done.
   */
  revoke(): void;
  /**
   * The next item at once, without waiting, when it is a live event handed out in order (no
   * replay of the log is being read before it): `empty` when nothing waits (and the queue has not
   * ended), `other` when what comes next is something else (a notice, a replayed event, the end),
   * which {@link SubscriberQueue.next} then yields. A consumer may mix the two, one at a time.
   */
  takeLive(): LiveQueueItem | 'empty' | 'other';
  /**
   * Calls `listener` whenever an item is queued while no `next()` waits, and when the queue ends:
   * what a consumer of {@link SubscriberQueue.takeLive} waits on. One listener; undefined removes it.
   */
  onQueued(listener: (() => void) | undefined): void;
  /** Events waiting in the queue right now. */
  readonly size: number;
  /** The log position the queue started listening after: it holds the events after it. */
  readonly position: string;
}

/** Options of {@link openSubscriberQueue}. */
export interface SubscriberQueueOptions {
  log: Pick<EventLog, 'subscribe' | 'readAfter'>;
  environment: PlatformEnvironment;
  /** Keeps only the events this subscriber asked for; the rest never take queue space. Must not throw. */
  accept?: (event: PlatformEvent) => boolean;
  /** Events that may wait before the overflow policy applies. Default {@link DEFAULT_SUBSCRIBER_QUEUE_LIMIT}. */
  limit?: number;
  /** Called once when the subscriber has seen the queue end (a `next()` answered `done`) or stopped it. */
  onDone?: () => void;
  /**
   * A cursor to resume after: the queue first yields every logged event after it that `accept`
   * keeps, in log order, then the live ones, each once (`log` must then read too).
   *
   * @throws CursorExpiredError (from `openSubscriberQueue`) when the log no longer holds them all.
   */
  after?: string;
  /**
   * The subscriber is not an operator: what the log answers about `after` must tell it nothing of
   * other customers' events. A cursor ahead of the log's head resumes from now (as a cursor at the
   * head would: an answer that differed would time the newest event, whoever's it is), and an
   * expired cursor names no oldest cursor (the oldest held event may be anyone's).
   */
  scopedCaller?: boolean;
}

/**
 * The live event at the head of `items`, taken, when a live event comes next: events the replay
 * already covered are dropped on the way; `empty` when nothing waits and the queue goes on,
 * `other` when something else comes next (see {@link SubscriberQueue.takeLive}).
 */
function takeLiveFrom(
  items: PushPullQueue<QueueItem>,
  covered: (item: LiveQueueItem) => boolean,
): LiveQueueItem | 'empty' | 'other' {
  for (;;) {
    const head = items.waiting[0];
    if (head === undefined) return items.ended ? 'other' : 'empty';
    if (head.kind !== 'event') return 'other';
    items.waiting.shift();
    if (!covered(head)) return head;
  }
}

/**
 * Subscribes to `environment`'s events and queues them for one subscriber. Resolves once the
 * subscription is active, so a caller can subscribe first and read what happened before
 * afterwards, without a gap.
 */
export async function openSubscriberQueue(options: SubscriberQueueOptions): Promise<SubscriberQueue> {
  const limit = options.limit ?? DEFAULT_SUBSCRIBER_QUEUE_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`the subscriber queue limit must be an integer >= 1, got ${String(limit)}`);
  }
  const accept = options.accept ?? (() => true);
  let ended = false;
  const seenTheEnd = (): void => {
    if (ended) return;
    ended = true;
    options.onDone?.();
  };
  /** Set once an overflow or a revocation stopped the listening: what is queued is the last item. */
  let closing = false;
  /** Nothing to stop until the bus listens for this queue. */
  let stopListening: () => void = () => undefined;
  let queued: (() => void) | undefined;
  const items = createPushPullQueue<QueueItem>({
    onEnd: () => stopListening(),
    endsAfter: (item) => item.kind !== 'event',
    onQueued: () => queued?.(),
  });

  /** Stops listening, drops the backlog and queues `notice` as the last item. */
  function closeWith(notice: QueueItem): void {
    closing = true;
    stopListening();
    items.waiting.length = 0;
    items.push(notice);
  }

  function onEvent({ event, cursor, published }: LoggedEvent): void {
    if (items.ended || closing || !accept(event)) return;
    if (items.waiting.length < limit) {
      items.push(
        published === undefined
          ? { kind: 'event', event, cursor }
          : { kind: 'event', event, cursor, published },
      );
      return;
    }
    // Overflow: give up the backlog for one precise notice the subscriber can recover from.
    let resumeSince = event.occurredAt;
    for (const item of items.waiting) {
      if (item.kind === 'event' && Date.parse(item.event.occurredAt) < Date.parse(resumeSince)) {
        resumeSince = item.event.occurredAt;
      }
    }
    closeWith({ kind: 'overflow', limit, dropped: items.waiting.length + 1, resumeSince });
  }

  const subscription = await options.log.subscribe(options.environment, onEvent);
  stopListening = () => subscription.stop();

  // Resuming: listen first (above), then read the log after the cursor, so an event appended
  // meanwhile is in the replay, in the live queue, or both; the seam below keeps it once.
  let replay: LogReplay | undefined;
  let after = options.after;
  if (after !== undefined) {
    try {
      replay = await startLogReplay(options.log, options.environment, after, accept);
    } catch (error) {
      if (options.scopedCaller === true && error instanceof CursorExpiredError) {
        if (error.ahead) after = undefined;
        else {
          items.end();
          throw new CursorExpiredError(error.cursor, undefined);
        }
      } else {
        items.end();
        throw error;
      }
    }
  }
  /** Live events at or before this were replayed (or precede the cursor resumed after): skipped. */
  let replayedThroughCursor = after;
  /** The cursor of the last event handed out: what an overflow's `resumeAfter` names. */
  let handedUpTo = after ?? subscription.position;
  const coveredByReplay = (item: LiveQueueItem): boolean =>
    replayedThroughCursor !== undefined && compareCursors(item.cursor, replayedThroughCursor) <= 0;

  /** The next replayed event, or undefined once the replay is over (done, abandoned or expired). */
  const nextReplayed = async (): Promise<QueueItem | undefined> => {
    if (replay === undefined) return undefined;
    // An overflow or a revocation ends the replay too: its notice is what comes next.
    const step = closing || items.ended ? ({ kind: 'done' } as const) : await replay.next();
    if (step.kind === 'event') return { kind: 'event', ...step.logged, replayed: true };
    const ranUpTo = replay.readUpTo;
    replay = undefined;
    if (step.kind === 'expired') {
      closeWith({
        kind: 'expired',
        after: ranUpTo,
        oldest: options.scopedCaller === true ? undefined : step.oldest,
      });
      return undefined;
    }
    if (replayedThroughCursor === undefined || compareCursors(ranUpTo, replayedThroughCursor) > 0)
      replayedThroughCursor = ranUpTo;
    return undefined;
  };

  const take = async (): Promise<IteratorResult<QueueItem>> => {
    const replayed = await nextReplayed();
    if (replayed !== undefined) return { value: replayed, done: false };
    for (;;) {
      const result = await items.next();
      if (result.done) return result;
      const item = result.value;
      if (item.kind === 'overflow') return { value: { ...item, resumeAfter: handedUpTo }, done: false };
      if (item.kind !== 'event') return result;
      if (coveredByReplay(item)) continue;
      return result;
    }
  };

  const queue: SubscriberQueue = {
    // First: after a getter, a computed key makes V8 build a dictionary (448 bytes per subscriber).
    [Symbol.asyncIterator]: () => queue,
    takeLive() {
      const taken = replay === undefined ? takeLiveFrom(items, coveredByReplay) : 'other';
      if (typeof taken === 'object') handedUpTo = taken.cursor;
      return taken;
    },
    onQueued(listener) {
      queued = listener;
    },
    get size() {
      return items.waiting.filter((item) => item.kind === 'event').length;
    },
    position: subscription.position,
    async next() {
      const result = await take();
      if (result.done) seenTheEnd();
      else if (result.value.kind === 'event') handedUpTo = result.value.cursor;
      return result;
    },
    return() {
      seenTheEnd();
      return items.return();
    },
    end: () => items.end(),
    revoke() {
      // Like an overflow: stop listening, drop the backlog, deliver one notice, then end.
      if (!items.ended && !closing) closeWith({ kind: 'revoked' });
    },
  };
  return queue;
}
