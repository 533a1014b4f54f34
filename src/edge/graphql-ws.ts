/**
 * The graphql-ws adapter of the door: graphql-ws on the facade's own http.Server at `/graphql`,
 * translated to the door and back. The upgrade is checked for its origin; `connection_init` is the
 * door's connect; every `subscribe` message is admitted by the door again (`live-connections.ts`),
 * so nothing runs once the caller's token has expired (with the verifier's clock tolerance) or once
 * the socket is no longer open. A socket the server closes and whose client does not complete the
 * close handshake is cut after a short grace. graphql-ws sends a result only once the socket took
 * the previous one, so a reader that stops reading leaves its events in its bounded subscriber
 * queue, whose overflow policy applies; one that takes no write for `LIVE_STALLED_WRITE_TIMEOUT_MS`
 * is cut, as an SSE stream is. graphql-ws serves subscriptions and live queries (`query @live`,
 * run by the same function) only: other queries and mutations go over HTTP, where Apollo Server runs, logs, measures and audits them.
 */
import type { IncomingMessage } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { GraphQLError } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Credentials } from '../auth/authenticate.ts';
import type { WebSocketLimits } from '../events/config.ts';
import {
  liveTransportRules,
  type AttachedLiveTransport,
  type LiveTransport,
  type LiveTransportParts,
  type LiveWriteLimits,
} from './live.ts';
import type { LiveConnection, LiveOperation } from './live-connections.ts';
import { verifyClientOf } from './origin.ts';
import { closeOf, endsConnection, graphQLErrorsOf, isRefusal, refuse, type Refusal } from './refusal.ts';

/** graphql-ws serves subscriptions; a query or mutation is refused with `wrong-transport`. */
const GRAPHQL_WS_TRANSPORT = liveTransportRules(
  'graphql-ws',
  'Queries and mutations are served over HTTP (POST /graphql); graphql-ws serves subscriptions only, and queries marked @live.',
  {
    protocol: 'the graphql-ws protocol (WebSocket)',
    does: 'connect a graphql-ws client (WebSocket)',
    path: '/graphql',
    wire: 'websocket',
  },
);

/** How long a client has to answer the server's close frame before its socket is cut. */
const CLOSE_GRACE_MS = 2_000;

type ConnectionExtra = { live?: LiveConnection; operations?: Map<string, LiveOperation> };

/** graphql-ws's limits: its own (`GRAPHQL_WS_*`) and the stalled-write deadline of every live transport. */
type GraphQLWebSocketLimits = WebSocketLimits & LiveWriteLimits;

/**
 * graphql-ws as a live transport, with its own limits (message size, operations per connection,
 * `connection_init` wait, keep-alive pings) and the stalled-write deadline.
 */
export const GRAPHQL_WS: LiveTransport = {
  rules: GRAPHQL_WS_TRANSPORT,
  attach: (parts) =>
    attachGraphQLWebSocket(parts, {
      ...parts.limits.webSocket,
      stalledWriteTimeoutMs: parts.limits.stalledWriteTimeoutMs,
    }),
};

