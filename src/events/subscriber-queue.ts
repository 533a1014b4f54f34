import type { EventBus } from './event-bus.ts';
import type { PlatformEnvironment, PlatformEvent } from './platform-event.ts';

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
  | { kind: 'event'; event: PlatformEvent }
  | { kind: 'overflow'; limit: number; dropped: number; resumeSince: string }
  /** The subscriber's credentials expired: nothing more is delivered. */
  | { kind: 'revoked' };

/** A subscriber's bounded queue: an async iterator that never blocks the publisher or the other subscribers. */
export type SubscriberQueue = AsyncIterableIterator<QueueItem> & {
  /** Stops listening at once; a pending `next()` answers `done`. */
  return(): Promise<IteratorResult<QueueItem>>;
  /** Ends the queue: a pending or later `next()` answers `done`. For shutdown. */
  end(): void;
  /**
   * Ends the queue because the subscriber's credentials expired: what waits is dropped, the next
   * `next()` yields one `revoked` item, then the queue is done.
   */
  revoke(): void;
  /** Events waiting in the queue right now. */
  readonly size: number;
};

/** Options of {@link openSubscriberQueue}. */
export type SubscriberQueueOptions = {
  bus: EventBus;
  environment: PlatformEnvironment;
  /** Keeps only the events this subscriber asked for; the rest never take queue space. Must not throw. */
  accept?: (event: PlatformEvent) => boolean;
  /** Events that may wait before the overflow policy applies. Default {@link DEFAULT_SUBSCRIBER_QUEUE_LIMIT}. */
  limit?: number;
};

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
  const items: QueueItem[] = [];
  let waiting: ((result: IteratorResult<QueueItem>) => void) | undefined;
  let finished = false;
  let overflowed = false;

  function deliver(item: QueueItem): void {
    if (waiting !== undefined) {
      const resolve = waiting;
      waiting = undefined;
      resolve({ value: item, done: false });
    } else {
      items.push(item);
    }
  }

  function onEvent(event: PlatformEvent): void {
    if (finished || overflowed || !accept(event)) return;
    if (items.length < limit) {
      deliver({ kind: 'event', event });
      return;
    }
    // Overflow: give up the backlog for one precise notice the subscriber can recover from.
    overflowed = true;
    stopListening();
    let resumeSince = event.occurredAt;
    for (const item of items) {
      if (item.kind === 'event' && Date.parse(item.event.occurredAt) < Date.parse(resumeSince)) {
        resumeSince = item.event.occurredAt;
      }
    }
    const dropped = items.length + 1;
    items.length = 0;
    items.push({ kind: 'overflow', limit, dropped, resumeSince });
  }

  const stopListening = await options.bus.subscribe(options.environment, onEvent);

  function finish(): void {
    if (finished) return;
    finished = true;
    items.length = 0;
    stopListening();
    waiting?.({ value: undefined, done: true });
    waiting = undefined;
  }

  const queue: SubscriberQueue = {
    get size() {
      return items.filter((item) => item.kind === 'event').length;
    },
    next(): Promise<IteratorResult<QueueItem>> {
      const item = items.shift();
      if (item !== undefined) {
        if (item.kind === 'overflow' || item.kind === 'revoked') finish();
        return Promise.resolve({ value: item, done: false });
      }
      if (finished || overflowed) {
        finish();
        return Promise.resolve({ value: undefined, done: true });
      }
      // graphql-ws pulls one item at a time; a second concurrent pull would be a caller bug.
      if (waiting !== undefined) return Promise.reject(new Error('next() called while another is pending'));
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    return(): Promise<IteratorResult<QueueItem>> {
      finish();
      return Promise.resolve({ value: undefined, done: true });
    },
    end(): void {
      finish();
    },
    revoke(): void {
      if (finished || overflowed) return;
      // Like an overflow: stop listening, drop the backlog, deliver one notice, then end.
      overflowed = true;
      stopListening();
      items.length = 0;
      deliver({ kind: 'revoked' });
    },
    [Symbol.asyncIterator]() {
      return queue;
    },
  };
  return queue;
}
