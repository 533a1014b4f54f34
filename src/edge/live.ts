/**
 * The live wing of the door: the one set of live transports (graphql-ws, Apollo's multipart
 * protocol, GraphQL over SSE ...).
 * A live transport is a kind, `{ rules, attach }`: its rules say what it serves and how it is named
 * (in refusals, logs and metrics) and how a client reaches it; `attach` mounts it with the same
 * parts as every other (the door, the schema, its own {@link LiveConnections}, the client's
 * address, the error formatting, a logger, the limits, the http.Server and the routes under
 * `/graphql`). The wing counts every transport's connections and subscriptions (labelled by
 * transport) and drains them all at shutdown, so the next transport is one more entry in the list
 * (`live-transports.ts`), not one more copy in createApp.
 */
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import express, { type Router } from 'express';
import {
  OperationTypeNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
} from 'graphql';
import type { WebSocketLimits } from '../events/config.ts';
import type { LiveSessions } from '../events/delivery/live-sessions.ts';
import type { Logger } from '../logger.ts';
import type { CallbackUrlPrefix } from './callback-urls.ts';
import type { TransportRules } from './door/door.ts';
import type { Door, TransportDoor } from './door/audiences.ts';
import {
  createLiveConnections,
  type LiveConnections,
  type LiveConnectionsOptions,
} from './live-connections.ts';

/**
 * How a client reaches a live transport, as the transport says it: every text that names the live
 * transports (HTTP's refusal of a subscription, the `Subscription` type's description, the docs)
 * is built from it or checked against it, and a test builds each transport's client from it.
 */
export interface HowToConnect {
  /** The protocol as prose names it: `the graphql-ws protocol (WebSocket)`. */
  readonly protocol: string;
  /** What a client does to open it: `connect a graphql-ws client (WebSocket)`, `POST the subscription`. */
  readonly does: string;
  /** Where, on the facade's own port. */
  readonly path: string;
  /** The `Accept` a request must carry to be taken, for a transport over HTTP requests. */
  readonly accept?: string;
  /** A word on who speaks it: `Apollo Client's HttpLink does`. */
  readonly note?: string;
  /**
   * The wire: a WebSocket, one streamed HTTP response per subscription, or requests the facade
   * sends to a callback URL the subscription names.
   */
  readonly wire: 'websocket' | 'http-stream' | 'http-callback';
}

/** The rules of a live transport, and how a client reaches it. */
export interface LiveTransportRules extends TransportRules {
  readonly connects: HowToConnect;
}

/**
 * The rules of a live transport: it serves subscriptions (and so queries marked `@live`, which
 * the door admits as one); `elsewhere` tells a client that sent anything else where it goes.
 */
export function liveTransportRules(
  name: string,
  elsewhere: string,
  connects: HowToConnect,
): LiveTransportRules {
  return { name, serves: new Set([OperationTypeNode.SUBSCRIPTION]), elsewhere, connects };
}

/**
 * Where a client reaches any of `transports`, as one sentence's alternatives: "connect … to
 * /graphql, POST the subscription to /graphql with Accept: … (…), or to /graphql/stream with …"
 * (a way that begins as the one before it does not say its verb again).
 */
export function howToReachAny(transports: readonly HowToConnect[]): string {
  const ways = transports.map((how, index) => {
    const verb = index > 0 && transports[index - 1]?.does === how.does ? '' : `${how.does} `;
    const accept = how.accept === undefined ? '' : ` with Accept: ${how.accept}`;
    return `${verb}to ${how.path}${accept}${how.note === undefined ? '' : ` (${how.note})`}`;
  });
  const last = ways.pop();
  return ways.length === 0 ? (last ?? '') : `${ways.join(', ')}, or ${last ?? ''}`;
}

/**
 * Runs an admitted live operation: a subscription's or a live query's stream of results, or one
 * result when it could not start. The event pipeline provides it (composed in `app.ts`), so the
 * transports read nothing of how events become results.
 */
export type LiveExecute = (
  args: ExecutionArgs,
) => Promise<AsyncGenerator<ExecutionResult> | AsyncIterableIterator<ExecutionResult> | ExecutionResult>;

/** What every live transport's wire is held to: its own limits and the stalled-write deadline. */
export interface LiveTransportLimits extends LiveWriteLimits {
  /** graphql-ws's limits (`GRAPHQL_WS_*`). */
  readonly webSocket: WebSocketLimits;
  /** Where callback subscriptions may be sent (`SUBSCRIPTION_CALLBACK_ALLOWED_URLS`; none: nowhere). */
  readonly callbackUrls: readonly CallbackUrlPrefix[];
}

