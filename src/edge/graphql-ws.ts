/**
 * The graphql-ws adapter of the door: graphql-ws on the facade's own http.Server at `/graphql`,
 * translated to the door and back. The upgrade is checked for its origin; `connection_init` is the
 * door's connect; every `subscribe` message is the door's admit, asked again for each message, so
 * nothing runs once the caller's token has expired (with the verifier's clock tolerance) or once
 * the socket is no longer open. A socket the server closes and whose client does not complete the
 * close handshake is terminated after a short grace. graphql-ws serves subscriptions only: queries
 * and mutations go over HTTP, where Apollo Server logs, measures and audits them.
 */
import type { Server as HttpServer, IncomingMessage } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { GraphQLError, OperationTypeNode, type GraphQLFormattedError, type GraphQLSchema } from 'graphql';
import type { Context } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Credentials } from '../auth/authenticate.ts';
import { AwaitableSet } from '../events/delivery/awaitable-set.ts';
import type { LiveGraphContext } from '../events/delivery/live-context.ts';
import { subscribeWithEventContexts } from '../events/delivery/execute-live-event.ts';
import type { LiveSessions, LiveSubscriber } from '../events/delivery/live-sessions.ts';
import type { WebSocketLimits } from '../events/config.ts';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import { createCallBudget, type CallBudget } from '../upstream/call-budget.ts';
import type { SharedReadCache } from '../upstream/client.ts';
import type { AdmittedOperation, Connection, Door, TransportRules } from './door.ts';
import type { OperationRecorder, RecordedOperation } from './operation-record.ts';
import { verifyClientOf } from './origin.ts';
import { closeOf, endsConnection, graphQLErrorsOf, isRefusal, refuse, type Refusal } from './refusal.ts';

/** graphql-ws serves subscriptions; a query or mutation is refused with `wrong-transport`. */
export const GRAPHQL_WS_TRANSPORT: TransportRules = {
  name: 'graphql-ws',
  serves: new Set([OperationTypeNode.SUBSCRIPTION]),
  elsewhere:
    'Queries and mutations are served over HTTP (POST /graphql); graphql-ws serves subscriptions only.',
};

/** How long a client has to answer the server's close frame before its socket is cut. */
export const CLOSE_GRACE_MS = 2_000;

export interface GraphQLWebSocketOptions {
  httpServer: HttpServer;
  schema: GraphQLSchema;
  door: Door;
  /** Message size, operations per connection, `connection_init` wait and keep-alive pings. */
  limits: WebSocketLimits;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(request: IncomingMessage): string;
  /** Builds an operation's context for `connection`, as HTTP does, with the door's call budget. */
  createContext(input: {
    connection: Connection;
    callBudget: CallBudget;
    readCache?: SharedReadCache | undefined;
  }): GraphContext;
  live: LiveSessions;
  record: OperationRecorder;
  /** The facade's error formatting (the same as HTTP's): upstream problems kept, the unexpected masked. */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  logger: Logger;
}

/** A running graphql-ws endpoint. */
export interface GraphQLWebSocketEndpoint {
  /** Stops taking connections, completes every subscription, closes the sockets with 1001. */
  drain(timeoutMs?: number): Promise<void>;
  activeSubscriptions(): number;
  activeConnections(): number;
}

interface ConnectionState {
  connection: Connection;
  subscriber: LiveSubscriber;
  /** What each running operation was admitted as, its hold on the caller's cap, and its record. */
  operations: Map<
    string,
    { admitted: AdmittedOperation; release: () => void; record?: RecordedOperation; startedAt: number }
  >;
  expiry: NodeJS.Timeout | undefined;
}
type ConnectionExtra = { state?: ConnectionState };
type Ctx = Context<Record<string, unknown> | undefined, Extra & ConnectionExtra>;

/** Longest a timer may wait in Node; a later expiry is re-armed when this one fires. */
const MAX_TIMER_MS = 2_147_483_647;

