/**
 * The upstream client's exchange (one dispatch handler collecting the answer whole) against undici's
 * own `request()` and `body.text()`, which it stands in for: over a real HTTP server, each case is
 * sent both ways and must end alike (the same text, status and headers, or the same error), and an
 * abort must reach the server exactly as often.
 */
import { getEventListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CollectedExchange } from '../../src/upstream/collected-exchange.ts';

type Reply = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const replies = new Map<string, Reply>();
/** Requests the server received, by path. */
const received = new Map<string, number>();
let server: http.Server;
let origin: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const path = req.url ?? '';
    received.set(path, (received.get(path) ?? 0) + 1);
    const reply = replies.get(path.replace(/\?.*$/, ''));
    if (reply) reply(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** How one way of sending ended. */
type Outcome =
  | { ok: true; statusCode: number; contentType: unknown; text: string }
  | { ok: false; error: unknown; statusCode: number | undefined };

async function throughRequest(pool: Pool, path: string, signal?: AbortSignal): Promise<Outcome> {
  let statusCode: number | undefined;
  try {
    const response = await pool.request({ method: 'GET', path, headers: {}, signal });
    statusCode = response.statusCode;
    const text = await response.body.text();
    return { ok: true, statusCode, contentType: response.headers['content-type'], text };
  } catch (error) {
    return { ok: false, error, statusCode };
  }
}

async function throughExchange(pool: Pool, path: string, signal?: AbortSignal): Promise<Outcome> {
  const exchange = CollectedExchange.send(pool, {
    method: 'GET',
    path,
    headers: {},
    body: undefined,
    signal,
  });
  try {
    const response = await exchange.response;
    return {
      ok: true,
      statusCode: response.statusCode,
      contentType: response.headers['content-type'],
      text: response.text,
    };
  } catch (error) {
    return { ok: false, error, statusCode: exchange.statusCode };
  }
}

/** Sends `path` both ways, each on a pool of its own, and returns both outcomes. */
async function bothWays(
  path: string,
  options: { bodyTimeout?: number; signal?: () => AbortSignal } = {},
): Promise<{ request: Outcome; exchange: Outcome }> {
  const pools = [0, 1].map(
    () =>
      new Pool(origin, {
        connections: 1,
        ...(options.bodyTimeout ? { bodyTimeout: options.bodyTimeout } : {}),
      }),
  );
  try {
    const request = await throughRequest(pools[0]!, path, options.signal?.());
    const exchange = await throughExchange(pools[1]!, path, options.signal?.());
    return { request, exchange };
  } finally {
    await Promise.all(pools.map((pool) => pool.destroy()));
  }
}

function codeOf(outcome: Outcome): unknown {
  return outcome.ok ? undefined : (outcome.error as { code?: unknown; name?: unknown }).code;
}

describe('an answer collected whole ends as request() and text() end', () => {
  test('a JSON body in many chunks, a character split across two of them', async () => {
    const text = JSON.stringify({ name: 'Zoë Ångström', notes: 'x'.repeat(70_000), tail: '€' });
    const bytes = Buffer.from(text);
    const split = bytes.indexOf(Buffer.from('€')) + 1;
    replies.set('/chunks', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(bytes.subarray(0, split));
      setTimeout(() => res.end(bytes.subarray(split)), 10);
    });
    const { request, exchange } = await bothWays('/chunks');
    expect(request).toEqual({ ok: true, statusCode: 200, contentType: 'application/json', text });
    expect(exchange).toEqual(request);
  });

  test('a leading byte order mark is skipped; an empty body is the empty string', async () => {
    replies.set('/bom', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}')]));
    });
    replies.set('/empty', (_req, res) => res.writeHead(204).end());
    const bom = await bothWays('/bom');
    expect(bom.request).toMatchObject({ ok: true, text: '{"a":1}' });
    expect(bom.exchange).toEqual(bom.request);
    const empty = await bothWays('/empty');
    expect(empty.request).toMatchObject({ ok: true, statusCode: 204, text: '' });
    expect(empty.exchange).toEqual(empty.request);
  });

  test('an error status answers its body, as any other', async () => {
    replies.set('/problem', (_req, res) => {
      res.writeHead(503, { 'content-type': 'application/problem+json' });
      res.end('{"type":"about:blank","status":503}');
    });
    const { request, exchange } = await bothWays('/problem');
    expect(request).toMatchObject({ ok: true, statusCode: 503, contentType: 'application/problem+json' });
    expect(exchange).toEqual(request);
  });

  test('a body shorter than its Content-Length fails alike, the status known', async () => {
    replies.set('/short', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"cut":');
      setTimeout(() => res.destroy(), 10);
    });
    const { request, exchange } = await bothWays('/short');
    expect(request.ok).toBe(false);
    expect(codeOf(exchange)).toBe(codeOf(request));
    expect(codeOf(exchange)).toMatch(/^UND_ERR_/);
    expect(exchange.statusCode).toBe(200);
    expect(request.statusCode).toBe(200);
  });

  test('a body that stalls past the body timeout fails alike', async () => {
    replies.set('/stall', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"slow":');
      // Never ends: the pool's bodyTimeout cuts it.
    });
    const { request, exchange } = await bothWays('/stall', { bodyTimeout: 100 });
    expect(codeOf(request)).toBe('UND_ERR_BODY_TIMEOUT');
    expect(codeOf(exchange)).toBe('UND_ERR_BODY_TIMEOUT');
    expect(exchange.statusCode).toBe(200);
  });

  test('a refused connection fails alike', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const pools = [0, 1].map(() => new Pool(`http://127.0.0.1:${port}`, { connections: 1 }));
    const request = await throughRequest(pools[0]!, '/nothing');
    const exchange = await throughExchange(pools[1]!, '/nothing');
    await Promise.all(pools.map((pool) => pool.destroy()));
    expect(codeOf(request)).toBe('ECONNREFUSED');
    expect(codeOf(exchange)).toBe('ECONNREFUSED');
    expect(exchange.statusCode).toBeUndefined();
  });
});

