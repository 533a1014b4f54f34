/**
 * Serves a built web app (the example, or anything with `index.html` and `assets/`) on its own
 * origin, with `/config.json` telling the page where the facade and the issuer are. The page's
 * Content-Security-Policy lets it talk to those two and nothing else.
 */
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { WebConfig } from './src/config.ts';

export type { WebConfig };

export interface WebServerOptions {
  /** The built app: `index.html` and `assets/`. */
  root: string;
  /** Read at every request of `/config.json`, so a test may start the server before the facade. */
  config: () => WebConfig;
  host?: string;
  port?: number;
}

export interface WebServer {
  /** `http://<host>:<port>` */
  url: string;
  port: number;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
};

/** Starts serving; resolves once listening. Always `close()` it. */
export async function startWebServer(options: WebServerOptions): Promise<WebServer> {
  const root = path.resolve(options.root);
  const server = http.createServer((request, response) => {
    void answer(root, options.config, request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

async function answer(
  root: string,
  config: () => WebConfig,
  request: http.IncomingMessage,
  response: http.ServerResponse,
): Promise<void> {
  const { pathname } = new URL(request.url ?? '/', 'http://web.invalid');
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  if (pathname === '/config.json') {
    send(response, 200, '.json', JSON.stringify(config()));
    return;
  }
  // The page itself for `/` (and the issuer's redirect back to it, `/?code=…`); files under assets/.
  const relative = pathname === '/' ? 'index.html' : pathname.slice(1);
  const file = path.resolve(root, relative);
  if (
    !(relative === 'index.html' || relative.startsWith('assets/')) ||
    !file.startsWith(`${root}${path.sep}`)
  ) {
    send(response, 404, '.txt', 'Not found');
    return;
  }
  let body: Buffer;
  try {
    body = await readFile(file);
  } catch {
    send(response, 404, '.txt', 'Not found');
    return;
  }
  const extension = path.extname(file);
  response.writeHead(200, {
    'content-type': TYPES[extension] ?? 'application/octet-stream',
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
    ...(extension === '.html' ? { 'content-security-policy': pagePolicy(config()) } : {}),
  });
  response.end(request.method === 'HEAD' ? undefined : body);
}

/** The page may load its own files and talk to the facade (HTTP and WebSocket) and the issuer only. */
function pagePolicy(config: WebConfig): string {
  const facade = new URL(config.graphqlUrl);
  const socket = `${facade.protocol === 'https:' ? 'wss' : 'ws'}://${facade.host}`;
  return [
    "default-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self' ${facade.origin} ${socket} ${new URL(config.issuer).origin}`,
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

function send(response: http.ServerResponse, status: number, extension: string, body: string): void {
  response.writeHead(status, {
    'content-type': extension === '.json' ? 'application/json' : 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
  });
  response.end(body);
}
