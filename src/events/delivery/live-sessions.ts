/**
 * The delivery side of every live transport (graphql-ws, and any other that streams subscription
 * events): a subscriber per connection, a bounded queue per subscription on its environment's
 * events, and the context each event is read with, shared by subscribers that read alike. The
 * transport's adapter (src/edge/) admits the caller and the operation; it hands over here who the
 * subscriber is and how to build a context for it, and nothing here reaches back into the app.
 */
import { GraphQLError, type ExecutionArgs } from 'graphql';
import { mayActFor, type Caller } from '../../auth/caller.ts';
import type { GraphContext } from '../../graph/context.ts';
import type { SharedReadCache } from '../../upstream/client.ts';
import type { CursorCodec } from '../log/cursor-codec.ts';
import type { EventLog } from '../log/event-log.ts';
import type { PlatformEvent } from '../event-types.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import { AwaitableSet } from './awaitable-set.ts';
import { SharedOutcome, type DROPPED, type READ_ALONE } from './direct-delivery.ts';
import type { LiveObserver, LiveSession } from './live-context.ts';
import type { LiveQueries } from './live-queries.ts';
import type { CallRound } from './live-query-groups.ts';
import { createSharedEventReads, operationKeyOf, readGroupOf } from './shared-event-reads.ts';
import { openSubscriberQueue, type SubscriberQueue } from './subscriber-queue.ts';

/** One connection's subscriber: who it is, and the queues of its subscriptions. */
export interface LiveSubscriber {
  readonly caller: Caller;
  readonly environment: PlatformEnvironment;
  /** Which subscribers read alike (key and scope): their subscriptions of one operation share reads. */
  readonly readGroup: string;
  /**
   * The queues of this connection's subscriptions and the streams of its live queries, ended
   * together when its credential expires.
   */
  readonly queues: AwaitableSet<LiveStreamEnd>;
}

/** How a subscription's queue or a live query's stream is ended from outside. */
export type LiveStreamEnd = Pick<SubscriberQueue, 'end' | 'revoke'>;

/**
 * Builds a context for one subscription: for `event` (its read cache shared by the group), or for
 * the subscription's own reads (replay) when `event` is undefined; a live query's re-run names its
 * `round`, whose pool of upstream calls the caller's other re-runs of that round share.
 */
export type SubscriptionContexts = (
  event: PlatformEvent | undefined,
  readCache: SharedReadCache | undefined,
  round?: CallRound,
) => GraphContext;

export interface LiveSessionsOptions {
  /** The event log subscribers listen to and resume from. */
  log: EventLog;
  /** The form of the cursors this pipeline's subscribers are handed and give back. */
  cursors: CursorCodec;
  /** Events one subscriber may let wait; see `subscriber-queue.ts` for what happens beyond. */
  queueLimit: number;
  /** Told about deliveries and overflows (metrics, delivery spans). */
  observer?: LiveObserver | undefined;
  /** Records the customers subscriptions follow (for the reconciliation of missed webhooks). */
  watchCustomer?: (environment: PlatformEnvironment, customerId: string) => () => void;
  /** Re-runs live queries when what they read is made stale; absent (no response cache), none is served. */
  liveQueries?: LiveQueries | undefined;
}

export interface LiveSessions {
  /** The subscriber of a connection admitted for `caller` (with its own key, if any). */
  subscriber(caller: Caller, apiKey: string | undefined, environment: PlatformEnvironment): LiveSubscriber;
  /**
   * The live session of one subscription of `subscriber` running `args`. `resumeAfter`: the log
   * position of a cursor the transport carried beside the document (SSE's `Last-Event-ID`, read
   * with {@link LiveSessions.cursors}); a queue the document opens without an `after` of its own
   * resumes after it.
   */
  session(
    subscriber: LiveSubscriber,
    args: Pick<ExecutionArgs, 'document' | 'operationName' | 'variableValues'>,
    contexts: SubscriptionContexts,
    operationName: string | undefined,
    resumeAfter?: string,
  ): LiveSession;
  /**
   * The form of the cursors the callers of `environment` are handed and give back: what a
   * transport reads a cursor it carries beside the document with (SSE's `Last-Event-ID`).
   */
  cursors(environment: PlatformEnvironment): CursorCodec;
  /** Ends `subscriber`'s queues with an UNAUTHENTICATED error; resolves once they have ended. */
  revoke(subscriber: LiveSubscriber, timeoutMs: number): Promise<void>;
  /** Ends every queue (shutdown); queues opened from now on end at once. */
  endAll(): void;
}

