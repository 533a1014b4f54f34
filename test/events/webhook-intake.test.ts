/**
 * The webhook route under a sender that is not the upstream: what the headers can tell is refused
 * before a byte of the body is read, stalled bodies are cut and hold no more than the caps allow,
 * refusals of one address are limited and sampled in the log, and signed deliveries sent during a
 * flood of forgeries all arrive, once each; the checks run in their declared order. Real sockets
 * from several loopback addresses.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createMemoryEventDeduplicator } from '../../src/events/dedup/memory-event-dedup.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import {
  createWebhookRouter,
  WEBHOOK_CHECKS,
  type WebhookRouter,
  type WebhookRouterOptions,
} from '../../src/events/receiving/webhook-route.ts';
import { createLogger } from '../../src/logger.ts';
import { acmeAccountUpdated, makeEvent, postSignedEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Receiver {
  port: number;
  router: WebhookRouter;
  published: PlatformEvent[];
  logLines: () => Record<string, unknown>[];
}

/** The webhook route alone on a real server, with `overrides` over its options. */
async function startReceiver(
  secret: string,
  overrides: Partial<WebhookRouterOptions> = {},
): Promise<Receiver> {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', write: (line) => lines.push(line) });
  const eventLog = createMemoryEventLog({ logger });
  const published: PlatformEvent[] = [];
  const { stop } = await eventLog.subscribe('sandbox', ({ event }) => published.push(event));
  const router = createWebhookRouter({
    secrets: () => [secret],
    dedup: createMemoryEventDeduplicator(),
    log: eventLog,
    logger,
    ...overrides,
  });
  const app = express();
  app.use('/webhooks/platform', router.router);
  const server: Server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await eventLog.close();
  });
  return {
    port: (server.address() as AddressInfo).port,
    router,
    published,
    logLines: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

/** Well-formed Standard Webhooks headers with a signature that matches nothing. */
function forgedHeaders(id: string): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
    'webhook-signature': `v1,${Buffer.alloc(32, 7).toString('base64')}`,
  };
}

function signedHeaders(secret: string, event: { id: string }, body: string): Record<string, string> {
  const timestamp = Math.floor(Date.now() / 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': event.id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook({ secret, id: event.id, timestamp, body }),
  };
}

interface RawExchange {
  /** The answer's status, once it has one; undefined when the connection closed without one. */
  status: Promise<number | undefined>;
  /** Resolves when the server (or anyone) closed the connection. */
  closed: Promise<void>;
  /** Bytes of the body written so far. */
  sent: () => number;
  socket: net.Socket;
}

/**
 * A POST written by hand from `localAddress`: its head declaring `contentLength`, then `body` (all
 * of it, or a part), then nothing (the connection stays open until someone closes it).
 */
function rawPost(
  port: number,
  localAddress: string,
  headers: Record<string, string>,
  contentLength: number,
  body: Buffer,
): RawExchange {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress });
  let sent = 0;
  let received = '';
  let resolveStatus: (status: number | undefined) => void = () => undefined;
  const status = new Promise<number | undefined>((resolve) => (resolveStatus = resolve));
  socket.on('data', (chunk) => {
    received += chunk.toString('latin1');
    const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
    if (match !== null) resolveStatus(Number(match[1]));
  });
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').then(() => resolveStatus(undefined));
  socket.on('connect', () => {
    const head = Object.entries({
      ...headers,
      'content-type': 'application/json',
      'content-length': String(contentLength),
    })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`POST /webhooks/platform HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n${head}\r\n`);
    if (body.length > 0) {
      socket.write(body);
      sent = body.length;
    }
  });
  return { status, closed, sent: () => sent, socket };
}

describe('what the headers tell is refused before the body is read', () => {
  test.each([
    [
      'no webhook-signature',
      { 'webhook-id': 'evt_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) },
    ],
    [
      'a timestamp an hour old',
      { ...forgedHeaders('evt_2'), 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) },
    ],
    ['a signature of the wrong form', { ...forgedHeaders('evt_3'), 'webhook-signature': 'v1,not-a-digest' }],
  ])('%s: 401 while the body is still unsent, and the connection is closed', async (_name, headers) => {
    const receiver = await startReceiver(generateWebhookSecret());
    const exchange = rawPost(receiver.port, '127.0.0.1', headers, 60_000, Buffer.alloc(0));
    expect(await exchange.status).toBe(401);
    await exchange.closed;
    expect(exchange.sent()).toBe(0);
    expect(receiver.router.bodies()).toEqual({ reading: 0, waiting: 0, bufferedBytes: 0 });
  });

  test('a Content-Length over the cap: 413 unread', async () => {
    const receiver = await startReceiver(generateWebhookSecret());
    const exchange = rawPost(
      receiver.port,
      '127.0.0.1',
      forgedHeaders('evt_4'),
      64 * 1024 + 1,
      Buffer.alloc(0),
    );
    expect(await exchange.status).toBe(413);
    await exchange.closed;
  });
});