/** What every live transport is given when it is attached: the same parts for each. */
export interface LiveTransportParts {
  /** The door's part a transport's adapter uses: origins and connections. */
  door: TransportDoor;
  schema: GraphQLSchema;
  /** What every live transport executes (a subscription, or a `query @live`). */
  execute: LiveExecute;
  /**
   * Where a result from {@link LiveTransportParts.execute} sits in the event log: the cursor to
   * resume after, or undefined (an error, a notice, a live query's answer).
   */
  cursorOf: (result: object) => string | undefined;
  /** The live side of the connections this transport admits, built for its rules. */
  connections: LiveConnections;
  /** The facade's server (for transports that upgrade a request). */
  httpServer: HttpServer;
  /** Mounted before HTTP's `/graphql`, after CORS and the JSON body parser (for transports over requests). */
  routes: Router;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(request: IncomingMessage): string;
  /** The facade's error formatting (the same as HTTP's): upstream problems kept, the unexpected masked. */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  /** A logger naming the transport. */
  logger: Logger;
  /** The limits of every live transport's wire (each reads its own). */
  limits: LiveTransportLimits;
}

/** What every live transport's writes are held to, whatever its wire. */
export interface LiveWriteLimits {
  /**
   * Longest one write may wait for the reader to take it (`LIVE_STALLED_WRITE_TIMEOUT_MS`); then
   * the stream or socket is cut: a reader that stopped reading holds neither it nor its
   * subscription slots, while its queue's overflow notice could never reach it anyway.
   */
  stalledWriteTimeoutMs: number;
}

/** A transport once attached. */
export interface AttachedLiveTransport {
  /** Connections (sockets, streams) open now. */
  activeConnections(): number;
  /**
   * Stops taking connections, ends what is still open once its subscriptions completed (the events
   * runtime ends every queue first), within `timeoutMs`.
   */
  drain(timeoutMs: number): Promise<void>;
}

/** One kind of live transport. */
export interface LiveTransport {
  readonly rules: LiveTransportRules;
  attach(parts: LiveTransportParts): AttachedLiveTransport;
}

/** What the gauges read for one transport at each scrape. */
export interface LiveTransportStats {
  readonly transport: string;
  readonly connections: number;
  readonly subscriptions: number;
}

/** Parts the wing shares between its transports. */
export interface LiveWingOptions
  extends
    Pick<LiveConnectionsOptions, 'record' | 'createContext'>,
    Omit<LiveTransportParts, 'door' | 'connections' | 'routes'> {
  /** The door: each transport's adapter gets its part, and the live connections theirs. */
  door: Door;
  live: LiveSessions;
  /** The live transports, in the order they are mounted. */
  transports: readonly LiveTransport[];
}

/** The live transports of one app. */
export interface LiveWing {
  /** Every request-based transport's routes: mount after CORS and JSON on `/graphql`, before HTTP's. */
  readonly routes: Router;
  /** Each transport's open connections and running subscriptions. */
  stats(): LiveTransportStats[];
  /** Drains every transport at once; resolves when all are done, or after `timeoutMs`. */
  drain(timeoutMs?: number): Promise<void>;
}

/** How long a shutdown waits for live subscriptions to complete before their connections are cut. */
const DRAIN_TIMEOUT_MS = 5_000;

export function createLiveWing(options: LiveWingOptions): LiveWing {
  const routes = express.Router();
  const attached = options.transports.map((transport) => {
    const connections = createLiveConnections(transport.rules, options);
    const endpoint = transport.attach({
      door: options.door,
      schema: options.schema,
      execute: options.execute,
      cursorOf: options.cursorOf,
      connections,
      httpServer: options.httpServer,
      routes,
      addressOf: options.addressOf,
      formatError: options.formatError,
      logger: options.logger.child({ component: transport.rules.name }),
      limits: options.limits,
    });
    return { transport, connections, endpoint };
  });
  return {
    routes,
    stats: () =>
      attached.map(({ transport, connections, endpoint }) => ({
        transport: transport.rules.name,
        connections: endpoint.activeConnections(),
        subscriptions: connections.running(),
      })),
    async drain(timeoutMs = DRAIN_TIMEOUT_MS) {
      await Promise.all(attached.map(({ endpoint }) => endpoint.drain(timeoutMs)));
    },
  };
}
