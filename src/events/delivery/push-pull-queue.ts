/**
 * The async iterators of the delivery path, built one way. A subscription's stream must stop the
 * moment a client stops it or disconnects, even while a `next()` waits for an event that may never
 * come; an async generator cannot (its `return()` waits for the pending `next()`), so the queue and
 * the steps after it are written here once instead of by hand in each file.
 */

/** An async iterator whose `return()` ends it at once, answering a pending `next()` with `done`. */
export interface EndableIterator<T> extends AsyncIterableIterator<T> {
  next(): Promise<IteratorResult<T>>;
  return(): Promise<IteratorResult<T>>;
}

/** A queue one side pushes into and the other pulls from, never blocking the pushing side. */
export interface PushPullQueue<T> extends EndableIterator<T> {
  /** Hands `item` to a waiting `next()`, or keeps it until one comes. Ignored once ended. */
  push(item: T): void;
  /** Ends the queue: what waits is dropped; a pending `next()` and every later one answer `done`. Idempotent. */
  end(): void;
  /** Items waiting, oldest first. The owner may drop some (`splice`) to apply its own bound. */
  readonly waiting: T[];
  readonly ended: boolean;
}

/**
 * A queue that calls `onEnd` once when it ends, by `end()` or `return()`. `endsAfter(item)` says
 * which items are the last: once such an item is pulled, the queue ends. `onQueued` is told each
 * time an item is kept because no `next()` waits, and when the queue ends: a consumer that takes
 * items from {@link PushPullQueue.waiting} itself, rather than waiting in `next()`, learns there is
 * something to take.
 */
export function createPushPullQueue<T>(
  options: { onEnd?: () => void; endsAfter?: (item: T) => boolean; onQueued?: () => void } = {},
): PushPullQueue<T> {
  const waiting: T[] = [];
  let puller: ((result: IteratorResult<T>) => void) | undefined;
  let ended = false;

  const queue: PushPullQueue<T> = {
    // First: a computed key after a getter leaves V8 a literal in dictionary mode, a 448-byte
    // table more for every queue (one per subscriber).
    [Symbol.asyncIterator]() {
      return queue;
    },
    waiting,
    get ended() {
      return ended;
    },
    push(item) {
      if (ended) return;
      if (puller === undefined) {
        waiting.push(item);
        options.onQueued?.();
        return;
      }
      const resolve = puller;
      puller = undefined;
      if (options.endsAfter?.(item)) queue.end();
      resolve({ value: item, done: false });
    },
    end() {
      if (ended) return;
      ended = true;
      waiting.length = 0;
      puller?.({ value: undefined, done: true });
      puller = undefined;
      options.onEnd?.();
      options.onQueued?.();
    },
    next() {
      const item = waiting.shift();
      if (item !== undefined) {
        if (options.endsAfter?.(item)) queue.end();
        return Promise.resolve({ value: item, done: false });
      }
      if (ended) return Promise.resolve({ value: undefined, done: true });
      // A live transport pulls one item at a time; a second concurrent pull would be a caller bug.
      if (puller !== undefined) return Promise.reject(new Error('next() called while another is pending'));
      return new Promise((resolve) => {
        puller = resolve;
      });
    },
    return() {
      queue.end();
      return Promise.resolve({ value: undefined, done: true });
    },
  };
  return queue;
}

/** Returned by a {@link pullThrough} step for an item that yields nothing. */
export const SKIP = Symbol('skip');

/**
 * `source`'s items, each turned by `step` when it is pulled (so a slow consumer keeps the backlog
 * in `source`, where its bound applies); `first` are yielded before any of them. `return()` ends
 * `source` at once, and `onDone` runs once when the stream ends by any path.
 */
export function pullThrough<In, Out>(
  source: AsyncIterator<In>,
  step: (item: In) => Out | typeof SKIP | Promise<Out | typeof SKIP>,
  options: { first?: Out[]; onDone?: () => void } = {},
): EndableIterator<Out> {
  const first = [...(options.first ?? [])];
  let done = false;
  const finish = (): IteratorResult<Out> => {
    if (!done) {
      done = true;
      first.length = 0;
      options.onDone?.();
    }
    return { value: undefined, done: true };
  };

  const stream: EndableIterator<Out> = {
    async next() {
      for (;;) {
        if (done) return { value: undefined, done: true };
        const queued = first.shift();
        if (queued !== undefined) return { value: queued, done: false };
        const next = await source.next();
        if (next.done) return finish();
        const value = await step(next.value);
        if (value !== SKIP) return { value, done: false };
      }
    },
    async return() {
      finish();
      await source.return?.();
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return stream;
    },
  };
  return stream;
}