describe('stalled bodies', () => {
  test('are cut at the receive time, and while they stall they hold no more than the caps allow', async () => {
    const secret = generateWebhookSecret();
    // The receive time is what the test waits out at the end; it is long enough that the 60 senders
    // below connect well within it on a busy machine. A slot freed before the last of them came would
    // let one in that the full slots would have turned away (a 408 for a 503).
    const limits = {
      maxConcurrentReads: 4,
      maxConcurrentReadsPerAddress: 2,
      maxWaiting: 6,
      receiveTimeoutMs: 2_000,
    };
    const maxBodyBytes = 16 * 1024;
    const receiver = await startReceiver(secret, { maxBodyBytes, bodyLimits: limits });
    // 60 senders on 6 addresses, each declaring a body just under the cap, sending half, and stalling.
    const send = (index: number): RawExchange =>
      rawPost(
        receiver.port,
        `127.0.0.${10 + (index % 6)}`,
        forgedHeaders(`evt_stall_${index}`),
        maxBodyBytes - 1,
        Buffer.alloc(8 * 1024, 0x20),
      );
    const answered: number[] = [];
    const track = (exchange: RawExchange): RawExchange => {
      void exchange.status.then((status) => answered.push(status ?? 0));
      return exchange;
    };
    // The first ten take every slot and fill the waiting line.
    const stalled = Array.from({ length: 10 }, (_, index) => track(send(index)));
    await waitFor(() => {
      const state = receiver.router.bodies();
      return state.reading === 4 && state.waiting === 6;
    }, 'the slots and the waiting line to fill');
    expect(receiver.router.bodies().bufferedBytes).toBeLessThanOrEqual(
      limits.maxConcurrentReads * maxBodyBytes,
    );
    expect(answered).toEqual([]);
    // The other fifty are answered busy at once: each one, or the newest waiter of a crowded address
    // whose place it takes. Nothing was cut meanwhile: the fifty answers are all 503, and the slots
    // and the line are as full as before.
    stalled.push(...Array.from({ length: 50 }, (_, index) => track(send(10 + index))));
    await waitFor(() => answered.length >= 50, 'fifty senders answered at once');
    expect(answered).toEqual(Array.from({ length: 50 }, () => 503));
    const state = receiver.router.bodies();
    expect({ reading: state.reading, waiting: state.waiting }).toEqual({ reading: 4, waiting: 6 });
    expect(state.bufferedBytes).toBeLessThanOrEqual(limits.maxConcurrentReads * maxBodyBytes);

    // Each is answered and its connection closed by the server: none stays open.
    const statuses = await Promise.all(stalled.map((exchange) => exchange.status));
    await Promise.all(stalled.map((exchange) => exchange.closed));
    const count = (status: number) => statuses.filter((each) => each === status).length;
    // The 4 read are cut (408); the 50 beyond the waiting line were answered busy at once (503); the
    // 6 waiting are answered busy at their deadline, or cut if a slot freed for them just before it.
    expect(count(408) + count(503)).toBe(60);
    expect(count(408)).toBeGreaterThanOrEqual(4);
    expect(count(503)).toBeGreaterThanOrEqual(50);
    expect(receiver.router.bodies()).toEqual({ reading: 0, waiting: 0, bufferedBytes: 0 });

    // And a signed delivery from another address goes through at once.
    const event = makeEvent();
    const delivery = await postSignedEvent(
      `http://127.0.0.1:${receiver.port}/webhooks/platform`,
      secret,
      event,
    );
    expect(delivery.status).toBe(200);
    await waitFor(() => receiver.published.length === 1, 'the event to reach the log');
    expect(receiver.published.map((published) => published.id)).toEqual([event.id]);
  });
});

describe('reading slots under a flood of stalled bodies', () => {
  test('a signed delivery from another address takes a place in the full line and the next free slot', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver(secret, {
      maxBodyBytes: 16 * 1024,
      bodyLimits: {
        maxConcurrentReads: 2,
        maxConcurrentReadsPerAddress: 2,
        maxWaiting: 4,
        receiveTimeoutMs: 500,
      },
    });
    // 10 stalled bodies from one address: 2 read, 4 waiting, 4 answered busy at once.
    const stalled = Array.from({ length: 10 }, (_, index) =>
      rawPost(
        receiver.port,
        '127.0.0.40',
        forgedHeaders(`evt_stalled_${index}`),
        16 * 1024 - 1,
        Buffer.alloc(1024, 0x20),
      ),
    );
    await waitFor(() => {
      const state = receiver.router.bodies();
      return state.reading === 2 && state.waiting === 4;
    }, 'the flood to fill the slots and the line');

    // The line is full, yet the signed delivery gets in, and is read before the flood's waiters.
    const event = makeEvent();
    const delivery = await postSignedEvent(
      `http://127.0.0.1:${receiver.port}/webhooks/platform`,
      secret,
      event,
    );
    expect(delivery.body).toEqual({ received: true, eventId: event.id, duplicate: false });
    await waitFor(() => receiver.published.length === 1, 'the event to reach the log');
    expect(receiver.published.map((published) => published.id)).toEqual([event.id]);
    const statuses = await Promise.all(stalled.map((exchange) => exchange.status));
    expect(statuses.every((status) => status === 408 || status === 503)).toBe(true);
  });
});

