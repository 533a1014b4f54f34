/**
 * The smaller doors, tried as an attacker would: a DNS-rebinding page (a Host the facade is not
 * reached by) over HTTP, the WebSocket upgrade and the metrics port; the Sandbox page framed by
 * another site; a flood of readiness probes; idle half-sent requests; request ids chosen to mislead.
 */
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import express from 'express';
import { describe, expect, test } from 'vitest';
import { handleReadiness } from '../../src/http/health.ts';
import { createLogger } from '../../src/logger.ts';
import { createUpstreamClient } from '../../src/upstream/client.ts';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { startStack, useStack } from '../support/harness/stack.ts';

const stack = useStack({
  env: { READINESS_CACHE_MS: '600000', ALLOWED_HOSTS: 'facade.internal,.example.test' },
});

/** A GET written with any Host, through node:http (fetch sets Host itself). */
async function getWithHost(
  url: string,
  host: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const request = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'GET', headers: { host } },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
        );
      },
    );
    request.on('error', reject);
    request.end();
  });
}

/** A graphql-ws upgrade request written by hand with `host`; resolves with the answer's status line. */
async function upgradeWithHost(wsUrl: string, host: string): Promise<string> {
  const target = new URL(wsUrl);
  const socket = net.connect({ host: target.hostname, port: Number(target.port) });
  await once(socket, 'connect');
  socket.write(
    `GET ${target.pathname} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n',
  );
  const [chunk] = (await once(socket, 'data')) as [Buffer];
  socket.destroy();
  return chunk.toString('latin1').split('\r\n')[0]!;
}

describe('the Host allow-list', () => {
  test.each([
    'attacker.example',
    'attacker.example:4000',
    'facade.internal.attacker.example',
    'localhost.attacker.example',
  ])('HTTP with Host %j is refused 421 before anything else runs', async (host) => {
    const answer = await getWithHost(`${stack.facadeUrl}/healthz`, host);
    expect(answer.status).toBe(421);
    expect(JSON.parse(answer.body)).toMatchObject({ errors: [{ extensions: { code: 'HOST_NOT_ALLOWED' } }] });
    // Refused before a request id was even given: nothing else ran.
    expect(answer.headers['x-request-id']).toBeUndefined();
  });

  test.each([
    '127.0.0.1',
    '127.0.0.1:1234',
    'localhost',
    'LOCALHOST:80',
    'facade.internal',
    'api.example.test',
    'example.test',
    '[::1]:4000',
  ])('HTTP with Host %j is served', async (host) => {
    expect((await getWithHost(`${stack.facadeUrl}/healthz`, host)).status).toBe(200);
  });

  test('the WebSocket upgrade with a foreign Host is refused 421; with an allowed one it switches protocols', async () => {
    expect(await upgradeWithHost(stack.facade.wsUrl, 'attacker.example')).toBe(
      'HTTP/1.1 421 Misdirected Request',
    );
    expect(await upgradeWithHost(stack.facade.wsUrl, `127.0.0.1:${new URL(stack.facade.wsUrl).port}`)).toBe(
      'HTTP/1.1 101 Switching Protocols',
    );
  });

  test('the host of WEBHOOK_PUBLIC_URL is allowed: the upstream posts its webhooks there', async () => {
    const behindName = await startStack({
      env: { WEBHOOK_PUBLIC_URL: 'https://hooks.facade.test/webhooks/platform' },
    });
    try {
      expect((await getWithHost(`${behindName.facadeUrl}/healthz`, 'hooks.facade.test')).status).toBe(200);
      expect((await getWithHost(`${behindName.facadeUrl}/healthz`, 'other.facade.test')).status).toBe(421);
    } finally {
      await behindName.close();
    }
  });

  test('the metrics port refuses a foreign Host too', async () => {
    expect((await getWithHost(stack.metricsUrl, 'attacker.example')).status).toBe(421);
    expect((await getWithHost(stack.metricsUrl, 'localhost')).status).toBe(200);
  });

  test('the main port serves no /metrics', async () => {
    expect((await fetch(`${stack.facadeUrl}/metrics`)).status).toBe(404);
  });
});

describe('the Sandbox page', () => {
  test('may not be framed by another site', async () => {
    const response = await fetch(stack.graphqlUrl, { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(response.headers.get('content-security-policy')).toBe("frame-ancestors 'none'");
    expect(response.headers.get('x-frame-options')).toBe('DENY');
  });
});

describe('/readyz', () => {
  test('300 anonymous probes at once and 50 after cost the upstream one call', async () => {
    const answers = await Promise.all(Array.from({ length: 300 }, () => fetch(`${stack.facadeUrl}/readyz`)));
    for (let index = 0; index < 50; index += 1) answers.push(await fetch(`${stack.facadeUrl}/readyz`));
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });

  test('an answer is reused until cacheMs after it settled, then the upstream is asked again', async () => {
    let clock = 0;
    const client = createUpstreamClient({
      baseUrl: stack.emulator.url,
      apiKey: SANDBOX_KEY,
      connectTimeoutMs: 1_000,
      headersTimeoutMs: 5_000,
      bodyTimeoutMs: 5_000,
      connections: 1,
      maxCallsPerOperation: 10,
      retry: { maxAttempts: 1, budget: 0, baseDelayMs: 1, maxDelayMs: 1 },
      problemDocsUrl: 'https://docs.platform.test/v3',
      logger: createLogger({ level: 'silent' }),
    });
    const app = express();
    app.get(
      '/readyz',
      handleReadiness({
        client,
        apiKey: SANDBOX_KEY,
        logger: createLogger({ level: 'error', write: () => undefined }),
        cacheMs: 1_000,
        now: () => clock,
      }),
    );
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/readyz`;
    try {
      const calls = async () => (await stack.upstreamCalls()).byRoute['GET /v3/capabilities'] ?? 0;
      await fetch(url);
      clock = 999;
      await fetch(url);
      expect(await calls()).toBe(1);
      clock = 1_000;
      await fetch(url);
      await fetch(url);
      expect(await calls()).toBe(2);
    } finally {
      server.close();
      await client.close();
    }
  });
});

