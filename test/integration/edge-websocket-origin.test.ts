import { once } from 'node:events';
import http, { type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSchema } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { afterEach, describe, expect, test } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import {
  checkOrigin,
  isAllowedWebSocketOrigin,
  ORIGIN_NOT_ALLOWED,
  refuseUpgrade,
  verifyClientOf,
} from '../../src/edge/origin.ts';

const ALLOWED = ['https://app.example.com', 'http://localhost:3000'];

function upgradeRequest(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

describe('isAllowedWebSocketOrigin', () => {
  test.each([
    ['no Origin (a server or command-line client)', { host: 'facade.example.com' }],
    ['no Origin and no Host', {}],
    ['an allowed origin', { host: 'facade.example.com', origin: 'https://app.example.com' }],
    ['an allowed origin on a port', { host: 'facade.example.com', origin: 'http://localhost:3000' }],
    ['an allowed origin written wss', { host: 'facade.example.com', origin: 'wss://app.example.com' }],
    ['an allowed origin with its default port', { host: 'f.test', origin: 'https://app.example.com:443' }],
    ['the same host over https', { host: 'facade.example.com', origin: 'https://facade.example.com' }],
    ['the same host over http with a port', { host: 'localhost:4000', origin: 'http://localhost:4000' }],
    ['the same host, ws scheme', { host: 'localhost:4000', origin: 'ws://localhost:4000' }],
    [
      'the same host, Host with the default port',
      { host: 'facade.example.com:443', origin: 'https://facade.example.com' },
    ],
    ['the same host in another case', { host: 'Facade.Example.com', origin: 'https://facade.example.com' }],
    ['the same IPv6 host', { host: '[::1]:4000', origin: 'http://[::1]:4000' }],
  ])('allows %s', (_what, headers) => {
    expect(isAllowedWebSocketOrigin(upgradeRequest(headers), ALLOWED)).toBe(true);
  });

  test.each([
    ['another site', { host: 'facade.example.com', origin: 'https://evil.example.net' }],
    ['the null origin', { host: 'facade.example.com', origin: 'null' }],
    ['an empty origin', { host: 'facade.example.com', origin: '' }],
    ['a look-alike suffix', { host: 'facade.example.com', origin: 'https://app.example.com.evil.net' }],
    [
      'an allowed host on another port',
      { host: 'facade.example.com', origin: 'https://app.example.com:8443' },
    ],
    ['an allowed host over http', { host: 'facade.example.com', origin: 'http://app.example.com' }],
    ['the same host on another port', { host: 'localhost:4000', origin: 'http://localhost:4001' }],
    [
      'the same host name, Host on a port, origin on the default',
      { host: 'localhost:4000', origin: 'http://localhost' },
    ],
    ['an origin with a path', { host: 'facade.example.com', origin: 'https://facade.example.com/x' }],
    ['an origin with credentials', { host: 'facade.example.com', origin: 'https://u@facade.example.com' }],
    ['a file: page', { host: 'facade.example.com', origin: 'file://' }],
    ['a browser extension', { host: 'facade.example.com', origin: 'chrome-extension://abcdef' }],
    ['no Host to compare with', { origin: 'https://facade.example.com' }],
    ['a Host with a path', { host: 'facade.example.com/x', origin: 'https://facade.example.com' }],
  ])('refuses %s', (_what, headers) => {
    expect(isAllowedWebSocketOrigin(upgradeRequest(headers), ALLOWED)).toBe(false);
  });

  test('an empty allow-list still lets the facade’s own pages connect', () => {
    expect(isAllowedWebSocketOrigin(upgradeRequest({ host: 'a.test', origin: 'https://a.test' }), [])).toBe(
      true,
    );
    expect(isAllowedWebSocketOrigin(upgradeRequest({ host: 'a.test', origin: 'https://b.test' }), [])).toBe(
      false,
    );
  });
});

const schema = buildSchema('type Query { ok: Boolean }');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A real http.Server with graphql-ws on `/graphql`, counting the connections graphql-ws saw. */
async function startServer(wsServerFor: (server: http.Server) => WebSocketServer) {
  const server = http.createServer((_req, res) => res.end());
  const wsServer = wsServerFor(server);
  const seen = { connections: 0, connectionInits: 0 };
  wsServer.on('connection', () => {
    seen.connections += 1;
  });
  const disposable = useServer(
    {
      schema,
      onConnect: () => {
        seen.connectionInits += 1;
        return true;
      },
    },
    wsServer,
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    await disposable.dispose();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`, seen };
}

/** Opens a WebSocket with `origin`; resolves with the refusal's status, headers and body, or 'open'. */
function connect(url: string, origin?: string) {
  return new Promise<
    | { kind: 'refused'; status: number; headers: http.IncomingHttpHeaders; body: unknown }
    | { kind: 'acknowledged' }
  >((resolve, reject) => {
    const socket = new WebSocket(url, 'graphql-transport-ws', origin === undefined ? {} : { origin });
    socket.on('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      response.on('end', () =>
        resolve({
          kind: 'refused',
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: JSON.parse(body),
        }),
      );
    });
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init' })));
    socket.on('message', (data: Buffer) => {
      if ((JSON.parse(data.toString('utf8')) as { type: string }).type === 'connection_ack') {
        socket.close();
        resolve({ kind: 'acknowledged' });
      }
    });
    socket.on('error', (error) => {
      // 'unexpected-response' already answered; anything else is a failure of the test.
      if (!/Unexpected server response/.test(error.message)) reject(error);
    });
  });
}

describe('refusing a WebSocket upgrade before graphql-ws', () => {
  test('verifyClient: a foreign origin is answered 403 and graphql-ws never sees the connection', async () => {
    const { url, seen } = await startServer(
      (server) =>
        new WebSocketServer({
          server,
          path: '/graphql',
          verifyClient: verifyClientOf((origin, host) => checkOrigin(origin, host, ALLOWED)),
        }),
    );

    const refused = await connect(url, 'https://evil.example.net');

    expect(refused).toEqual({
      kind: 'refused',
      status: 403,
      headers: expect.objectContaining({ 'content-type': 'application/json; charset=utf-8' }),
      body: { errors: [{ message: ORIGIN_NOT_ALLOWED.message, extensions: { code: 'FORBIDDEN' } }] },
    });
    expect(seen).toEqual({ connections: 0, connectionInits: 0 });

    expect(await connect(url, 'https://app.example.com')).toEqual({ kind: 'acknowledged' });
    expect(await connect(url)).toEqual({ kind: 'acknowledged' });
    expect(seen).toEqual({ connections: 2, connectionInits: 2 });
  });

  test('an upgrade handler with refuseUpgrade: the same 403, graphql-ws untouched', async () => {
    const { url, seen } = await startServer((server) => {
      const wsServer = new WebSocketServer({ noServer: true });
      server.on('upgrade', (request: IncomingMessage, socket, head) => {
        if (!isAllowedWebSocketOrigin(request, ALLOWED)) {
          refuseUpgrade(socket, ORIGIN_NOT_ALLOWED);
          return;
        }
        wsServer.handleUpgrade(request, socket, head, (client) =>
          wsServer.emit('connection', client, request),
        );
      });
      return wsServer;
    });

    const refused = await connect(url, 'null');

    expect(refused).toEqual({
      kind: 'refused',
      status: 403,
      headers: expect.objectContaining({
        'content-type': 'application/json; charset=utf-8',
        connection: 'close',
      }),
      body: { errors: [{ message: ORIGIN_NOT_ALLOWED.message, extensions: { code: 'FORBIDDEN' } }] },
    });
    expect(seen).toEqual({ connections: 0, connectionInits: 0 });
    expect(await connect(url, 'http://localhost:3000')).toEqual({ kind: 'acknowledged' });
  });
});
