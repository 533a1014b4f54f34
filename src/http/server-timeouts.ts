/**
 * The HTTP server's timeouts, set for an API rather than Node's defaults (a request may take five
 * minutes to arrive, checked every thirty seconds): a client has `headersTimeoutMs` to send its
 * request's head and `requestTimeoutMs` to send all of it, after which Node answers 408 and closes
 * the connection. A thousand idle half-sent requests from one address therefore hold their
 * sockets for seconds, not minutes. WebSocket connections, once upgraded, are graphql-ws's.
 */
import type { ServerOptions } from 'node:http';

export interface ServerTimeouts {
  /** Time to receive a request's head (`HTTP_HEADERS_TIMEOUT_MS`). */
  headersTimeoutMs: number;
  /** Time to receive a whole request, body included (`HTTP_REQUEST_TIMEOUT_MS`), at least the head's. */
  requestTimeoutMs: number;
}

/**
 * Defaults: 10 s for the head (a GraphQL request's head is a few hundred bytes), 30 s for the whole
 * request (bodies are at most 64 KiB; the webhook route cuts its bodies sooner).
 */
export const DEFAULT_SERVER_TIMEOUTS: ServerTimeouts = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000 };

/** Idle time of a kept-alive connection between requests (Node's default), as `Keep-Alive: timeout=5` tells clients. */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * How much longer than it advertises the server keeps an idle connection (Node's default is 1 s).
 * A client that honours the advertised time stops reusing a connection before it, but a request it
 * sends just inside that time can reach a process whose event loop is busy (a long synchronous
 * stretch, a loaded machine); when the loop comes back, Node runs the expired idle timer before it
 * reads the request that arrived, and the client gets a reset for a request the server never saw.
 * The slack keeps such requests answered unless the loop stalls for more than ten seconds.
 */
const KEEP_ALIVE_TIMEOUT_BUFFER_MS = 10_000;

/** `http.createServer` options applying `timeouts`. */
export function serverTimeoutOptions(timeouts: ServerTimeouts): ServerOptions {
  const shortest = Math.min(timeouts.headersTimeoutMs, timeouts.requestTimeoutMs);
  return {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: Math.max(timeouts.requestTimeoutMs, timeouts.headersTimeoutMs),
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    keepAliveTimeoutBuffer: KEEP_ALIVE_TIMEOUT_BUFFER_MS,
    // Node checks the two timeouts on this interval: a quarter of the shortest keeps a late cut
    // within a quarter of it, at a few checks a second at most.
    connectionsCheckingInterval: Math.min(5_000, Math.max(50, Math.floor(shortest / 4))),
  };
}
