import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';
import type { EventLog } from '../../src/events/log/event-log.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import type { EventDeduplicator } from '../../src/events/dedup/event-dedup.ts';
import { createMemoryEventDeduplicator } from '../../src/events/dedup/memory-event-dedup.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import { openRedisConnection } from '../../src/redis.ts';
import { createRedisEventLog } from '../../src/events/log/redis-event-log.ts';
import { createRedisEventDeduplicator } from '../../src/events/dedup/redis-event-dedup.ts';
import { createWebhookRouter, type WebhookRouterOptions } from '../../src/events/receiving/webhook-route.ts';
import { createLogger } from '../../src/logger.ts';
import { makeEvent } from '../support/harness/events.ts';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { waitFor } from '../support/harness/wait.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Receiver = {
  url: string;
  published: PlatformEvent[];
  logLines: string[];
  stopAccepting(): void;
};

/** A real HTTP server with the webhook route, and a record of what reached the event log's listeners. */
async function startReceiver(
  secrets: string[],
  overrides: Partial<WebhookRouterOptions> & { eventLog?: EventLog; dedup?: EventDeduplicator } = {},
): Promise<Receiver> {
  const logLines: string[] = [];
  const logger = createLogger({ level: 'debug', write: (line) => logLines.push(line) });
  const { eventLog = createMemoryEventLog({ logger }), ...options } = overrides;
  const published: PlatformEvent[] = [];
  const { stop: stopListening } = await eventLog.subscribe('sandbox', ({ event }) => published.push(event));
  const webhooks = createWebhookRouter({
    secrets: () => secrets,
    dedup: overrides.dedup ?? createMemoryEventDeduplicator(),
    logger,
    ...options,
    log: eventLog,
  });
  const app = express();
  app.use('/webhooks/platform', webhooks.router);
  const server: Server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    stopListening();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await eventLog.close();
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks/platform`,
    published,
    logLines,
    stopAccepting: webhooks.stopAccepting,
  };
}

type Delivery = { headers: Record<string, string>; body: string };

function sign(secret: string, body: string, id: string, timestamp = Math.floor(Date.now() / 1000)): Delivery {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ secret, id, timestamp, body }),
    },
  };
}

function signEvent(secret: string, event: PlatformEvent, timestamp?: number): Delivery {
  return sign(secret, JSON.stringify(event), event.id, timestamp);
}

async function post(
  url: string,
  delivery: Delivery,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, { method: 'POST', headers: delivery.headers, body: delivery.body });
  const text = await response.text();
  return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

describe('webhook route', () => {
  test('publishes a verified event and acknowledges it with 200', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const event = makeEvent();
    const response = await post(receiver.url, signEvent(secret, event));
    expect(response).toEqual({ status: 200, body: { received: true, eventId: event.id, duplicate: false } });
    expect(receiver.published).toEqual([event]);
  });

  test('publishes the same delivery sent twice only once', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const event = makeEvent();
    const delivery = signEvent(secret, event);
    expect((await post(receiver.url, delivery)).status).toBe(200);
    // A retry carries the same id with a new timestamp and signature.
    const retry = await post(receiver.url, signEvent(secret, event, Math.floor(Date.now() / 1000) + 1));
    expect(retry).toEqual({ status: 200, body: { received: true, eventId: event.id, duplicate: true } });
    expect(receiver.published).toEqual([event]);
  });

  test('refuses a forged signature with 401 and publishes nothing', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const event = makeEvent();
    const forged = signEvent(generateWebhookSecret(), event);
    const response = await post(receiver.url, forged);
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ status: 401, title: 'Invalid webhook signature' });
    // A tampered body under a genuine signature is refused too.
    const genuine = signEvent(secret, event);
    const tampered = { ...genuine, body: genuine.body.replace('acc_1', 'acc_2') };
    expect((await post(receiver.url, tampered)).status).toBe(401);
    expect(receiver.published).toEqual([]);
  });

  test('refuses a stale or future timestamp with 401 and publishes nothing', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const now = Math.floor(Date.now() / 1000);
    expect((await post(receiver.url, signEvent(secret, makeEvent(), now - 3600))).status).toBe(401);
    expect((await post(receiver.url, signEvent(secret, makeEvent(), now + 3600))).status).toBe(401);
    expect(receiver.published).toEqual([]);
  });

  test('refuses unsigned deliveries with 401, even when the body is garbage', async () => {
    const receiver = await startReceiver([generateWebhookSecret()]);
    const response = await fetch(receiver.url, { method: 'POST', body: 'garbage' });
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/application\/problem\+json/);
  });

  test('parks a signed body that is not JSON or not the event envelope: 202, never published', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const notJson = await post(receiver.url, sign(secret, '{"id": "evt_1",', 'evt_1'));
    expect(notJson).toMatchObject({
      status: 202,
      body: { received: true, parked: true, reason: 'invalid_json', detail: 'the body is not valid JSON' },
    });
    const noType = await post(
      receiver.url,
      sign(secret, JSON.stringify({ ...makeEvent(), type: undefined }), 'evt_x'),
    );
    expect(noType).toMatchObject({
      status: 202,
      body: { parked: true, reason: 'invalid_name', detail: expect.stringMatching(/"type"/) },
    });
    const event = makeEvent();
    const otherId = await post(receiver.url, sign(secret, JSON.stringify(event), 'evt_other'));
    expect(otherId).toMatchObject({
      status: 202,
      body: { parked: true, reason: 'id_mismatch', detail: expect.stringMatching(/webhook-id/) },
    });
    expect(receiver.published).toEqual([]);
  });

  test('answers 413 to a body over the cap without reading it all', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret], { maxBodyBytes: 2048 });
    const event = makeEvent({
      data: { customerId: 'cus_1', resourceType: 'account', resourceId: 'acc_1', object: 'x'.repeat(4096) },
    });
    const response = await post(receiver.url, signEvent(secret, event));
    expect(response).toMatchObject({ status: 413, body: { status: 413, title: 'Payload too large' } });
    expect(receiver.published).toEqual([]);
  });

  test('acknowledges only after the event log holds the event', async () => {
    const secret = generateWebhookSecret();
    const logger = createLogger({ level: 'silent' });
    const inner = createMemoryEventLog({ logger });
    let release!: () => void;
    const publishGate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let publishCalls = 0;
    const gatedLog: EventLog = {
      ...inner,
      append: async (event) => {
        publishCalls += 1;
        await publishGate;
        return inner.append(event);
      },
    };
    const receiver = await startReceiver([secret], { eventLog: gatedLog });
    let settled = false;
    const response = post(receiver.url, signEvent(secret, makeEvent())).finally(() => {
      settled = true;
    });
    await waitFor(() => publishCalls === 1, 'the route to start publishing');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(false);
    release();
    expect((await response).status).toBe(200);
    // The memory log hands the event to its listeners on the next turn, after the acknowledgement.
    await waitFor(() => receiver.published.length === 1, 'the event to reach the listener');
    expect(receiver.published).toHaveLength(1);
  });

  test('answers 503 when appending fails, and appends the retry', async () => {
    const secret = generateWebhookSecret();
    const logger = createLogger({ level: 'silent' });
    const inner = createMemoryEventLog({ logger });
    let failures = 1;
    const flakyLog: EventLog = {
      ...inner,
      append: async (event) => {
        if (failures-- > 0) throw new Error('redis is down');
        return inner.append(event);
      },
    };
    const receiver = await startReceiver([secret], { eventLog: flakyLog });
    const event = makeEvent();
    const first = await post(receiver.url, signEvent(secret, event));
    expect(first.status).toBe(503);
    expect(receiver.published).toEqual([]);
    const retry = await post(receiver.url, signEvent(secret, event));
    expect(retry).toEqual({ status: 200, body: { received: true, eventId: event.id, duplicate: false } });
    expect(receiver.published).toEqual([event]);
  });

  test('answers 409 to a delivery of an event another delivery is still publishing', async () => {
    const secret = generateWebhookSecret();
    const dedup = createMemoryEventDeduplicator();
    const receiver = await startReceiver([secret], { dedup });
    const event = makeEvent();
    expect(await dedup.claim(event.id)).toBe('claimed');
    const response = await fetch(receiver.url, { method: 'POST', ...signEvent(secret, event) });
    expect(response.status).toBe(409);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(receiver.published).toEqual([]);
  });

  test('answers 503 once it stopped accepting (shutdown)', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    receiver.stopAccepting();
    const response = await fetch(receiver.url, { method: 'POST', ...signEvent(secret, makeEvent()) });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).not.toBeNull();
    expect(receiver.published).toEqual([]);
  });

  test('never writes a secret or a signature to the log', async () => {
    const secret = generateWebhookSecret();
    const receiver = await startReceiver([secret]);
    const forged = signEvent(generateWebhookSecret(), makeEvent());
    await post(receiver.url, forged);
    await post(receiver.url, signEvent(secret, makeEvent()));
    const log = receiver.logLines.join('\n');
    expect(log).toMatch(/refused a webhook delivery/);
    expect(log).not.toContain(secret.slice('whsec_'.length));
    expect(log).not.toContain(forged.headers['webhook-signature']!.slice(3));
  });
});

describe('webhook route on two replicas sharing Redis', () => {
  test('the same event delivered to both replicas is published once', async () => {
    const url = requireRedisUrl();
    const prefix = uniqueRedisPrefix();
    const logger = createLogger({ level: 'silent' });
    const secret = generateWebhookSecret();
    const replica = async (): Promise<Receiver> => {
      const dedupClient = openRedisConnection(url, 'dedup', logger);
      cleanups.push(async () => {
        await dedupClient.quit();
      });
      return startReceiver([secret], {
        eventLog: createRedisEventLog({
          client: dedupClient,
          openReader: () => openRedisConnection(url, 'log-reader', logger),
          keyPrefix: prefix,
          logger,
        }),
        dedup: createRedisEventDeduplicator({ client: dedupClient, keyPrefix: prefix }),
      });
    };
    const first = await replica();
    const second = await replica();
    const event = makeEvent();
    const answers = await Promise.all([
      post(first.url, signEvent(secret, event)),
      post(second.url, signEvent(secret, event)),
    ]);
    // One publishes; the other sees it in flight (409, retried later) or already seen (200 duplicate).
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses[0]).toBe(200);
    const retry = await post(second.url, signEvent(secret, event));
    expect(retry.body).toMatchObject({ duplicate: true });
    await waitFor(() => first.published.length === 1 && second.published.length === 1, 'the event on both');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(first.published).toEqual([event]);
    expect(second.published).toEqual([event]);
  });
});
