/**
 * A reverse proxy that normalises paths, as nginx (`proxy_pass` with a URI part), Envoy (path
 * normalisation with slash unescaping) and many API gateways do: the path is percent-decoded once,
 * `%2F` included, repeated slashes are merged and dot segments resolved (RFC 3986, 5.2.4), and the
 * result is forwarded to the target, each segment re-encoded. A path that changes shape on the way
 * through this proxy reaches the target as another resource; tests put it between the facade and
 * the emulator to show that no id can make that happen.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the proxy received, the path as sent and as forwarded. */
export interface ProxiedRequest {
  method: string;
  /** The path as the facade sent it (no query). */
  received: string;
  /** The path the target was asked for; undefined when the proxy refused the request itself. */
  forwarded: string | undefined;
}

export interface NormalisingProxy {
  /** Base URL, no path: give it to the facade as `UPSTREAM_BASE_URL`. */
  url: string;
  /** Every request received since the last reset, in order. */
  requests(): readonly ProxiedRequest[];
  reset(): void;
  close(): Promise<void>;
}

/** The path a normalising proxy forwards for `path`, or undefined when it cannot decode it. */
export function normalisePath(path: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return undefined;
  }
  const output: string[] = [];
  for (const segment of decoded.split('/').slice(1)) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') output.pop();
    else output.push(segment);
  }
  return `/${output.map((segment) => encodeURIComponent(segment)).join('/')}`;
}

/** Starts the proxy on a free loopback port in front of `targetUrl`. Always `close()` it. */
export async function startNormalisingProxy(targetUrl: string): Promise<NormalisingProxy> {
  const target = new URL(targetUrl);
  const seen: ProxiedRequest[] = [];

  const forward = (incoming: IncomingMessage, outgoing: ServerResponse): void => {
    const raw = incoming.url ?? '/';
    const queryAt = raw.indexOf('?');
    const received = queryAt < 0 ? raw : raw.slice(0, queryAt);
    const query = queryAt < 0 ? '' : raw.slice(queryAt);
    const forwarded = normalisePath(received);
    seen.push({ method: incoming.method ?? 'GET', received, forwarded });
    if (forwarded === undefined) {
      outgoing.writeHead(400, { 'content-type': 'text/plain' }).end('Bad path');
      incoming.resume();
      return;
    }
    const upstream = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: incoming.method,
        path: `${forwarded}${query}`,
        headers: { ...incoming.headers, host: target.host },
      },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    upstream.on('error', () => {
      if (!outgoing.headersSent) outgoing.writeHead(502, { 'content-type': 'text/plain' });
      outgoing.end('Bad gateway');
    });
    incoming.pipe(upstream);
  };

  const server = createServer(forward);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => [...seen],
    reset: () => {
      seen.length = 0;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
