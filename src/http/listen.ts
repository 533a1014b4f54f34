/**
 * The facade's server listening, and letting its clients go at a shutdown: the base URL it
 * answers on, and every answer from the start of a shutdown closing its connection.
 */
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
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
 * From the start of a shutdown every answer closes its connection: a client's kept-alive
 * connection (a gateway's, a load balancer's, a browser's) ends cleanly after a response instead
 * of being cut when the server closes it, so the client's next request opens one to a replica that
 * stays. Answers begun before (an SSE stream the drain completes) end their connection too.
 */
export function closeConnectionsWhileShuttingDown(isShuttingDown: () => boolean): RequestHandler {
  return (req, res, next) => {
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    else
      res.once('finish', () => {
        if (isShuttingDown()) req.socket.end();
      });
    next();
  };
}