describe('refused deliveries of one address', () => {
  test('are limited per address (429 unread once over the limit) and logged once per window', async () => {
    const receiver = await startReceiver(generateWebhookSecret(), {
      refusals: { limit: 30, windowMs: 60_000 },
    });
    const statuses: number[] = [];
    for (let index = 0; index < 300; index += 1) {
      // No signature at all: what the address budget turns away.
      const { 'webhook-signature': _signature, ...unsigned } = forgedHeaders(`evt_f_${index}`);
      const exchange = rawPost(receiver.port, '127.0.0.20', unsigned, 2, Buffer.from('{}'));
      statuses.push((await exchange.status) ?? 0);
      exchange.socket.destroy();
    }
    expect(statuses.filter((status) => status === 401)).toHaveLength(31);
    expect(statuses.filter((status) => status === 429)).toHaveLength(269);
    const refusedLines = receiver.logLines().filter((line) => line.msg === 'refused a webhook delivery');
    expect(refusedLines).toEqual([
      expect.objectContaining({ level: 'warn', address: '127.0.0.20', reason: 'missing_headers' }),
    ]);

    // A well-formed signature from the same address is still verified (and refused for not matching).
    const forged = rawPost(receiver.port, '127.0.0.20', forgedHeaders('evt_forged'), 2, Buffer.from('{}'));
    expect(await forged.status).toBe(401);
    forged.socket.destroy();

    // Another address is not affected.
    const other = rawPost(receiver.port, '127.0.0.21', forgedHeaders('evt_other'), 2, Buffer.from('{}'));
    expect(await other.status).toBe(401);
  });

  test('a well-formed signature is verified whatever its address did before: 300 forgeries, 300 × 401, logged once', async () => {
    const receiver = await startReceiver(generateWebhookSecret(), {
      refusals: { limit: 30, windowMs: 60_000 },
    });
    const statuses: number[] = [];
    for (let index = 0; index < 300; index += 1) {
      const exchange = rawPost(
        receiver.port,
        '127.0.0.22',
        forgedHeaders(`evt_g_${index}`),
        2,
        Buffer.from('{}'),
      );
      statuses.push((await exchange.status) ?? 0);
      exchange.socket.destroy();
    }
    expect(statuses.filter((status) => status === 401)).toHaveLength(300);
    const refusedLines = receiver.logLines().filter((line) => line.msg === 'refused a webhook delivery');
    expect(refusedLines).toEqual([
      expect.objectContaining({ level: 'warn', address: '127.0.0.22', reason: 'no_matching_signature' }),
    ]);
  });
});

describe('a flood of forgeries against a facade', () => {
  const secret = generateWebhookSecret();
  const stack = useStack({ env: { WEBHOOK_SECRETS: secret } });
  const EVENTS = 'subscription { events { eventId } }';

  test('signed deliveries sent during the flood are all accepted at once, and each arrives exactly once', async () => {
    const received = stack.connect().subscribe(EVENTS);
    await stack.subscriptionsStarted(1);
    const port = Number(new URL(stack.facade.webhookUrl).port);
    const forgedBody = Buffer.alloc(60 * 1024, 0x20);

    // 8 forging addresses, 40 forgeries of 60 KiB each, all at once.
    const forgeries = Array.from({ length: 320 }, (_, index) => {
      const exchange = rawPost(
        port,
        `127.0.1.${1 + (index % 8)}`,
        forgedHeaders(`evt_forged_${index}`),
        forgedBody.length,
        forgedBody,
      );
      return exchange;
    });
    // Meanwhile the upstream's 20 signed deliveries, from its own address.
    const events = Array.from({ length: 20 }, () => acmeAccountUpdated());
    const answers = await Promise.all(
      events.map(async (event) => {
        const body = JSON.stringify(event);
        const response = await fetch(stack.facade.webhookUrl, {
          method: 'POST',
          headers: signedHeaders(secret, event, body),
          body,
        });
        return response.status;
      }),
    );
    expect(answers).toEqual(events.map(() => 200));

    const forgedStatuses = await Promise.all(forgeries.map((exchange) => exchange.status));
    await Promise.all(forgeries.map((exchange) => exchange.closed));
    expect(forgedStatuses.filter((status) => status === 200)).toEqual([]);
    expect(forgedStatuses.every((status) => status === undefined || [401, 429, 503].includes(status))).toBe(
      true,
    );

    // A marker after the flood: everything before it has been delivered.
    const marker = acmeAccountUpdated();
    const markerBody = JSON.stringify(marker);
    await fetch(stack.facade.webhookUrl, {
      method: 'POST',
      headers: signedHeaders(secret, marker, markerBody),
      body: markerBody,
    });
    await waitFor(() => received.data.some((data) => data.events.eventId === marker.id), 'the marker');
    const delivered = received.data
      .map((data) => data.events.eventId as string)
      .filter((id) => id !== marker.id);
    expect([...delivered].sort()).toEqual(events.map((event) => event.id).sort());

    // One warn line per forging address at most, not one per forgery.
    const refusedLines = stack.facade.logs().filter((line) => line.includes('refused a webhook delivery'));
    expect(refusedLines.length).toBeLessThanOrEqual(8);
    received.stop();
  });
});

