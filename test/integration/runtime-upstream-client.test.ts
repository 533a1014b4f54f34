/**
 * The upstream client against a plain HTTP server that misbehaves in ways the emulator does not:
 * HTML error pages, unreadable bodies, a base path, and what goes on the wire.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import {
  createUpstreamClient,
  MAX_UPSTREAM_ANSWER_BYTES,
  type UpstreamClient,
} from '../../src/upstream/client.ts';
import { PLATFORM_SCOPE } from '../../src/upstream/access.ts';
import { createUpstreamContext } from '../../src/upstream/context.ts';
import { UpstreamProblemError, UpstreamUnavailableError } from '../../src/upstream/errors.ts';
import { createCustomer, getCustomer } from '../../src/upstream/customers.ts';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

type Reply = (res: http.ServerResponse) => void;

let server: http.Server;
let baseUrl: string;
const seen: Seen[] = [];
let replies: Reply[] = [];
let client: UpstreamClient;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const reply = replies.shift();
      if (reply) reply(res);
      else res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/platform`;
  client = createUpstreamClient({
    baseUrl,
    apiKey: 'unused',
    connectTimeoutMs: 1_000,
    headersTimeoutMs: 2_000,
    bodyTimeoutMs: 2_000,
    connections: 2,
    maxCallsPerOperation: 1_000,
    retry: { maxAttempts: 3, budget: 10, baseDelayMs: 1, maxDelayMs: 5 },
    problemDocsUrl: 'https://docs.platform.test/v3',
    logger: createLogger({ level: 'silent' }),
  });
});

afterAll(async () => {
  await client?.close();
  await new Promise((resolve) => server?.close(resolve));
});

afterEach(() => {
  seen.length = 0;
  replies = [];
});

function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return (res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
}

function up(requestId = 'req-test') {
  return createUpstreamContext(client, { apiKey: 'sk_live_wire', scope: PLATFORM_SCOPE, requestId });
}

describe('the upstream client', () => {
  test('sends the key, the request id, JSON and the base path; reads the data envelope', async () => {
    replies = [json(200, { data: { id: 'cus_1' } })];

    const customer = await getCustomer(up('req-wire'), 'cus_1');

    expect(customer).toEqual({ id: 'cus_1' });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'GET',
      url: '/platform/v3/customers/cus_1',
      headers: {
        'x-api-key': 'sk_live_wire',
        'x-request-id': 'req-wire',
        accept: 'application/json',
        'user-agent': 'platform-graphql-facade',
      },
    });
    expect(seen[0]!.headers['idempotency-key']).toBeUndefined();
  });

  test('sends a generated Idempotency-Key and a JSON body on an effectful call, and reads Idempotency-Replayed', async () => {
    replies = [json(201, { data: { id: 'cus_2' } }, { 'idempotency-replayed': 'true' })];

    const result = await createCustomer(up(), { type: 'business', externalId: 'ext-2' });

    expect(result).toEqual({
      data: { id: 'cus_2' },
      idempotencyKey: expect.stringMatching(/^[0-9a-f-]{36}$/),
      replayed: true,
    });
    expect(seen[0]!.headers['idempotency-key']).toBe(result.idempotencyKey);
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen[0]!.body)).toEqual({ type: 'business', externalId: 'ext-2' });
  });

  test('retries a mutation with the very same Idempotency-Key', async () => {
    replies = [
      json(500, {
        type: 'about:blank',
        title: 'Oops',
        status: 500,
        code: 'internal_error',
        detail: 'd',
        correlationId: 'c',
        retryable: true,
      }),
      json(201, { data: { id: 'cus_3' } }),
    ];

    const result = await createCustomer(up(), { type: 'business', externalId: 'ext-3' }, 'caller-key-3');

    expect(result).toEqual({ data: { id: 'cus_3' }, idempotencyKey: 'caller-key-3', replayed: false });
    expect(seen.map((request) => request.headers['idempotency-key'])).toEqual([
      'caller-key-3',
      'caller-key-3',
    ]);
  });

  test('an HTML 503 from a proxy is retried, then surfaces as a problem with that status', async () => {
    const html: Reply = (res) =>
      res.writeHead(503, { 'content-type': 'text/html' }).end('<h1>Service Unavailable</h1>');
    replies = [html, html, html];

    const failure = await getCustomer(up(), 'cus_1').catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(UpstreamProblemError);
    expect((failure as UpstreamProblemError).problem).toMatchObject({
      status: 503,
      code: 'upstream_http_error',
    });
    expect(seen).toHaveLength(3);
  });

  test('a success body that is not JSON is an unreadable answer and is not retried', async () => {
    replies = [(res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"data": ')];

    const failure = await getCustomer(up(), 'cus_1').catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(UpstreamUnavailableError);
    expect((failure as UpstreamUnavailableError).reason).toBe('invalid_response');
    expect(seen).toHaveLength(1);
  });

  test('a body that never ends is cut once it passes what an answer may be, an unreadable answer not retried', async () => {
    // An upstream (or a proxy before it) that streams without end: without a bound the answer
    // grows in memory until the operation's deadline, gigabytes on a fast link.
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let written = 0;
    replies = [
      (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const pump = (): void => {
          while (!res.destroyed) {
            written += chunk.length;
            if (!res.write(chunk)) return;
          }
        };
        res.on('drain', pump);
        pump();
      },
    ];

    const failure = await getCustomer(up(), 'cus_1').catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(UpstreamUnavailableError);
    expect((failure as UpstreamUnavailableError).reason).toBe('invalid_response');
    expect(seen).toHaveLength(1);
    // Cut near the bound (what sat in the sockets' buffers aside), not at some later deadline.
    expect(written).toBeLessThan(2 * MAX_UPSTREAM_ANSWER_BYTES);
  });

  test('an unreachable upstream is a connection failure, never carrying the key', async () => {
    const closed = createUpstreamClient({
      baseUrl: 'http://127.0.0.1:1',
      apiKey: 'unused',
      connectTimeoutMs: 1_000,
      headersTimeoutMs: 1_000,
      bodyTimeoutMs: 1_000,
      connections: 1,
      maxCallsPerOperation: 1_000,
      retry: { maxAttempts: 2, budget: 10, baseDelayMs: 1, maxDelayMs: 2 },
      problemDocsUrl: 'https://docs.platform.test/v3',
      logger: createLogger({ level: 'silent' }),
    });
    try {
      const failure = await getCustomer(
        createUpstreamContext(closed, { apiKey: 'sk_live_wire', scope: PLATFORM_SCOPE }),
        'cus_1',
      ).catch((error: unknown) => error);

      expect(failure).toBeInstanceOf(UpstreamUnavailableError);
      expect((failure as UpstreamUnavailableError).reason).toBe('connection_failed');
      expect(JSON.stringify(failure)).not.toContain('sk_live_wire');
      expect((failure as Error).message).not.toContain('sk_live_wire');
    } finally {
      await closed.close();
    }
  });
});
