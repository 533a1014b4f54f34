import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { cors, CORS_MAX_AGE_SECONDS } from '../../src/http/cors.ts';

const ALLOWED = 'https://app.example.com';
let server: http.Server;
let url: string;
let handled = 0;

beforeAll(async () => {
  const app = express();
  app.use(
    cors({
      origins: [ALLOWED, 'http://localhost:3000'],
      extraAllowedHeaders: ['x-tenant-id', 'traceparent'],
    }),
  );
  app.all('/graphql', (_req, res) => {
    handled += 1;
    res.setHeader('x-request-id', 'req-1');
    res.json({ data: { ok: true } });
  });
  server = http.createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  handled = 0;
});

function preflight(origin: string, requestHeaders = 'authorization, content-type') {
  return request(url, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': requestHeaders,
    },
  });
}

function post(headers: Record<string, string>) {
  return request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: '{"query":"{ ok }"}',
  });
}

const CORS_HEADERS = [
  'access-control-allow-origin',
  'access-control-allow-methods',
  'access-control-allow-headers',
  'access-control-max-age',
  'access-control-expose-headers',
  'access-control-allow-credentials',
];

describe('CORS preflight', () => {
  test("allows the headers the ecosystem's clients send, and no header nobody reads", async () => {
    const response = await preflight(ALLOWED);
    await response.body.text();
    const allowed = String(response.headers['access-control-allow-headers']).split(', ');
    // Apollo Client (CSRF prevention, client awareness), browser OpenTelemetry (trace context, baggage).
    for (const header of [
      'authorization',
      'content-type',
      'apollo-require-preflight',
      'x-apollo-operation-name',
      'apollographql-client-name',
      'apollographql-client-version',
      'traceparent',
      'tracestate',
      'baggage',
    ])
      expect(allowed).toContain(header);
    expect(allowed).not.toContain('idempotency-key');
    // Listed once although configured again.
    expect(allowed.filter((header) => header === 'traceparent')).toHaveLength(1);
  });

  test('an allowed origin gets 204 with its origin, methods, headers and max age, without reaching the handler', async () => {
    const response = await preflight(ALLOWED);
    await response.body.text();

    expect(response.statusCode).toBe(204);
    expect(response.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(response.headers['access-control-allow-methods']).toBe('GET, POST, OPTIONS');
    expect(response.headers['access-control-allow-headers']).toBe(
      'authorization, content-type, accept, apollo-require-preflight, x-apollo-operation-name, ' +
        'apollographql-client-name, apollographql-client-version, x-request-id, traceparent, tracestate, ' +
        'baggage, cache-control, x-graphql-cost, x-tenant-id',
    );
    expect(response.headers['access-control-max-age']).toBe(String(CORS_MAX_AGE_SECONDS));
    expect(response.headers['vary']).toBe('Origin');
    expect(response.headers['content-length']).toBe('0');
    expect(response.headers['access-control-allow-credentials']).toBeUndefined();
    expect(handled).toBe(0);
  });

  test.each([
    ['another origin', 'https://evil.example.com'],
    ['a look-alike with a path-less suffix', 'https://app.example.com.evil.test'],
    ['another scheme', 'http://app.example.com'],
    ['another port', 'https://app.example.com:8443'],
    ['a different case', 'https://APP.example.com'],
    ['the null origin', 'null'],
  ])('%s is refused 403 with no CORS header', async (_what, origin) => {
    const response = await preflight(origin);

    expect(response.statusCode).toBe(403);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(await response.body.json()).toEqual({
      errors: [{ message: 'This origin may not call the API.', extensions: { code: 'FORBIDDEN' } }],
    });
    for (const header of CORS_HEADERS) expect(response.headers[header]).toBeUndefined();
    expect(response.headers['vary']).toBe('Origin');
    expect(handled).toBe(0);
  });
});

describe('CORS on actual requests', () => {
  test('an allowed origin gets its origin and the readable headers, never credentials', async () => {
    const response = await post({ origin: 'http://localhost:3000' });
    expect(await response.body.json()).toEqual({ data: { ok: true } });

    expect(response.statusCode).toBe(200);
    expect(response.headers['access-control-allow-origin']).toBe('http://localhost:3000');
    expect(response.headers['access-control-expose-headers']).toBe(
      'retry-after, x-request-id, ratelimit, ratelimit-policy',
    );
    expect(response.headers['vary']).toBe('Origin');
    expect(response.headers['access-control-allow-credentials']).toBeUndefined();
    expect(handled).toBe(1);
  });

  test('another origin reaches the handler but gets no CORS header, so a browser withholds the answer', async () => {
    const response = await post({ origin: 'https://evil.example.com' });
    await response.body.text();

    expect(response.statusCode).toBe(200);
    for (const header of CORS_HEADERS) expect(response.headers[header]).toBeUndefined();
    expect(response.headers['vary']).toBe('Origin');
    expect(handled).toBe(1);
  });

  test('a request without Origin is untouched, OPTIONS included', async () => {
    const plain = await post({});
    await plain.body.text();
    expect(plain.statusCode).toBe(200);
    for (const header of [...CORS_HEADERS, 'vary']) expect(plain.headers[header]).toBeUndefined();

    const options = await request(url, {
      method: 'OPTIONS',
      headers: { 'access-control-request-method': 'POST' },
    });
    await options.body.text();
    expect(options.statusCode).toBe(200);
    expect(options.headers['access-control-allow-origin']).toBeUndefined();
    expect(handled).toBe(2);
  });

  test('OPTIONS from an allowed origin is answered here, without reaching the handler', async () => {
    const response = await request(url, { method: 'OPTIONS', headers: { origin: ALLOWED } });
    await response.body.text();
    expect(response.statusCode).toBe(204);
    expect(response.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(handled).toBe(0);
  });

  test('OPTIONS without Access-Control-Request-Method from another origin is not a refused preflight', async () => {
    const response = await request(url, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example.com' },
    });
    await response.body.text();
    expect(response.statusCode).toBe(200);
    for (const header of CORS_HEADERS) expect(response.headers[header]).toBeUndefined();
    expect(handled).toBe(1);
  });

  test('with no origin configured, every origin is refused', async () => {
    const app = express();
    app.use(cors({ origins: [] }));
    app.post('/', (_req, res) => {
      res.json({});
    });
    const lonely = http.createServer(app);
    lonely.listen(0, '127.0.0.1');
    await once(lonely, 'listening');
    try {
      const base = `http://127.0.0.1:${(lonely.address() as AddressInfo).port}/`;
      const response = await request(base, {
        method: 'OPTIONS',
        headers: { origin: ALLOWED, 'access-control-request-method': 'POST' },
      });
      await response.body.text();
      expect(response.statusCode).toBe(403);
    } finally {
      lonely.close();
    }
  });
});
