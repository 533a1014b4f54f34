/**
 * The facade's server listening, and letting its clients go at a shutdown: the base URL it
 * answers on, every answer from the start of a shutdown closing its connection, and the kept-alive
 * connections left idle released without racing their clients' next request.
 */
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RequestHandler } from 'express';

/** Listens on `port` and `host`; resolves with the base URL (no path) and the bound port. */
export function listenOn(
  httpServer: http.Server,
  port: number,
  host: string,
): Promise<{ url: string; port: number }> {
  return new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(port, host, () => {
      httpServer.off('error', reject);
      const bound = (httpServer.address() as AddressInfo).port;
      resolve({ url: `http://${formatHost(host)}:${bound}`, port: bound });
    });
  });
}

function formatHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * From the start of a shutdown every answer closes its connection: `Connection: close` on each
 * answer whose head is written from then on (an SSE stream begun before ends its connection after
 * its last event too), so a client (a gateway, a load balancer, a browser) opens its next request's
 * connection to a replica that stays. The head is marked when it is written, not when the request
 * arrived: an answer begun before the shutdown and finished after it says so too, where ending its
 * socket right after it would race the client's next request on it.
 */
export function closeConnectionsWhileShuttingDown(isShuttingDown: () => boolean): RequestHandler {
  return (_req, res, next) => {
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    // Every head goes through writeHead (Node's implicit header of `end()` and `write()` too).
    res.writeHead = ((...args: unknown[]) => {
      if (isShuttingDown() && !res.headersSent) res.setHeader('Connection', 'close');
      return writeHead(...args);
    }) as typeof res.writeHead;
    next();
  };
}

/** The server's HTTP connections (upgraded ones are graphql-ws's), for a shutdown to release. */
export interface HttpConnections {
  /**
   * Releases the connections at a shutdown, without closing one under a request its client may be
   * sending: resolves once none is left, or at `timeoutMs`. A connection with a request in flight
   * is closed by its answer (`Connection: close`); one left idle, kept alive for its client's next
   * request, is closed by the client, or here once it has been idle `idleMs` (past the
   * `Keep-Alive: timeout` the server advertised, after which a client no longer reuses it).
   */
  release(idleMs: number, timeoutMs: number): Promise<void>;
}

/** How often a release looks at the connections left. */
const RELEASE_CHECK_MS = 100;

/**
 * Watches `httpServer`'s HTTP connections: each one's requests in flight, and since when it has
 * been idle. Closing an idle kept-alive connection races the client: a request it sends at that
 * instant meets the close (a gateway's "socket hang up", its caller an INTERNAL_SERVER_ERROR), and
 * a POST is never retried by an HTTP client. Left to the client, or closed only past the advertised
 * keep-alive time, there is no such instant.
 */
export function watchHttpConnections(httpServer: http.Server): HttpConnections {
  const connections = new Map<Socket, { inFlight: number; idleSince: number }>();
  httpServer.on('connection', (socket: Socket) => {
    connections.set(socket, { inFlight: 0, idleSince: performance.now() });
    socket.once('close', () => connections.delete(socket));
  });
  httpServer.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const state = connections.get(req.socket);
    if (state === undefined) return;
    state.inFlight += 1;
    res.once('close', () => {
      state.inFlight -= 1;
      if (state.inFlight === 0) state.idleSince = performance.now();
    });
  });
  // An upgraded socket belongs to graphql-ws, which drains it.
  httpServer.on('upgrade', (req: IncomingMessage) => connections.delete(req.socket));
  return {
    async release(idleMs, timeoutMs) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const now = performance.now();
        for (const [socket, state] of connections) {
          if (state.inFlight === 0 && now - state.idleSince >= idleMs) {
            connections.delete(socket);
            socket.end();
          }
        }
        if (connections.size === 0 || now >= deadline) return;
        await sleep(RELEASE_CHECK_MS);
      }
    },
  };
}