export function attachGraphQLWebSocket(options: GraphQLWebSocketOptions): GraphQLWebSocketEndpoint {
  const { door, live, record } = options;
  const logger = options.logger.child({ component: 'graphql-ws' });
  const wsServer = new WebSocketServer({
    server: options.httpServer,
    path: '/graphql',
    // Browsers apply no CORS to WebSockets: a foreign page is refused at the upgrade.
    verifyClient: verifyClientOf((origin, host) => door.checkOrigin(origin, host)),
    // A larger message closes the connection with 1009 before it is buffered whole.
    maxPayload: options.limits.maxPayloadBytes,
  });
  // Whoever closes a socket (graphql-ws or this adapter), a client that does not answer the close
  // frame keeps it CLOSING for 30 s in `ws`; it is cut after the grace instead.
  wsServer.on('connection', (socket) => {
    const close = socket.close.bind(socket);
    socket.close = (code?: number, reason?: string | Buffer) => {
      close(code, reason);
      const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
      cut.unref();
      socket.once('close', () => clearTimeout(cut));
    };
  });
  const running = new AwaitableSet<string>();
  let nextConnection = 0;
  const connectionIds = new WeakMap<object, number>();
  let draining = false;
  const operationId = (ctx: Ctx, id: string): string => {
    let connectionId = connectionIds.get(ctx);
    if (connectionId === undefined) connectionIds.set(ctx, (connectionId = nextConnection += 1));
    return `${connectionId}:${id}`;
  };
  /** A refusal as graphql-ws answers it: errors for the operation, the connection closed if it says so. */
  const answer = (socket: WebSocket, refusal: Refusal): GraphQLError[] => {
    if (endsConnection(refusal)) {
      const { code, reason } = closeOf(refusal);
      socket.close(code, reason);
    }
    return graphQLErrorsOf(refusal);
  };

  const server = useServer<Record<string, unknown> | undefined, ConnectionExtra>(
    {
      schema: options.schema,
      connectionInitWaitTimeout: options.limits.connectionInitTimeoutMs,
      subscribe: subscribeWithEventContexts,
      onConnect: async (ctx) => {
        const { socket, request } = ctx.extra;
        const refused = (refusal: Refusal): false => {
          const { code, reason } = closeOf(refusal);
          logger.info('refused a graphql-ws connection', { closeCode: code });
          // Closing first sets the code; graphql-ws's own close after `false` (4403) is then ignored.
          socket.close(code, reason);
          return false;
        };
        if (draining) return refused(refuse('shutting-down', 'The server is shutting down.'));
        const connection = await door.connect({
          credentials: credentialsOf(ctx.connectionParams, request),
          address: options.addressOf(request),
          kind: 'live',
        });
        if (isRefusal(connection)) return refused(connection);
        const { caller, environment } = connection;
        if (caller === undefined || environment === undefined)
          throw new Error('a live connection without a caller');
        const state: ConnectionState = {
          connection,
          subscriber: live.subscriber(caller, connection.apiKey, environment),
          operations: new Map(),
          expiry: undefined,
        };
        armExpiry(state, socket);
        socket.once('close', () => {
          clearTimeout(state.expiry);
          for (const operation of state.operations.values()) operation.release();
        });
        ctx.extra.state = state;
        return true;
      },
      onSubscribe: async (ctx, id, payload) => {
        const { socket, state } = ctx.extra;
        // graphql-ws answers a subscribe before the acknowledgement itself (4401).
        if (state === undefined)
          return [new GraphQLError('Unauthorized', { extensions: { code: 'UNAUTHENTICATED' } })];
        if (Object.keys(ctx.subscriptions).length > options.limits.maxSubscriptionsPerConnection) {
          const max = options.limits.maxSubscriptionsPerConnection;
          return [
            new GraphQLError(
              `This connection already runs ${max} operations, the most one connection may run. Complete one first, or open another connection.`,
              { extensions: { code: 'TOO_MANY_SUBSCRIPTIONS', maxSubscriptions: max } },
            ),
          ];
        }
        const closing = (): Refusal | undefined =>
          socket.readyState === socket.OPEN
            ? undefined
            : refuse('connection-closing', 'The connection is closing: nothing more runs on it.');
        const refuseOperation = (refusal: Refusal): GraphQLError[] => {
          const errors = answer(socket, refusal);
          recordRefusal(ctx, id, errors);
          return errors;
        };
        const early = closing();
        if (early !== undefined) return refuseOperation(early);
        const hold = door.holdOperation(state.connection);
        if (isRefusal(hold)) return refuseOperation(hold);
        const admitted = await door.admit(state.connection, payload, GRAPHQL_WS_TRANSPORT);
        // Asked again after every wait: the socket may have closed, or the token expired, meanwhile.
        const refusal = isRefusal(admitted) ? admitted : (closing() ?? door.checkCurrent(state.connection));
        if (refusal !== undefined || isRefusal(admitted)) {
          hold();
          return refuseOperation(refusal ?? refuse('connection-closing', 'The connection is closing.'));
        }
        state.operations.set(id, { admitted, release: hold, startedAt: performance.now() });
        return {
          schema: options.schema,
          document: admitted.document,
          operationName: admitted.operationName,
          variableValues: admitted.variables,
        };
      },
      context: (ctx, id, _payload, args): LiveGraphContext => {
        const state = ctx.extra.state;
        const operation = state?.operations.get(id);
        if (state === undefined || operation === undefined)
          throw new Error('an operation the door did not admit');
        const { connection } = state;
        const { callLimit } = operation.admitted;
        const contextFor = (eventId: string | undefined, readCache?: SharedReadCache) =>
          options.createContext({
            connection,
            readCache,
            // Each execution gets its document's cost-derived budget; an event's executions also
            // share the caller's one pool for that event, however many subscriptions it runs.
            callBudget:
              eventId === undefined
                ? createCallBudget(callLimit)
                : door.eventCallBudget(connection, eventId, callLimit),
          });
        const context = contextFor(undefined);
        operation.record = {
          transport: GRAPHQL_WS_TRANSPORT.name,
          id: operationId(ctx, id),
          operationType: 'subscription',
          operationName: operation.admitted.operationName ?? operation.admitted.operation.name?.value ?? null,
          subject: connection.caller?.subject ?? '',
          requestId: context.upstream.requestId,
        };
        const session = live.session(
          state.subscriber,
          args,
          (event, readCache) => contextFor(event?.id, readCache),
          operation.record.operationName ?? undefined,
        );
        return { ...context, live: session };
      },
      // graphql-ws sends errors as graphql-js made them; HTTP clients get them through Apollo's
      // formatError. Both go through the same function, so no internal message leaks here either.
      onNext: (_ctx, _id, _payload, _args, result) =>
        result.errors === undefined
          ? undefined
          : { ...result, errors: result.errors.map((error) => options.formatError(error.toJSON(), error)) },
      onError: (_ctx, _id, _payload, errors: readonly GraphQLError[]) =>
        errors.map((error) => options.formatError(error.toJSON(), error)),
      // Told once the operation listens (its queue subscribed, any replay read): from here on no
      // change is missed, which is what a client or a test waits for before making one.
      onOperation: (ctx, id) => {
        const recorded = ctx.extra.state?.operations.get(id)?.record;
        if (recorded === undefined) return;
        running.add(recorded.id);
        logger.debug('subscription started', { subscription: recorded.id });
        record.started(recorded);
      },
      onComplete: (ctx, id) => {
        const operation = ctx.extra.state?.operations.get(id);
        if (operation === undefined) return;
        ctx.extra.state?.operations.delete(id);
        operation.release();
        if (operation.record === undefined) return;
        running.delete(operation.record.id);
        logger.debug('subscription completed', { subscription: operation.record.id });
        record.completed(operation.record, [], operation.startedAt, true);
      },
    },
    wsServer,
    options.limits.keepAliveMs,
  );

  function recordRefusal(ctx: Ctx, id: string, errors: readonly GraphQLError[]): void {
    const connection = ctx.extra.state?.connection;
    record.completed(
      {
        transport: GRAPHQL_WS_TRANSPORT.name,
        id: operationId(ctx, id),
        // Refused before (or while) its type was known.
        operationType: 'unknown',
        operationName: null,
        subject: connection?.caller?.subject ?? '',
        requestId: '',
      },
      errors.map((error) => String(error.extensions['code'])),
      performance.now(),
      false,
    );
  }

  /**
   * When the caller's token expires (its `exp` and the clock tolerance), its subscriptions end with
   * an UNAUTHENTICATED error and the socket closes with 4401; it may reconnect with a fresh token
   * and resume with `since`.
   */
  function armExpiry(state: ConnectionState, socket: WebSocket): void {
    const expiresAt = door.expiresAt(state.connection);
    if (expiresAt === undefined) return;
    const wait = expiresAt - Date.now();
    if (wait > MAX_TIMER_MS) {
      state.expiry = setTimeout(() => armExpiry(state, socket), MAX_TIMER_MS);
      return;
    }
    state.expiry = setTimeout(
      () => {
        void (async () => {
          await live.revoke(state.subscriber, 1_000);
          // graphql-ws sends each `complete` right after the stream ends; let those go out first.
          await nextTurn();
          const { code, reason } = closeOf(refuse('credentials-expired', 'The access token has expired.'));
          socket.close(code, reason);
        })();
      },
      Math.max(0, wait),
    );
  }

  return {
    activeSubscriptions: () => running.size,
    activeConnections: () => wsServer.clients.size,
    async drain(timeoutMs = 5_000) {
      if (draining) return;
      draining = true;
      const deadline = Date.now() + timeoutMs;
      // No new connection from here on; the ones open stay open until their subscriptions completed.
      wsServer.close();
      live.endAll();
      await running.emptied(deadline - Date.now());
      // graphql-ws sends `complete` right after its onComplete hook; let those writes go out first.
      await nextTurn();
      const { code, reason } = closeOf(refuse('shutting-down', 'The server is shutting down.'));
      for (const client of wsServer.clients) client.close(code, reason);
      const disposed = Promise.resolve(server.dispose()).then(
        () => undefined,
        // Rejects only when the server had closed already (no socket was open): nothing to wait for.
        () => undefined,
      );
      const timeout = new AbortController();
      const timedOut = sleep(Math.max(0, deadline - Date.now()), undefined, { signal: timeout.signal });
      await Promise.race([disposed, timedOut.catch(() => undefined)]);
      timeout.abort();
      for (const client of wsServer.clients) client.terminate();
      await disposed;
      logger.info('graphql-ws drained', { unfinished: running.size });
    },
  };
}

/**
 * What a connection presents: `Authorization` (or `authorization`) in the `connection_init`
 * payload, else the upgrade request's header; and a caller's own key the same way (`X-API-Key`,
 * `x-api-key` or `apiKey`). A value that is not a string counts as a wrong credential, never as none.
 */
function credentialsOf(params: Record<string, unknown> | undefined, request: IncomingMessage): Credentials {
  return {
    authorization: paramOf(params, ['Authorization', 'authorization']) ?? headerOf(request, 'authorization'),
    apiKey: paramOf(params, ['X-API-Key', 'x-api-key', 'apiKey']) ?? headerOf(request, 'x-api-key'),
  };
}

function paramOf(params: Record<string, unknown> | undefined, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = params?.[name];
    if (typeof value === 'string') return value;
    if (value !== undefined && value !== null) return 'invalid';
  }
  return undefined;
}

function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
