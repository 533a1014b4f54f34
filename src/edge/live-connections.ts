/**
 * What every live transport (graphql-ws, Server-Sent Events ...) does with a connection once the
 * door has let its caller in, so an adapter only translates its wire: the caller's subscriber and
 * the end of the connection when the token expires; then, per operation, the door's admission (its
 * `admit`: the caller's running-operation hold and every step after it; the token and the connection asked
 * again after each wait), the execution arguments with a context whose call budget is the
 * document's own and the caller's one pool per event, and the same record (log line, metrics,
 * lifecycle) for an operation that runs and for one refused.
 */
import type { ExecutionArgs } from 'graphql';
import type { LiveGraphContext, LiveSession } from '../events/delivery/live-context.ts';
import type { LiveSessions, LiveSubscriber } from '../events/delivery/live-sessions.ts';
import type { CallRound } from '../events/delivery/live-query-groups.ts';
import type { CursorCodec } from '../events/log/cursor-codec.ts';
import type { GraphContext } from '../graph/context.ts';
import { createCallBudget, type CallBudget } from '../upstream/call-budget.ts';
import { newRequestId } from '../upstream/request-id.ts';
import type { SharedReadCache } from '../upstream/client.ts';
import type { AdmittedOperation, Connection, OperationRequest, TransportRules } from './door/door.ts';
import type { EventCallPools, LiveDoor } from './door/audiences.ts';
import type { OperationRecorder, RecordedOperation } from '../observability/operation-record.ts';
import type { ClientLabel } from '../observability/field-usage.ts';
import { graphQLErrorsOf, isRefusal, refuse, type Refusal } from './refusal.ts';

export interface LiveConnectionsOptions {
  /** The door's parts for live operations: their admission, the token's expiry, each event's pool. */
  door: LiveDoor & EventCallPools;
  live: LiveSessions;
  record: OperationRecorder;
  /** Builds an operation's context for `connection`, as HTTP does, with the door's call budget. */
  createContext(input: {
    connection: Connection;
    callBudget: CallBudget;
    readCache?: SharedReadCache | undefined;
    /** The operation's request id (its record names it before its context is built); generated when absent. */
    requestId?: string | undefined;
  }): GraphContext;
}

/** One admitted connection of a live transport. */
export interface LiveConnection {
  readonly connection: Connection;
  /**
   * Admits one operation (`id` is the transport's, unique on the connection); `isOpen` tells
   * whether the transport can still deliver, asked again after every wait. `resumeAfter`: the log
   * position of a cursor the transport carried beside the document (SSE's `Last-Event-ID`, read
   * with {@link LiveConnections.cursors}), where its queue resumes unless the document gives an
   * `after` of its own.
   */
  admit(
    id: string,
    request: OperationRequest,
    isOpen: () => boolean,
    resumeAfter?: string,
  ): Promise<LiveOperation | Refusal>;
  /** The transport closed: every operation's hold is released and the expiry timer stopped. */
  close(): void;
}

/** One admitted operation of a live connection. */
export interface LiveOperation {
  readonly admitted: AdmittedOperation;
  /** What to execute (with the parts' `execute`), its context included. */
  readonly args: ExecutionArgs & { contextValue: LiveGraphContext };
  /** The operation listens now (its queue subscribed, any replay read). */
  started(): void;
  /** The operation ended; its hold is released. Idempotent. */
  completed(): void;
}

export interface LiveConnections {
  /**
   * Opens the live side of `connection` (admitted by `door.connect` with `kind: 'live'`).
   * `onExpired` is called once its credential has expired (its queues already ended with an
   * UNAUTHENTICATED error), with the refusal to close the transport with. `client`: what the client
   * calls itself (its name and version headers), for the field usage.
   */
  open(connection: Connection, onExpired: (refusal: Refusal) => void, client?: ClientLabel): LiveConnection;
  /**
   * The form of the cursors `connection`'s caller is handed and gives back (its environment's),
   * to read one the transport carries beside the document before the connection is opened.
   */
  cursors(connection: Connection): CursorCodec;
  /** Operations that listen now, over every connection. */
  running(): number;
  /** Resolves once no operation listens, or after `timeoutMs`. */
  emptied(timeoutMs: number): Promise<void>;
}

/** Longest a timer may wait in Node; a later expiry is re-armed when this one fires. */
const MAX_TIMER_MS = 2_147_483_647;