describe('the order of the checks', () => {
  test('is the declared list: the headers and the address before the body, the signature before parsing, the append before the acknowledgement', () => {
    expect(WEBHOOK_CHECKS).toEqual([
      'accepting',
      'address_budget',
      'signed_headers',
      'body',
      'signature',
      'envelope',
      'first_delivery',
      'append',
    ]);
  });

  test('an unsigned post over the size cap is refused for its signature (401), not its size, with no body read', async () => {
    const receiver = await startReceiver(generateWebhookSecret());
    const { 'webhook-signature': _signature, ...unsigned } = forgedHeaders('evt_big_unsigned');
    const exchange = rawPost(receiver.port, '127.0.0.1', unsigned, 64 * 1024 + 1, Buffer.alloc(0));
    expect(await exchange.status).toBe(401);
    await exchange.closed;
    expect(exchange.sent()).toBe(0);
    expect(receiver.router.bodies()).toEqual({ reading: 0, waiting: 0, bufferedBytes: 0 });
  });

  test('an address over its budget: its unsigned posts get 429 before their headers are judged, its signed ones are still read and capped', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver(secret, { refusals: { limit: 1, windowMs: 60_000 } });
    const { 'webhook-signature': _signature, ...unsigned } = forgedHeaders('evt_budget');
    const statuses: (number | undefined)[] = [];
    for (let index = 0; index < 3; index += 1) {
      const exchange = rawPost(receiver.port, '127.0.0.30', unsigned, 64 * 1024 + 1, Buffer.alloc(0));
      statuses.push(await exchange.status);
      await exchange.closed;
    }
    expect(statuses).toEqual([401, 401, 429]);

    // A well-formed signature skips the budget and meets the size cap next: 413, unread.
    const oversized = rawPost(
      receiver.port,
      '127.0.0.30',
      forgedHeaders('evt_signed_big'),
      64 * 1024 + 1,
      Buffer.alloc(0),
    );
    expect(await oversized.status).toBe(413);
    await oversized.closed;
    expect(oversized.sent()).toBe(0);

    // And a signed event from the same address is published.
    const event = makeEvent();
    const body = JSON.stringify(event);
    const signed = rawPost(
      receiver.port,
      '127.0.0.30',
      signedHeaders(secret, event, body),
      Buffer.byteLength(body),
      Buffer.from(body),
    );
    expect(await signed.status).toBe(200);
    signed.socket.destroy();
    expect(receiver.published).toEqual([event]);
  });

  test('a body that is not JSON under a signature that does not match: 401 (verified before parsed); under one that matches: 202, parked', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver(secret);
    const body = Buffer.from('not json');
    const forged = rawPost(receiver.port, '127.0.0.1', forgedHeaders('evt_junk'), body.length, body);
    expect(await forged.status).toBe(401);
    forged.socket.destroy();
    const signed = rawPost(
      receiver.port,
      '127.0.0.1',
      signedHeaders(secret, { id: 'evt_junk' }, 'not json'),
      body.length,
      body,
    );
    expect(await signed.status).toBe(202);
    signed.socket.destroy();
    expect(receiver.published).toEqual([]);
  });

  test('shutting down comes first: an unsigned post is answered 503, not 401', async () => {
    const receiver = await startReceiver(generateWebhookSecret());
    receiver.router.stopAccepting();
    const { 'webhook-signature': _signature, ...unsigned } = forgedHeaders('evt_closing');
    const exchange = rawPost(receiver.port, '127.0.0.1', unsigned, 2, Buffer.from('{}'));
    expect(await exchange.status).toBe(503);
    exchange.socket.destroy();
  });
});
