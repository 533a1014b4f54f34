/**
 * The graphql-ws adapter of the door: graphql-ws on the facade's own http.Server at `/graphql`,
 * translated to the door and back. The upgrade is checked for its origin; `connection_init` is the
 * door's connect; every `subscribe` message is one admission by the door (`live-connections.ts`),
 * so nothing runs once the caller's token has expired (with the verifier's clock tolerance) or once
 * the socket is no longer open. A socket the server closes and whose client does not complete the
 * close handshake is cut after a short grace. graphql-ws sends a result only once the socket took
 * the previous one, so a reader that stops reading leaves its events in its bounded subscriber
 * queue, whose overflow policy applies; one that takes no write for `LIVE_STALLED_WRITE_TIMEOUT_MS`
 * is cut, as an SSE stream is (`graphql-ws-socket.ts`). graphql-ws serves subscriptions and live
 * queries (`query @live`, run by the same function) only: other queries and mutations go over HTTP.
 */
import type { ExecutionResult, GraphQLError } from 'graphql';
import { DIRECT, isDirectStream } from '../direct-delivery-contract.ts';
import type { ServerOptions } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import type { IncomingMessage } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { gatewayStillHolds } from '../auth/gateway-credential.ts';
import type { WebSocketLimits } from '../events/config.ts';
import { clientLabelOf, type ClientLabel } from '../observability/field-usage.ts';
import { nextMessages } from './graphql-ws-next-frames.ts';
import { closeWith, credentialsOf, cutWhenGone, drainSockets } from './graphql-ws-socket.ts';
import { formattedResult } from './live-results.ts';
import {
  liveTransportRules,
  type AttachedLiveTransport,
  type LiveTransport,
  type LiveTransportParts,
  type LiveWriteLimits,
} from './live.ts';
import type { Connection } from './door/door.ts';
import type { LiveConnection, LiveConnections, LiveOperation } from './live-connections.ts';
import { verifyClientOf } from './origin.ts';
import { closeOf, endsConnection, graphQLErrorsOf, isRefusal, refuse } from './refusal.ts';

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
  parts: LiveTransportParts,
  limits: GraphQLWebSocketLimits,
): AttachedLiveTransport {
  const { door, connections, logger } = parts;
  const wsServer = new WebSocketServer({
    server: parts.httpServer,
    path: GRAPHQL_WS_TRANSPORT.connects.path,
    // Browsers apply no CORS to WebSockets: a foreign page is refused at the upgrade.
    verifyClient: verifyClientOf((origin, host) => door.checkOrigin(origin, host)),
    // A larger message closes the connection with 1009 before it is buffered whole.
    maxPayload: limits.maxPayloadBytes,
  });
  wsServer.on('connection', (socket) => cutWhenGone(socket, limits.stalledWriteTimeoutMs));
  let draining = false;
  const server = useServer(
    serverOptions(parts, limits, () => draining),
    wsServer,
    limits.keepAliveMs,
  );
  return {
    activeConnections: () => wsServer.clients.size,
    async drain(timeoutMs) {
      if (draining) return;
      draining = true;
      // No new connection from here on; the open ones stay open until their subscriptions complete.
      await drainSockets(wsServer, () => server.dispose(), connections, timeoutMs);
      logger.info(`${GRAPHQL_WS_TRANSPORT.name} drained`, { unfinished: connections.running() });
    },
  };
}

/**
 * The live side of an admitted connection, closed with its socket. Made apart from `onConnect` so
 * that what it keeps for the socket's life (the expiry's close and the close listener) holds the
 * socket and the live connection only, not the upgrade request `onConnect` read.
 */
function openLiveConnection(
  connections: LiveConnections,
  connection: Connection,
  socket: WebSocket,
  client: ClientLabel | undefined,
): LiveConnection {
  const live = connections.open(connection, (expired) => closeWith(socket, expired), client);
  // `on`, not `once`: a socket emits `close` once, and `once` would add a wrapper and its state
  // to every socket for its whole life.
  socket.on('close', () => live.close());
  return live;
}