export function createLiveConnections(
  transport: TransportRules,
  options: LiveConnectionsOptions,
): LiveConnections {
  const { door, live } = options;
  const listening = createListening();
  let nextConnection = 0;

  return {
    open(connection, onExpired, client) {
      const { caller, environment } = connection;
      if (caller === undefined || environment === undefined)
        throw new Error('a live connection without a caller');
      const subscriber = live.subscriber(caller, connection.apiKey, environment);
      const connectionId = (nextConnection += 1);
      const holds = new Map<string, () => void>();
      const stopExpiry = watchExpiry(door.expiresAt(connection), () => {
        void expire(live, subscriber, () =>
          onExpired(refuse('credentials-expired', 'The access token has expired.')),
        );
      });
      const operations = { transport, options, connection, subscriber, listening, client };

      return {
        connection,
        async admit(id, request, isOpen, resumeAfter) {
          const key = `${connectionId}:${id}`;
          const refused = (refusal: Refusal): Refusal => {
            const codes = graphQLErrorsOf(refusal).map((error) => String(error.extensions['code']));
            const recorded = recordOf(transport, connection, key, null, 'unknown', '', false);
            options.record.completed(recorded, codes, performance.now(), false);
            return refusal;
          };
          const closing = (): Refusal | undefined =>
            isOpen()
              ? undefined
              : refuse('connection-closing', 'The connection is closing: nothing more runs on it.');
          const early = closing();
          if (early !== undefined) return refused(early);
          const admission = await door.admit(connection, request, transport);
          if (isRefusal(admission)) return refused(admission);
          // Asked again after the wait: the transport may have closed, or the token expired, meanwhile.
          const refusal = closing() ?? door.checkCurrent(connection);
          const { operation: admitted, release } = admission;
          if (refusal !== undefined) {
            release();
            return refused(refusal);
          }
          holds.set(id, release);
          return startOperation(operations, key, admitted, resumeAfter, () => {
            holds.delete(id);
            release();
          });
        },
        close() {
          stopExpiry();
          for (const release of holds.values()) release();
          holds.clear();
        },
      };
    },

    cursors: (connection) => {
      if (connection.environment === undefined) throw new Error('a live connection without an environment');
      return live.cursors(connection.environment);
    },
    running: () => listening.size(),
    emptied: (timeoutMs) => listening.emptied(timeoutMs),
  };
}

/** The operations that listen now, over every connection of one transport, and who waits for none. */
interface Listening {
  add(key: string): void;
  delete(key: string): void;
  size(): number;
  /** Resolves once no operation listens, or after `timeoutMs`. */
  emptied(timeoutMs: number): Promise<void>;
}

function createListening(): Listening {
  const keys = new Set<string>();
  const waiters = new Set<() => void>();
  return {
    add: (key) => void keys.add(key),
    delete(key) {
      keys.delete(key);
      if (keys.size > 0) return;
      for (const wake of waiters) wake();
      waiters.clear();
    },
    size: () => keys.size,
    async emptied(timeoutMs) {
      if (keys.size === 0) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, timeoutMs));
        waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

/**
 * Calls `expired` once `expiresAt` (ms since the epoch) has passed; never when it is undefined.
 * Answers the function that stops watching.
 */
function watchExpiry(expiresAt: number | undefined, expired: () => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    if (expiresAt === undefined) return;
    const wait = expiresAt - Date.now();
    timer = setTimeout(
      () => {
        if (wait > MAX_TIMER_MS) arm();
        else expired();
      },
      Math.min(Math.max(0, wait), MAX_TIMER_MS),
    );
  };
  arm();
  return () => clearTimeout(timer);
}

/** What one live connection's operations share. */
interface ConnectionParts {
  transport: TransportRules;
  options: LiveConnectionsOptions;
  connection: Connection;
  subscriber: LiveSubscriber;
  listening: Listening;
  client: ClientLabel | undefined;
}

/**
 * One admitted operation: its context (the document's call budget, and per event the caller's one
 * pool), its live session, and its record from the moment it listens to its completion.
 */
