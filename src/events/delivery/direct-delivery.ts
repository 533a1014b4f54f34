/**
 * Direct delivery: the fan-out of one event to many subscribers without a chain of promises per
 * subscriber. Subscribers that share an event's read and execution (`shared-event-reads.ts`: the
 * same key, scope and operation) share one {@link SharedOutcome}: the result is made once, and once
 * it is there each subscriber's {@link DirectPump} takes its event from its queue and hands the
 * result to its transport's {@link ResultWrite} in the same turn, one subscriber after the other,
 * in slices so that other work (a query, a webhook) runs between them. A transport frames the
 * shared result around bytes it serialised once (graphql-ws's `next` carries the subscription's id,
 * SSE's and multipart's messages are the same for every subscriber).
 *
 * Everything that is not one subscriber's share of a shared result keeps the ordinary path, in
 * order: the pump hands it to the stream's consumer as an iterator would (a replayed event, a
 * notice that ends the subscription, an event whose shared read met an upstream outage and is read
 * again by each subscriber, every delivery while tracing is on). Backpressure is the same: a write
 * the transport could not hand to the socket at once stops the pump until the socket took it, and
 * the events meanwhile wait in the subscriber's bounded queue under its overflow policy.
 */
import type { ResultWrite } from '../../direct-delivery-contract.ts';
import type { EndableIterator } from './push-pull-queue.ts';
import { SKIP } from './push-pull-queue.ts';

/**
 * A stream of changes that can be delivered directly once each change is turned into a result:
 * what the live stream (`live-stream.ts`) offers the execution (`execute-live-event.ts`), which
 * offers {@link DirectStream} to the transports. `toResult` makes a shared change's result, once
 * per outcome; the iterator answered yields the changes of the ordinary way.
 */
export interface DirectChanges<C, D> {
  [DIRECT_CHANGES]<R>(toResult: (change: C) => Promise<R>, write: ResultWrite<R>): EndableIterator<D>;
}

/** The property of a live stream that its execution asks for (see {@link DirectChanges}). */
export const DIRECT_CHANGES = Symbol('direct changes');

/** Whether `stream` offers its changes for direct delivery. */
export function hasDirectChanges<C, D>(stream: object): stream is DirectChanges<C, D> {
  return DIRECT_CHANGES in stream;
}

/** What a {@link SharedOutcome} settles to besides a result: nothing to deliver, or read it alone. */
export const DROPPED = Symbol('dropped');
export const READ_ALONE = Symbol('read alone');

/** Subscribers a shared outcome hands its result to before letting other work run. */
const SLICE = 256;

/**
 * The result of one event for the subscribers that share it, made once. Waiting pumps are resumed
 * in the order they came, {@link SLICE} at a time.
 */
export class SharedOutcome<R> {
  settled = false;
  value: R | typeof DROPPED | typeof READ_ALONE = READ_ALONE;
  private waiting: Resumable[] | undefined = [];

  constructor(make: () => Promise<R | typeof DROPPED | typeof READ_ALONE>) {
    make().then(
      (value) => this.settle(value),
      () => this.settle(READ_ALONE),
    );
  }

  wait(pump: Resumable): void {
    this.waiting?.push(pump);
  }

  private settle(value: R | typeof DROPPED | typeof READ_ALONE): void {
    this.value = value;
    this.settled = true;
    const waiting = this.waiting ?? [];
    this.waiting = undefined;
    resumeInSlices(waiting, 0);
  }
}

/** What waits on a shared outcome. */
interface Resumable {
  resume(): void;
}

function resumeInSlices(pumps: Resumable[], from: number): void {
  const end = Math.min(pumps.length, from + SLICE);
  for (let index = from; index < end; index += 1) pumps[index]!.resume();
  if (end < pumps.length) setImmediate(resumeInSlices, pumps, end);
}

/** What one pump reads from and writes to; see {@link DirectPump}. */
export interface PumpParts<R, I, D> {
  /** The subscriber's queue: a live item at once, `empty`, or `other` (then `next()`). */
  takeLive(): I | 'empty' | 'other';
  next(): Promise<IteratorResult<unknown>>;
  onQueued(listener: (() => void) | undefined): void;
  /** Stops the queue (the stream was stopped). */
  stop(): Promise<unknown>;
  /**
   * The shared outcome of a live item, `SKIP` when the subscriber must not get it, or undefined
   * when it goes the ordinary way ({@link PumpParts.slow}).
   */
  shared(item: I): SharedOutcome<R> | typeof SKIP | undefined;
  /** Told of each shared result handed to this subscriber's transport. */
  delivered(item: I): void;
  /** The ordinary way of any item of the queue: a delivery for the consumer, or SKIP. */
  slow(item: unknown): Promise<D | typeof SKIP>;
  /** Deliveries the consumer gets before anything of the queue (a `since` replay). */
  first: D[];
  write: ResultWrite<R>;
  /** Called once when the stream has ended, by any path. */
  onDone(): void;
}