export function createLiveSessions(options: LiveSessionsOptions): LiveSessions {
  const queues = new Set<LiveStreamEnd>();
  const sharedReads = createSharedEventReads();
  const intern = createInterner();
  let ended = false;

  return {
    subscriber: (caller, apiKey, environment) => ({
      caller,
      environment,
      readGroup: intern(readGroupOf(caller, apiKey)),
      queues: new AwaitableSet(),
    }),

    session(subscriber, args, contexts, operationName, resumeAfter) {
      const { caller, readGroup } = subscriber;
      // Only the same operation of the same group shares an event's context (and its execution):
      // the context's call and retry budgets are one operation's, which another document's reads
      // could spend. Other operations of the group share the event's GET answers instead, each
      // charged to its own budget as if it had read alone.
      const operation = operationKeyOf(args);
      const sharedBy = operation === undefined ? undefined : intern(JSON.stringify([readGroup, operation]));
      // Resumed deliveries carry `replayed: true`: they share among themselves, never with live ones.
      const resumedSharedBy =
        operation === undefined ? undefined : intern(JSON.stringify([readGroup, operation, 'resumed']));
      const { watchCustomer } = options;
      return {
        environment: subscriber.environment,
        cursors: options.cursors,
        async openQueue(accept, afterArgument) {
          const after = afterArgument ?? resumeAfter;
          const queue = await openSubscriberQueue({
            log: options.log,
            ...(after === undefined ? {} : { after }),
            // What the log answers about a cursor tells a scoped caller nothing of others' events.
            scopedCaller: !caller.operator,
            environment: subscriber.environment,
            // Events of customers the caller may not act for never take queue space, nor a read.
            accept: (event) => isVisibleTo(caller, event.data.customerId) && accept(event),
            limit: options.queueLimit,
            onDone: () => {
              queues.delete(queue);
              subscriber.queues.delete(queue);
            },
          });
          if (ended) queue.end();
          queues.add(queue);
          subscriber.queues.add(queue);
          return queue;
        },
        createEventContext: () => contexts(undefined, undefined),
        async liveQuery(executionArgs) {
          const { liveQueries } = options;
          if (liveQueries === undefined) {
            return {
              errors: [
                new GraphQLError(
                  'Live queries follow the response cache, which is switched off here (CACHE_ENABLED=false): send the query without @live.',
                  { extensions: { code: 'BAD_REQUEST' } },
                ),
              ],
            };
          }
          // Set once the stream exists; its end is told only after.
          const handle: { stream?: LiveStreamEnd } = {};
          const working = options.observer?.working?.bind(options.observer);
          const answer = await liveQueries.watch({
            args: executionArgs,
            // Shared by the group's watchers of the same operation in the same environment.
            group:
              operation === undefined
                ? undefined
                : JSON.stringify([readGroup, subscriber.environment, operation, 'live-query']),
            contextFor: (reads, round) => contexts(undefined, reads, round),
            ...(working === undefined ? {} : { working }),
            ...(watchCustomer === undefined
              ? {}
              : { watchCustomer: (customerId: string) => watchCustomer(subscriber.environment, customerId) }),
            onDone: () => {
              if (handle.stream === undefined) return;
              queues.delete(handle.stream);
              subscriber.queues.delete(handle.stream);
            },
          });
          if (!('next' in answer)) return answer;
          handle.stream = answer;
          queues.add(answer);
          subscriber.queues.add(answer);
          if (ended) answer.end();
          return answer;
        },
        eventContext: (event, resumed) =>
          sharedBy === undefined || resumedSharedBy === undefined
            ? contexts(event, undefined)
            : sharedReads.contextFor(event.id, resumed === true ? resumedSharedBy : sharedBy, () =>
                contexts(event, sharedReads.readCacheFor(event.id, readGroup)),
              ),
        sharedExecution: (context, run) => sharedReads.executionWith(context, run),
        // Live (not resumed) deliveries of the operations that share contexts share their outcome.
        ...(sharedBy === undefined
          ? {}
          : {
              sharedOutcome: <R>(
                event: PlatformEvent,
                make: () => Promise<R | typeof DROPPED | typeof READ_ALONE>,
              ) => sharedReads.outcomeFor(event.id, sharedBy, () => new SharedOutcome(make)),
            }),
        ...(options.observer === undefined ? {} : { observer: options.observer }),
        ...(watchCustomer === undefined
          ? {}
          : { watchCustomer: (customerId: string) => watchCustomer(subscriber.environment, customerId) }),
        ...(operationName === undefined ? {} : { operationName }),
      };
    },

    cursors: () => options.cursors,

    async revoke(subscriber, timeoutMs) {
      for (const queue of subscriber.queues) queue.revoke();
      await subscriber.queues.emptied(timeoutMs);
    },

    endAll() {
      ended = true;
      for (const queue of queues) queue.end();
    },
  };
}

/** Distinct keys an interner holds before it starts over: a bound, however many callers come and go. */
const INTERNED_KEYS = 4096;

/**
 * One copy of each equal key: every subscriber of one operation and read group builds the same
 * sharing keys, and thousands of subscribers kept a copy each for their subscriptions' lives
 * (about 260 bytes a subscriber). Keys are compared by value, so one made again after the table
 * started over works as well.
 */
function createInterner(): (key: string) => string {
  const held = new Map<string, string>();
  return (key) => {
    const known = held.get(key);
    if (known !== undefined) return known;
    if (held.size >= INTERNED_KEYS) held.clear();
    held.set(key, key);
    return key;
  };
}

/** Whether an event of `customerId` may reach `caller`: its own customers', or every one for operators. */
function isVisibleTo(caller: Caller, customerId: string | null): boolean {
  if (caller.operator) return true;
  return customerId !== null && mayActFor(caller, customerId);
}