describe('idle half-sent requests', () => {
  test('are answered 408 and closed at the header and request timeouts, every one of them', async () => {
    const timed = await startStack({
      env: { HTTP_HEADERS_TIMEOUT_MS: '300', HTTP_REQUEST_TIMEOUT_MS: '600' },
    });
    try {
      const target = new URL(timed.graphqlUrl);
      const open = (written: string) => {
        const socket = net.connect({ host: target.hostname, port: Number(target.port) });
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
        // On a busy machine the facade may answer 408 and close before this side, in the same
        // process, gets to write: that write then meets a closed socket and the reset follows the
        // answer already received. What counts is the answer, so an error does not end the wait
        // (as `once(socket, 'close')` would); the close does.
        socket.on('error', () => undefined);
        socket.on('connect', () => socket.write(written));
        return { closed: new Promise<string>((resolve) => socket.on('close', () => resolve(answer))) };
      };
      // 200 that never finish their head, 200 that finish it but send half their body.
      const halfHeads = Array.from({ length: 200 }, () =>
        open(`POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: app`),
      );
      const halfBodies = Array.from({ length: 200 }, () =>
        open(
          `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"query":`,
        ),
      );
      const answers = await Promise.all([...halfHeads, ...halfBodies].map((socket) => socket.closed));
      expect(answers).toHaveLength(400);
      expect(answers.filter((answer) => answer.startsWith('HTTP/1.1 408'))).toHaveLength(400);
    } finally {
      await timed.close();
    }
  });
});

describe('request ids', () => {
  test.each([
    ['too long', 'x'.repeat(65)],
    ['a log line', 'abc\\n{"level":"error"}'],
    ['quotes', '"><script>'],
    ['a path', '../../admin'],
  ])(
    'a caller id that is %s is dropped: the facade generates one and sends that upstream',
    async (_name, value) => {
      const result = await stack.query('{ customer(id: "cus_acme") { id } }', {}, { 'x-request-id': value });
      expect(result.status).toBe(200);
      expect(result.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
    },
  );
});