/**
 * One subscriber's consumer of its queue in direct delivery. The live items whose results are
 * shared go straight to `write`; everything else is handed, in order, to the consumer of the
 * iterator the pump is (the transport, through the per-subscriber execution): the pump waits until
 * that consumer asks for the next item before it goes on. One state object per subscription, no
 * promise per delivery while results are shared and the socket takes them.
 */
export class DirectPump<R, I, D> implements EndableIterator<D> {
  private running = false;
  /** Set while the pump waits: on a shared outcome, a write, or the consumer. */
  private blocked = false;
  private done = false;
  private started = false;
  /** The consumer's pending `next()`. */
  private asking: { resolve(result: IteratorResult<D>): void; reject(error: unknown): void } | undefined;
  /** The item whose shared outcome the pump waits on. */
  private awaited: { item: I; outcome: SharedOutcome<R> } | undefined;
  private readonly pump = (): void => this.run();
  private readonly parts: PumpParts<R, I, D>;

  constructor(parts: PumpParts<R, I, D>) {
    this.parts = parts;
  }

  next(): Promise<IteratorResult<D>> {
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    if (this.asking !== undefined) return Promise.reject(new Error('next() called while another is pending'));
    const first = this.parts.first.shift();
    if (first !== undefined) return Promise.resolve({ value: first, done: false });
    const asked = new Promise<IteratorResult<D>>((resolve, reject) => {
      this.asking = { resolve, reject };
    });
    if (!this.started) {
      this.started = true;
      this.parts.onQueued(this.pump);
    }
    // The consumer took what it was handed (or asks for the first time): the pump goes on.
    this.blocked = false;
    this.run();
    return asked;
  }

  async return(): Promise<IteratorResult<D>> {
    this.finish();
    await this.parts.stop();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The shared outcome this pump waited on has settled. */
  resume(): void {
    if (this.done || this.awaited === undefined) return;
    this.blocked = false;
    this.run();
  }

  private run(): void {
    if (this.running) return;
    this.running = true;
    try {
      this.step();
    } catch (error) {
      // A broken write or read ends this subscriber's stream alone, as a throwing iterator would.
      this.fail(error);
    } finally {
      this.running = false;
    }
  }

  private step(): void {
    while (!this.blocked && !this.done) {
      if (this.awaited !== undefined) {
        if (!this.awaited.outcome.settled) {
          this.blocked = true;
          this.awaited.outcome.wait(this);
          return;
        }
        const { item, outcome } = this.awaited;
        this.awaited = undefined;
        this.deliverShared(item, outcome);
        continue;
      }
      const taken = this.parts.takeLive();
      if (taken === 'empty') return;
      if (taken === 'other') {
        this.handOver(this.parts.next());
        return;
      }
      const shared = this.parts.shared(taken);
      if (shared === SKIP) continue;
      if (shared === undefined) {
        this.handOver(Promise.resolve({ value: taken, done: false }));
        return;
      }
      this.awaited = { item: taken, outcome: shared };
    }
  }

  private deliverShared(item: I, outcome: SharedOutcome<R>): void {
    const { value } = outcome;
    if (value === DROPPED) return;
    if (value === READ_ALONE) {
      this.handOver(Promise.resolve({ value: item, done: false }));
      return;
    }
    this.parts.delivered(item);
    const written = this.parts.write(value);
    if (written === true) return;
    if (written === false) {
      void this.return();
      return;
    }
    this.blocked = true;
    written.then(
      (open) => {
        if (!open) {
          void this.return();
          return;
        }
        this.blocked = false;
        this.run();
      },
      (error: unknown) => this.fail(error),
    );
  }

  /**
   * Hands the next item of the ordinary way to the consumer, which is asking (the pump runs only
   * then): the pump stays blocked until the consumer asks again. An item that yields nothing lets
   * the pump go on at once.
   */
  private handOver(item: Promise<IteratorResult<unknown>>): void {
    this.blocked = true;
    item
      .then(async (step): Promise<IteratorResult<D> | undefined> => {
        if (step.done === true) return { value: undefined, done: true };
        const delivery = await this.parts.slow(step.value);
        return delivery === SKIP ? undefined : { value: delivery, done: false };
      })
      .then(
        (result) => {
          if (result === undefined) {
            this.blocked = false;
            this.run();
          } else if (result.done === true) this.finish();
          else {
            const asking = this.asking;
            this.asking = undefined;
            asking?.resolve(result);
          }
        },
        (error: unknown) => this.fail(error),
      );
  }

  private fail(error: unknown): void {
    const asking = this.asking;
    this.asking = undefined;
    this.finish();
    asking?.reject(error);
    void this.parts.stop();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.parts.onQueued(undefined);
    this.asking?.resolve({ value: undefined, done: true });
    this.asking = undefined;
    this.parts.onDone();
  }
}
