import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest';
import { createEmulator, type Emulator } from '../../emulator/index.ts';

type ReceivedWebhook = { headers: IncomingHttpHeaders; body: string };
type Receiver = { url: string; received: ReceivedWebhook[]; replies: number[]; close(): Promise<void> };

const SANDBOX_KEY = 'sk_sandbox_emulator';
const LIVE_KEY = 'sk_live_emulator';
const waitLong = { timeout: 10_000, interval: 10 };

/** A receiver answering its n-th request with `replies[n - 1]`, then 200. */
async function startReceiver(): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const replies: number[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = replies[received.length - 1] ?? 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    received,
    replies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A receiver's own check, written from the Standard Webhooks definition. */
function hasValidSignature(webhook: ReceivedWebhook, secret: string): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const content = `${String(webhook.headers['webhook-id'])}.${String(webhook.headers['webhook-timestamp'])}.${webhook.body}`;
  return (
    webhook.headers['webhook-signature'] ===
    'v1,' + createHmac('sha256', key).update(content).digest('base64')
  );
}

let emulator: Emulator;
let receiver: Receiver;
let idempotencyCounter = 0;

async function call(method: string, path: string, body?: unknown, apiKey = SANDBOX_KEY) {
  const response = await fetch(emulator.url + path, {
    method,
    headers: {
      'x-api-key': apiKey,
      ...(body === undefined
        ? {}
        : { 'content-type': 'application/json', 'idempotency-key': `webhooks-e2e-${++idempotencyCounter}` }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

async function createEndpoint(url: string, events: string[], apiKey = SANDBOX_KEY) {
  const created = await call('POST', '/v3/webhooks', { url, events }, apiKey);
  expect(created.status).toBe(201);
  return created.json.data as { id: string; secret: string };
}

async function topUpAdaSolana(amount: string) {
  const topUp = await call('POST', '/v3/sandbox/accounts/acc_ada_sol/topup', { amount, currency: 'USDC' });
  expect(topUp.status).toBe(200);
}

async function deliveriesOf(endpointId: string) {
  const response = await fetch(`${emulator.url}/_emulator/webhook-deliveries`);
  const text = await response.text();
  const attempts = (JSON.parse(text) as { data: Record<string, unknown>[] }).data;
  return { text, attempts: attempts.filter((attempt) => attempt.endpointId === endpointId) };
}

beforeAll(async () => {
  emulator = createEmulator({ webhookRetryBaseMs: 20 });
  await emulator.listen(0);
});

beforeEach(async () => {
  const reset = await fetch(`${emulator.url}/_emulator/reset`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ data: 'demo' }),
  });
  expect(reset.status).toBeLessThan(300);
  receiver = await startReceiver();
  return async () => {
    await receiver.close();
  };
});

afterAll(async () => {
  await emulator?.close();
});

describe('emulator webhooks, end to end', () => {
  test('a sandbox top-up sends a signed account.updated with the new balance to the endpoint created through the API', async () => {
    const endpoint = await createEndpoint(receiver.url, ['account.updated']);
    expect(endpoint.secret).toMatch(/^whsec_/);

    await topUpAdaSolana('100.00');
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), waitLong);

    const [webhook] = receiver.received;
    expect(hasValidSignature(webhook!, endpoint.secret)).toBe(true);
    const event = JSON.parse(webhook!.body) as {
      id: string;
      type: string;
      environment: string;
      data: { customerId: string; resourceType: string; resourceId: string; object: { balances: unknown[] } };
    };
    expect(webhook!.headers['webhook-id']).toBe(event.id);
    expect(event).toMatchObject({
      type: 'account.updated',
      environment: 'sandbox',
      data: { customerId: 'cus_ada', resourceType: 'account', resourceId: 'acc_ada_sol' },
    });
    // The demo wallet starts at 845.25.
    expect(event.data.object.balances).toEqual([{ currency: 'USDC', available: '945.25', pending: '10.00' }]);
    const read = await call('GET', '/v3/customers/cus_ada/accounts/acc_ada_sol');
    expect(event.data.object).toEqual(read.json.data);

    const { text, attempts } = await deliveriesOf(endpoint.id);
    expect(attempts).toMatchObject([
      { eventId: event.id, eventType: 'account.updated', attempt: 1, status: 200, outcome: 'delivered' },
    ]);
    expect(text).not.toContain(endpoint.secret.slice('whsec_'.length));
  });

  test('a receiver that fails gets the same signed event again until it accepts', async () => {
    receiver.replies.push(500, 503);
    const endpoint = await createEndpoint(receiver.url, ['account.updated']);

    await topUpAdaSolana('1.50');
    await vi.waitFor(() => expect(receiver.received).toHaveLength(3), waitLong);

    const [first, ...retries] = receiver.received;
    for (const webhook of retries) {
      expect(webhook.headers['webhook-id']).toBe(first!.headers['webhook-id']);
      expect(webhook.body).toBe(first!.body);
    }
    for (const webhook of receiver.received) expect(hasValidSignature(webhook, endpoint.secret)).toBe(true);

    await vi.waitFor(async () => {
      const { attempts } = await deliveriesOf(endpoint.id);
      expect(attempts.map(({ attempt, status, outcome }) => ({ attempt, status, outcome }))).toEqual([
        { attempt: 1, status: 500, outcome: 'failed' },
        { attempt: 2, status: 503, outcome: 'failed' },
        { attempt: 3, status: 200, outcome: 'delivered' },
      ]);
    }, waitLong);
  });

  test('only active endpoints of the event’s environment subscribed to its kind receive it', async () => {
    const subscribed = await createEndpoint(receiver.url, ['account.updated']);
    const otherKind = await startReceiver();
    const disabledReceiver = await startReceiver();
    const liveReceiver = await startReceiver();
    try {
      await createEndpoint(otherKind.url, ['customer.updated']);
      await createEndpoint(liveReceiver.url, ['account.updated'], LIVE_KEY);
      const disabled = await createEndpoint(disabledReceiver.url, ['account.updated']);
      const patched = await call('PATCH', `/v3/webhooks/${disabled.id}`, { status: 'disabled' });
      expect(patched.status).toBe(200);

      await topUpAdaSolana('2.00');
      await vi.waitFor(
        async () => expect((await deliveriesOf(subscribed.id)).attempts).toHaveLength(1),
        waitLong,
      );
      // The others would have been sent in the same breath; give any stray delivery time to land.
      await new Promise((resolve) => setTimeout(resolve, 200));

      expect(receiver.received).toHaveLength(1);
      expect(otherKind.received).toHaveLength(0);
      expect(liveReceiver.received).toHaveLength(0);
      expect(disabledReceiver.received).toHaveLength(0);
    } finally {
      await otherKind.close();
      await disabledReceiver.close();
      await liveReceiver.close();
    }
  });
});