function attachGraphQLWebSocket(
  options: LiveTransportParts,
  limits: GraphQLWebSocketLimits,
): AttachedLiveTransport {
  const { door, connections, logger } = options;
  const { name } = GRAPHQL_WS_TRANSPORT;
  const wsServer = new WebSocketServer({
    server: options.httpServer,
    path: '/graphql',
    // Browsers apply no CORS to WebSockets: a foreign page is refused at the upgrade.
    verifyClient: verifyClientOf((origin, host) => door.checkOrigin(origin, host)),
    // A larger message closes the connection with 1009 before it is buffered whole.
    maxPayload: limits.maxPayloadBytes,
  });
  wsServer.on('connection', (socket) => {
    cutAfterCloseGrace(socket);
    cutWhenStalled(socket, limits.stalledWriteTimeoutMs);
  });
  let draining = false;
  const closeWith = (socket: WebSocket, refusal: Refusal): void => {
    const { code, reason } = closeOf(refusal);
    socket.close(code, reason);
  };

  const server = useServer<Record<string, unknown> | undefined, ConnectionExtra>(
    {
      schema: options.schema,
      connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
      subscribe: options.execute,
      // Only a `query @live` gets here as a query (the door refuses any other): a live query.
      execute: options.execute,
      onConnect: async (ctx) => {
        const { socket, request } = ctx.extra;
        const connection = draining
          ? refuse('shutting-down', 'The server is shutting down.')
          : await door.connect({
              credentials: credentialsOf(ctx.connectionParams, request),
              address: options.addressOf(request),
              kind: 'live',
            });
        if (isRefusal(connection)) {
          logger.info(`refused a ${name} connection`, { closeCode: closeOf(connection).code });
          // Closing first sets the code; graphql-ws's own close after `false` (4403) is then ignored.
          closeWith(socket, connection);
          return false;
        }
        // A socket closed while its credential was checked has no `close` event to come.
        if (socket.readyState !== socket.OPEN) return false;
        const live = connections.open(connection, (expired) => closeWith(socket, expired));
        socket.once('close', () => live.close());
        ctx.extra.live = live;
        ctx.extra.operations = new Map();
        return true;
      },
      onSubscribe: async (ctx, id, payload) => {
        const { socket, live, operations } = ctx.extra;
        // graphql-ws closes with 4401 a subscribe sent before the acknowledgement.
        if (live === undefined || operations === undefined) {
          return graphQLErrorsOf(refuse('unauthenticated', 'Unauthorized'));
        }
        const max = limits.maxSubscriptionsPerConnection;
        if (Object.keys(ctx.subscriptions).length > max) {
          // A limit of this transport itself (`GRAPHQL_WS_MAX_SUBSCRIPTIONS`), not a caller's budget.
          return graphQLErrorsOf(
            refuse(
              'too-many-on-connection',
              `This connection already runs ${max} operations, the most one connection may run. Complete one first, or open another connection.`,
              { extensions: { maxSubscriptions: max } },
            ),
          );
        }
        const operation = await live.admit(id, payload, () => socket.readyState === socket.OPEN);
        if (isRefusal(operation)) {
          if (endsConnection(operation)) closeWith(socket, operation);
          return graphQLErrorsOf(operation);
        }
        operations.set(id, operation);
        return operation.args;
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
        ctx.extra.operations?.get(id)?.started();
        logger.debug('subscription started', { subscription: id });
      },
      onComplete: (ctx, id) => {
        const operation = ctx.extra.operations?.get(id);
        if (operation === undefined) return;
        ctx.extra.operations?.delete(id);
        operation.completed();
        logger.debug('subscription completed', { subscription: id });
      },
    },
    wsServer,
    limits.keepAliveMs,
  );

  return {
    activeConnections: () => wsServer.clients.size,
    async drain(timeoutMs) {
      if (draining) return;
      draining = true;
      const deadline = Date.now() + timeoutMs;
      // No new connection from here on; the open ones stay open until their subscriptions completed
      // (the events runtime ends every subscriber's queue).
      wsServer.close();
      await connections.emptied(deadline - Date.now());
      // graphql-ws sends `complete` right after its onComplete hook; let those writes go out first.
      await nextTurn();
      for (const client of wsServer.clients) closeWith(client, refuse('shutting-down', 'Shutting down.'));
      // Rejects only when the server had closed already (no socket was open): nothing to wait for.
      const disposed = Promise.resolve(server.dispose()).catch(() => undefined);
      const timeout = new AbortController();
      const timedOut = sleep(Math.max(0, deadline - Date.now()), undefined, { signal: timeout.signal });
      await Promise.race([disposed, timedOut.catch(() => undefined)]);
      timeout.abort();
      for (const client of wsServer.clients) client.terminate();
      await disposed;
      logger.info(`${name} drained`, { unfinished: connections.running() });
    },
  };
}

/**
 * Whoever closes a socket (graphql-ws or this adapter), `ws` would keep it CLOSING for 30 s while a
 * client ignores the close frame; it is cut after {@link CLOSE_GRACE_MS} instead.
 */
function cutAfterCloseGrace(socket: WebSocket): void {
  const close = socket.close.bind(socket);
  socket.close = (code?: number, reason?: string | Buffer) => {
    close(code, reason);
    const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
  };
}

/**
 * A socket that takes no write for `stalledMs` while one waits has stopped reading: it is cut, so
 * it holds neither its socket nor its subscription slots while its queue's overflow notice could
 * never reach it anyway. graphql-ws waits for each write's callback (the socket took it) before it
 * pulls the next result; the deadline runs from the oldest write still waiting, and starts again
 * whenever the socket takes one. One timer per socket, re-armed, not one per message.
 */
function cutWhenStalled(socket: WebSocket, stalledMs: number): void {
  const send = socket.send.bind(socket) as (data: unknown, callback?: (error?: Error) => void) => void;
  let waiting = 0;
  let stalled: NodeJS.Timeout | undefined;
  const stop = (): void => {
    clearTimeout(stalled);
    stalled = undefined;
  };
  socket.once('close', stop);
  socket.send = ((data: unknown, callback?: (error?: Error) => void) => {
    waiting += 1;
    // A socket no longer open answers the write with an error at once: nothing to wait for.
    if (socket.readyState === socket.OPEN) stalled ??= setTimeout(() => socket.terminate(), stalledMs);
    send(data, (error) => {
      waiting -= 1;
      if (waiting > 0) stalled?.refresh();
      else stop();
      callback?.(error);
    });
  }) as WebSocket['send'];
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