/** Reads one header of the upgrade request (its first value when repeated). */
function headerOf(request: IncomingMessage): (header: string) => string | undefined {
  return (header) => {
    const value = request.headers[header];
    return Array.isArray(value) ? value[0] : value;
  };
}

/**
 * graphql-ws's hooks, each translating one message to the door or the live connection and back: a
 * connection refused is closed as the table says, an operation refused is an `error` message (and
 * the connection closed when the refusal ends it), errors formatted as over HTTP.
 */
function serverOptions(
  parts: LiveTransportParts,
  limits: GraphQLWebSocketLimits,
  draining: () => boolean,
): ServerOptions<Record<string, unknown> | undefined, Extra & Partial<ConnectionExtra>> {
  const { door, connections, logger } = parts;
  const nextOf = nextMessages(parts);
  return {
    schema: parts.schema,
    connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
    subscribe: parts.execute,
    // Only a `query @live` gets here as a query (the door refuses any other): a live query.
    execute: parts.execute,
    onConnect: async (ctx) => {
      const { socket, request } = ctx.extra;
      const connection = draining()
        ? refuse('shutting-down', 'The server is shutting down.')
        : await door.connect({
            credentials: credentialsOf(ctx.connectionParams, request),
            address: parts.addressOf(request),
            kind: 'live',
          });
      if (isRefusal(connection)) {
        logger.info(`refused a ${GRAPHQL_WS_TRANSPORT.name} connection`, {
          closeCode: closeOf(connection).code,
        });
        // Closing first sets the code; graphql-ws's own close after `false` (4403) is then ignored.
        closeWith(socket, connection);
        return false;
      }
      // A socket closed while its credential was checked has no `close` event to come.
      if (socket.readyState !== socket.OPEN) return false;
      ctx.extra.live = openLiveConnection(connections, connection, socket, clientLabelOf(headerOf(request)));
      ctx.extra.operations = new Map();
      // graphql-ws keeps the upgrade request in the connection's `extra` for the socket's whole life
      // (its headers and stream state, about 1.3 KiB a socket); nothing reads it once the
      // connection is admitted, so it is let go here.
      (ctx.extra as { request?: unknown }).request = undefined;
      return true;
    },
    onSubscribe: async (ctx, id, payload) => {
      const { socket, live, operations } = ctx.extra;
      // graphql-ws closes with 4401 a subscribe sent before the acknowledgement.
      if (live === undefined || operations === undefined) {
        return graphQLErrorsOf(refuse('unauthenticated', 'Unauthorized'));
      }
      const max = limits.maxSubscriptionsPerConnection;
      // A gateway's connection carries every operation of its caller through that gateway: the
      // caller's own caps bound it (the door's hold), this one would refuse a caller's 51st
      // subscription only because a gateway restarted and its operations moved to the other one.
      if (!gatewayStillHolds(live.connection.gateway) && Object.keys(ctx.subscriptions).length > max) {
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
      result.errors === undefined ? undefined : formattedResult(result, parts),
    onError: (_ctx, _id, _payload, errors: readonly GraphQLError[]) =>
      errors.map((error) => parts.formatError(error.toJSON(), error)),
    // Told once the operation listens (its queue subscribed, any replay read): from here on no
    // change is missed, which is what a client or a test waits for before making one.
    onOperation: (ctx, id, _payload, _args, result) => {
      ctx.extra.operations?.get(id)?.started();
      logger.debug('subscription started', { subscription: id });
      // Results shared by many subscribers are framed here around one serialisation of each.
      return isDirectStream<ExecutionResult>(result)
        ? result[DIRECT](nextOf(ctx.extra.socket, id))
        : undefined;
    },
    onComplete: (ctx, id) => {
      const operation = ctx.extra.operations?.get(id);
      if (operation === undefined) return;
      ctx.extra.operations?.delete(id);
      operation.completed();
      logger.debug('subscription completed', { subscription: id });
    },
  };
}