describe('an abort ends the exchange with the signal’s reason', () => {
  test('aborted before sending: nothing reaches the server', async () => {
    const before = received.get('/never') ?? 0;
    replies.set('/never', (_req, res) => res.writeHead(200).end('{}'));
    const reason = new Error('deadline');
    const { request, exchange } = await bothWays('/never', { signal: () => AbortSignal.abort(reason) });
    expect(request).toEqual({ ok: false, error: reason, statusCode: undefined });
    expect(exchange).toEqual(request);
    expect(received.get('/never') ?? 0).toBe(before);
  });

  test('aborted while the server holds back the headers', async () => {
    replies.set('/no-headers', () => {
      // Never answers: the abort ends it.
    });
    const reasons = [new Error('shutdown'), new Error('shutdown')];
    let next = 0;
    const { request, exchange } = await bothWays('/no-headers', {
      signal: () => {
        const controller = new AbortController();
        const reason = reasons[next++]!;
        setTimeout(() => controller.abort(reason), 30);
        return controller.signal;
      },
    });
    expect(request).toEqual({ ok: false, error: reasons[0], statusCode: undefined });
    expect(exchange).toEqual({ ok: false, error: reasons[1], statusCode: undefined });
  });

  test('aborted mid-body: the status is known, the error is the reason', async () => {
    replies.set('/half', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"half":');
    });
    const reasons = [new Error('deadline'), new Error('deadline')];
    let next = 0;
    const { request, exchange } = await bothWays('/half', {
      signal: () => {
        const controller = new AbortController();
        const reason = reasons[next++]!;
        setTimeout(() => controller.abort(reason), 50);
        return controller.signal;
      },
    });
    expect(request).toEqual({ ok: false, error: reasons[0], statusCode: 200 });
    expect(exchange).toEqual({ ok: false, error: reasons[1], statusCode: 200 });
  });

  test('aborted while queued behind a busy connection: it is never sent', async () => {
    replies.set('/busy', (_req, res) => setTimeout(() => res.writeHead(200).end('{}'), 80));
    replies.set('/queued', (_req, res) => res.writeHead(200).end('{}'));
    const pool = new Pool(origin, { connections: 1, pipelining: 1 });
    try {
      const busy = CollectedExchange.send(pool, {
        method: 'GET',
        path: '/busy',
        headers: {},
        body: undefined,
        signal: undefined,
      });
      const controller = new AbortController();
      const reason = new Error('deadline');
      const queued = CollectedExchange.send(pool, {
        method: 'GET',
        path: '/queued',
        headers: {},
        body: undefined,
        signal: controller.signal,
      });
      controller.abort(reason);
      await expect(queued.response).rejects.toBe(reason);
      await expect(busy.response).resolves.toMatchObject({ statusCode: 200, text: '{}' });
      expect(received.get('/queued') ?? 0).toBe(0);
    } finally {
      await pool.destroy();
    }
  });

  test('one signal over several exchanges: each ends with its reason, one still queued too', async () => {
    replies.set('/held', () => {
      // Never answers: the abort ends it.
    });
    const pool = new Pool(origin, { connections: 2, pipelining: 1 });
    try {
      const controller = new AbortController();
      const send = () =>
        CollectedExchange.send(pool, {
          method: 'GET',
          path: '/held',
          headers: {},
          body: undefined,
          signal: controller.signal,
        });
      const before = received.get('/held') ?? 0;
      const exchanges = [send(), send(), send()];
      const settled = Promise.allSettled(exchanges.map((exchange) => exchange.response));
      while ((received.get('/held') ?? 0) < before + 2)
        await new Promise((resolve) => setTimeout(resolve, 5));
      const reason = new Error('shutdown');
      controller.abort(reason);
      expect(await settled).toEqual(exchanges.map(() => ({ status: 'rejected', reason })));
      // The third waited for a connection: it was never sent.
      expect(received.get('/held')).toBe(before + 2);
      const late = send();
      await expect(late.response).rejects.toBe(reason);
      expect(received.get('/held')).toBe(before + 2);
    } finally {
      await pool.destroy();
    }
  });
});

describe('the signal is let go once its exchanges end', () => {
  test('the abort listener stays while one exchange is in flight and is removed with the last', async () => {
    replies.set('/answered', (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    replies.set('/slow', (_req, res) => {
      void held.then(() => res.writeHead(200).end('late'));
    });
    const pool = new Pool(origin, { connections: 2 });
    try {
      // An operation's deadline: Node keeps such a signal alive while it has a listener.
      const signal = AbortSignal.any([AbortSignal.timeout(60_000), new AbortController().signal]);
      const send = (path: string) =>
        CollectedExchange.send(pool, { method: 'GET', path, headers: {}, body: undefined, signal });
      const slow = send('/slow');
      const quick = send('/answered');
      expect((await quick.response).text).toBe('ok');
      expect(getEventListeners(signal, 'abort')).toHaveLength(1);
      release();
      expect((await slow.response).text).toBe('late');
      expect(getEventListeners(signal, 'abort')).toHaveLength(0);
      // Under the same signal again: one listener again, and none once it ends.
      expect((await send('/answered').response).text).toBe('ok');
      expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    } finally {
      await pool.destroy();
    }
  });
});
