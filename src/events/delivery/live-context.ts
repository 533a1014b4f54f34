/**
 * What a subscription resolver needs beyond an ordinary operation's context: the subscriber's
 * environment, its bounded event queue, and fresh per-event contexts with its credentials (shared
 * by the subscribers that read alike). Only operations of a live transport (graphql-ws, SSE ...)
 * carry it; an HTTP request has none.
 */
import { GraphQLError, type ExecutionArgs, type ExecutionResult } from 'graphql';
import type { GraphContext } from '../../graph/context.ts';
import type { EventTracer } from '../event-tracing.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { CursorCodec } from '../log/cursor-codec.ts';
import type { DROPPED, READ_ALONE, SharedOutcome } from './direct-delivery.ts';
import type { LiveQueryStream } from './live-queries.ts';
import type { SubscriberQueue } from './subscriber-queue.ts';

/** One subscriber's side of a live connection (any live transport), as its subscription resolvers see it. */
export interface LiveSession {
  /** The environment of the subscriber's key, learnt from capability discovery at connection. */
  readonly environment: PlatformEnvironment;
  /**
   * The form of the cursors this subscriber is handed and gives back: the stream hands out
   * `encode`d log positions, and an `after` argument is `decode`d before anything listens.
   */
  readonly cursors: CursorCodec;
  /**
   * Opens the subscriber's bounded queue on its environment's events; resolves once it listens.
   * With `after` (a log position, decoded from a cursor), the queue first yields the logged events after it (see
   * `subscriber-queue.ts`); a cursor the log no longer resumes from rejects with CursorExpiredError.
   */
  openQueue(accept: (event: PlatformEvent) => boolean, after?: string): Promise<SubscriberQueue>;
  /** A new context with the subscriber's credentials and empty loaders, for its own replay reads. */
  createEventContext(): GraphContext;
  /**
   * Runs a live query (`query @live`): its first answer, then one per change of what it read
   * (`live-queries.ts`); its result alone when it read nothing to follow.
   */
  liveQuery(args: ExecutionArgs): Promise<ExecutionResult | LiveQueryStream>;
  /**
   * The context `event` is read and executed with: fresh loaders, the subscriber's credentials,
   * shared with the subscribers that read alike (same upstream key, same scope, same operation), so
   * they make one read of each resource per event between them (`shared-event-reads.ts`).
   * `resumed` events (read from the log after a cursor) share a context, and so an execution, only
   * with other resumed deliveries: their payloads differ from the live ones (`replayed`).
   */
  eventContext(event: PlatformEvent, resumed?: boolean): GraphContext;
  /**
   * The execution of a change read with the shared `context`: the one already made by a subscriber
   * of the same operation and group, else `run()`, kept for the next one.
   */
  sharedExecution<T>(context: GraphContext, run: () => Promise<T>): Promise<T>;
  /**
   * The outcome of a live `event` for every subscriber that shares its context (as
   * {@link LiveSession.eventContext} says), made by `make` the first time within the sharing window:
   * what direct delivery hands each of them (`direct-delivery.ts`). Absent where nothing is shared.
   */
  readonly sharedOutcome?: <R>(
    event: PlatformEvent,
    make: () => Promise<R | typeof DROPPED | typeof READ_ALONE>,
  ) => SharedOutcome<R> | undefined;
  /** Told when an event's payload leaves for the subscriber, and when its queue overflowed (metrics). */
  readonly observer?: LiveObserver;
  /**
   * Records that this subscription follows `customerId` until the returned function is called:
   * the customers with live subscribers are the ones whose missed webhooks are reconciled.
   */
  watchCustomer?(customerId: string): () => void;
  /** The subscription operation's name, when its document names it (delivery spans carry it). */
  readonly operationName?: string;
}

/** Hooks for what watches deliveries without changing them. Must not throw. */
export interface LiveObserver {
  /**
   * Work a subscriber waits on begins: its stream opening (the admission and the replay), an
   * event's delivery (its payload read) or a live query's execution, each reading the upstream
   * too; the returned function is called once it ends, however it ends.
   */
  working?(): () => void;
  delivered(event: PlatformEvent): void;
  /** An event of the log was delivered to a subscriber resuming after a cursor (metrics). */
  replayed?(): void;
  overflowed(): void;
  /** With tracing on: opens the span of one event's delivery to this subscriber. */
  traceDelivery?: EventTracer['deliver'];
}

/** What a subscription run outside a live transport is told. */
export const SUBSCRIPTIONS_ARE_LIVE =
  'Subscriptions and @live queries are served over graphql-ws (WebSocket) at /graphql and over Server-Sent Events at /graphql/stream.';

/** The context of an operation received over a live transport. */
export interface LiveGraphContext extends GraphContext {
  readonly live: LiveSession;
}

/**
 * The live session of `context`.
 *
 * @throws GraphQLError when the operation did not come over a live transport (subscriptions need one).
 */
export function liveSessionOf(context: GraphContext): LiveSession {
  const live = (context as Partial<LiveGraphContext>).live;
  if (live === undefined) {
    throw new GraphQLError(SUBSCRIPTIONS_ARE_LIVE, {
      extensions: { code: 'BAD_REQUEST' },
    });
  }
  return live;
}