function startOperation(
  { transport, options, connection, subscriber, listening, client }: ConnectionParts,
  key: string,
  admitted: AdmittedOperation,
  resumeAfter: string | undefined,
  release: () => void,
): LiveOperation {
  const { door, record } = options;
  const contextFor = (eventId: string | undefined, readCache?: SharedReadCache, round?: CallRound) =>
    options.createContext({
      connection,
      readCache,
      // Each execution gets its document's cost-derived budget; an event's executions also
      // share the caller's one pool for that event, however many subscriptions it runs, and a
      // live query's re-runs the caller's one pool for their round, however many it watches.
      callBudget:
        round !== undefined
          ? door.eventCallBudget(connection, round.id, admitted.callLimit, round.windowMs)
          : eventId === undefined
            ? createCallBudget(admitted.callLimit)
            : door.eventCallBudget(connection, eventId, admitted.callLimit),
    });
  const requestId = newRequestId();
  const operationName = admitted.operationName ?? admitted.operation.name?.value ?? null;
  const recorded: RecordedOperation = {
    ...recordOf(
      transport,
      connection,
      key,
      operationName,
      admitted.operation.operation,
      requestId,
      admitted.trustedDocument === true,
    ),
    usage: {
      schema: admitted.schema,
      document: admitted.document,
      operationName: admitted.operationName,
      variables: admitted.variables,
      caller: connection.caller,
      clientName: client?.name,
      clientVersion: client?.version,
    },
  };
  const args = {
    // The caller's own (its contract's): what the door validated the document against.
    schema: admitted.schema,
    document: admitted.document,
    operationName: admitted.operationName,
    variableValues: admitted.variables,
  };
  const session = options.live.session(
    subscriber,
    args,
    (event, readCache, round) => contextFor(event?.id, readCache, round),
    operationName ?? undefined,
    resumeAfter,
  );
  const startedAt = performance.now();
  let listened = false;
  let done = false;
  return {
    admitted,
    args: {
      ...args,
      contextValue: new OperationContextOnDemand(session, () =>
        options.createContext({ connection, callBudget: createCallBudget(admitted.callLimit), requestId }),
      ),
    },
    started() {
      if (listened || done) return;
      listened = true;
      listening.add(key);
      record.started(recorded);
    },
    completed() {
      if (done) return;
      done = true;
      release();
      if (listened) listening.delete(key);
      record.completed(recorded, [], startedAt, listened);
    },
  };
}

/**
 * The context an operation of a live connection is executed with, built the first time a resolver
 * reads it. A subscription's own resolver reads only its live session (each event runs with a
 * context of its own, and so do a live query's executions), while graphql-ws, the streamed
 * transports and the stream itself keep the execution arguments for the subscription's whole life:
 * built up front, its upstream context, call budget and loaders (about 1.6 KiB) stayed with every
 * subscriber for nothing. Its getters are the prototype's, so each operation holds one small
 * object and the function that builds the rest.
 */
class OperationContextOnDemand implements LiveGraphContext {
  readonly live: LiveSession;
  private readonly build: () => GraphContext;
  private built: GraphContext | undefined;

  constructor(live: LiveSession, build: () => GraphContext) {
    this.live = live;
    this.build = build;
  }

  private get context(): GraphContext {
    this.built ??= this.build();
    return this.built;
  }

  get caller(): GraphContext['caller'] {
    return this.context.caller;
  }

  get upstream(): GraphContext['upstream'] {
    return this.context.upstream;
  }

  get loaders(): GraphContext['loaders'] {
    return this.context.loaders;
  }

  get loaderStats(): GraphContext['loaderStats'] {
    return this.context.loaderStats;
  }

  get cost(): GraphContext['cost'] {
    return this.context.cost;
  }
}

/** How the operation recorder names one operation of a live connection. */
function recordOf(
  transport: TransportRules,
  { caller, environment }: Connection,
  key: string,
  operationName: string | null,
  operationType: RecordedOperation['operationType'],
  requestId: string,
  trustedDocument: boolean,
): RecordedOperation {
  return {
    transport: transport.name,
    id: key,
    operationType,
    operationName,
    subject: caller?.subject ?? '',
    requestId,
    nameSource: { fromOperator: caller?.operator === true, trustedDocument },
    environment,
  };
}

/** Ends `subscriber`'s subscriptions with an UNAUTHENTICATED error, then tells the transport. */
async function expire(live: LiveSessions, subscriber: LiveSubscriber, then: () => void): Promise<void> {
  await live.revoke(subscriber, 1_000);
  // A transport sends each completion right after the stream ends; let those go out first.
  await new Promise((resolve) => setImmediate(resolve));
  then();
}
