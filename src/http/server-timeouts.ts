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

/** Idle time of a kept-alive connection between requests (Node's default). */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/** `http.createServer` options applying `timeouts`. */
export function serverTimeoutOptions(timeouts: ServerTimeouts): ServerOptions {
  const shortest = Math.min(timeouts.headersTimeoutMs, timeouts.requestTimeoutMs);
  return {
    headersTimeout: timeouts.headersTimeoutMs,
    requestTimeout: Math.max(timeouts.requestTimeoutMs, timeouts.headersTimeoutMs),
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // Node checks the two timeouts on this interval: a quarter of the shortest keeps a late cut
    // within a quarter of it, at a few checks a second at most.
    connectionsCheckingInterval: Math.min(5_000, Math.max(50, Math.floor(shortest / 4))),
  };
}
