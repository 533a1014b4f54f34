import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { createWebhookDispatcher } from '../../emulator/webhooks/dispatcher.ts';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { WebhookDispatcher, WebhookEventEnvelope } from '../../emulator/webhooks/types.ts';

type ReceivedWebhook = { headers: IncomingHttpHeaders; body: string; receivedAt: number };
/** What the receiver does with its n-th request (1-based): answer with a status, or never answer. */
type Reply = number | 'hang';

type Receiver = { url: string; received: ReceivedWebhook[]; close(): Promise<void> };

const receivers: Receiver[] = [];
const dispatchers: WebhookDispatcher[] = [];

afterEach(async () => {
  await Promise.all(dispatchers.splice(0).map((dispatcher) => dispatcher.close()));
  await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
});

async function startReceiver(reply: (requestNumber: number) => Reply = () => 200): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const hanging: ServerResponse[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        receivedAt: Date.now(),
      });
      const action = reply(received.length);
      if (action === 'hang') {
        hanging.push(res);
        return;
      }
      res.statusCode = action;
      if (action >= 300 && action < 400) res.setHeader('location', '/elsewhere');
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  receivers.push(receiver);
  return receiver;
}

function startDispatcher(options: Parameters<typeof createWebhookDispatcher>[0] = {}): WebhookDispatcher {
  const dispatcher = createWebhookDispatcher(options);
  dispatchers.push(dispatcher);
  return dispatcher;
}

function accountUpdated(id = 'evt_0001'): WebhookEventEnvelope {
  return {
    id,
    type: 'account.updated',
    occurredAt: '2026-01-02T03:04:05.678Z',
    environment: 'sandbox',
    data: {
      customerId: 'cus_1',
      resourceType: 'account',
      resourceId: 'acc_1',
      object: { id: 'acc_1', balances: [{ network: 'ethereum', currency: 'USDC', available: '125.50' }] },
    },
  };
}

/** Verifies a received webhook the way a receiver would, from the Standard Webhooks definition. */
function hasValidSignature(webhook: ReceivedWebhook, secret: string): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const content = `${String(webhook.headers['webhook-id'])}.${String(webhook.headers['webhook-timestamp'])}.${webhook.body}`;
  const expected = 'v1,' + createHmac('sha256', key).update(content).digest('base64');
  return String(webhook.headers['webhook-signature'])
    .split(' ')
    .some((signature) => signature === expected);
}

const waitLong = { timeout: 10_000, interval: 10 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('webhook dispatcher', () => {
  test('delivers the event signed, with the Standard Webhooks headers', async () => {
    const receiver = await startReceiver();
    const secret = generateWebhookSecret();
    const dispatcher = startDispatcher({ now: () => 1_767_323_045_678 });
    const event = accountUpdated();

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret }, event);
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    expect(receiver.received).toHaveLength(1);
    const [webhook] = receiver.received;
    expect(webhook!.headers['content-type']).toBe('application/json');
    expect(webhook!.headers['webhook-id']).toBe('evt_0001');
    expect(webhook!.headers['webhook-timestamp']).toBe('1767323045');
    expect(webhook!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(webhook!.headers['user-agent']).toMatch(/\S/);
    expect(JSON.parse(webhook!.body)).toEqual(event);
    expect(hasValidSignature(webhook!, secret)).toBe(true);

    expect(dispatcher.deliveries()).toEqual([
      {
        endpointId: 'we_1',
        eventId: 'evt_0001',
        eventType: 'account.updated',
        attempt: 1,
        status: 200,
        at: '2026-01-02T03:04:05.678Z',
        outcome: 'delivered',
      },
    ]);
  });

  test('the signature fails verification when the body, timestamp or secret differ', async () => {
    const receiver = await startReceiver();
    const secret = generateWebhookSecret();
    const dispatcher = startDispatcher();

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret }, accountUpdated());
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), waitLong);
    const webhook = receiver.received[0]!;

    expect(hasValidSignature(webhook, secret)).toBe(true);
    expect(hasValidSignature({ ...webhook, body: webhook.body.replace('125.50', '925.50') }, secret)).toBe(
      false,
    );
    const laterTimestamp = String(Number(webhook.headers['webhook-timestamp']) + 1);
    expect(
      hasValidSignature(
        { ...webhook, headers: { ...webhook.headers, 'webhook-timestamp': laterTimestamp } },
        secret,
      ),
    ).toBe(false);
    expect(hasValidSignature(webhook, generateWebhookSecret())).toBe(false);
  });

  test('signs each endpoint’s copy with that endpoint’s own secret', async () => {
    const first = await startReceiver();
    const second = await startReceiver();
    const firstSecret = generateWebhookSecret();
    const secondSecret = generateWebhookSecret();
    const dispatcher = startDispatcher();

    dispatcher.deliver({ id: 'we_1', url: first.url, secret: firstSecret }, accountUpdated());
    dispatcher.deliver({ id: 'we_2', url: second.url, secret: secondSecret }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    expect(hasValidSignature(first.received[0]!, firstSecret)).toBe(true);
    expect(hasValidSignature(first.received[0]!, secondSecret)).toBe(false);
    expect(hasValidSignature(second.received[0]!, secondSecret)).toBe(true);
    expect(dispatcher.deliveries().map((attempt) => [attempt.endpointId, attempt.outcome])).toEqual(
      expect.arrayContaining([
        ['we_1', 'delivered'],
        ['we_2', 'delivered'],
      ]),
    );
  });

  test('retries a receiver that fails twice (a 500, then an unfollowed redirect) until a 2xx', async () => {
    const replies: Reply[] = [500, 302, 204];
    const receiver = await startReceiver((n) => replies[n - 1] ?? 200);
    const secret = generateWebhookSecret();
    let clock = 1_767_323_045_000;
    // One second per reading, so each attempt carries its own timestamp and signature.
    const dispatcher = startDispatcher({ retryBaseMs: 20, now: () => (clock += 1000) });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret }, accountUpdated('evt_retry'));
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    expect(receiver.received).toHaveLength(3);
    const [first, second, third] = receiver.received;
    for (const webhook of receiver.received) {
      expect(webhook.headers['webhook-id']).toBe('evt_retry');
      expect(webhook.body).toBe(first!.body);
      expect(hasValidSignature(webhook, secret)).toBe(true);
    }
    expect(new Set(receiver.received.map((webhook) => webhook.headers['webhook-timestamp'])).size).toBe(3);
    expect(second!.headers['webhook-signature']).not.toBe(third!.headers['webhook-signature']);

    expect(
      dispatcher.deliveries().map(({ attempt, status, outcome }) => ({ attempt, status, outcome })),
    ).toEqual([
      { attempt: 1, status: 500, outcome: 'failed' },
      { attempt: 2, status: 302, outcome: 'failed' },
      { attempt: 3, status: 204, outcome: 'delivered' },
    ]);
  });

  test('gives up after maxAttempts, waiting twice as long before each retry', async () => {
    const receiver = await startReceiver(() => 503);
    const dispatcher = startDispatcher({ retryBaseMs: 50, maxAttempts: 4 });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret: generateWebhookSecret() }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);
    await sleep(250);

    expect(receiver.received).toHaveLength(4);
    expect(
      dispatcher.deliveries().map(({ attempt, status, outcome }) => ({ attempt, status, outcome })),
    ).toEqual([
      { attempt: 1, status: 503, outcome: 'failed' },
      { attempt: 2, status: 503, outcome: 'failed' },
      { attempt: 3, status: 503, outcome: 'failed' },
      { attempt: 4, status: 503, outcome: 'gave_up' },
    ]);
    // Lower bounds only: timers never fire early by more than rounding, but a loaded machine may run them late.
    const gaps = receiver.received
      .slice(1)
      .map((webhook, i) => webhook.receivedAt - receiver.received[i]!.receivedAt);
    expect(gaps[0]).toBeGreaterThanOrEqual(45);
    expect(gaps[1]).toBeGreaterThanOrEqual(95);
    expect(gaps[2]).toBeGreaterThanOrEqual(195);
  });

  test('tries at least once and records a refused connection as a failure', async () => {
    const gone = await startReceiver();
    await gone.close();
    const dispatcher = startDispatcher({ retryBaseMs: 10, maxAttempts: 2 });

    dispatcher.deliver({ id: 'we_1', url: gone.url, secret: generateWebhookSecret() }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    const attempts = dispatcher.deliveries();
    expect(attempts.map(({ attempt, outcome }) => ({ attempt, outcome }))).toEqual([
      { attempt: 1, outcome: 'failed' },
      { attempt: 2, outcome: 'gave_up' },
    ]);
    expect(attempts[0]!.status).toBeUndefined();
    expect(attempts[0]!.error).toMatch(/ECONNREFUSED/);
  });

  test('counts a receiver that does not answer within attemptTimeoutMs as failed, then retries', async () => {
    const receiver = await startReceiver((n) => (n === 1 ? 'hang' : 200));
    const dispatcher = startDispatcher({ retryBaseMs: 10, attemptTimeoutMs: 500 });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret: generateWebhookSecret() }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    expect(receiver.received).toHaveLength(2);
    const attempts = dispatcher.deliveries();
    expect(attempts.map(({ attempt, status, outcome }) => ({ attempt, status, outcome }))).toEqual([
      { attempt: 1, status: undefined, outcome: 'failed' },
      { attempt: 2, status: 200, outcome: 'delivered' },
    ]);
    expect(attempts[0]!.error).toBe('no response within 500 ms');
  });

  test('close() cancels scheduled retries: no request arrives after it', async () => {
    const receiver = await startReceiver(() => 500);
    const dispatcher = startDispatcher({ retryBaseMs: 100 });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret: generateWebhookSecret() }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.deliveries()).toHaveLength(1), waitLong);
    await dispatcher.close();
    const requestsAtClose = receiver.received.length;

    dispatcher.deliver(
      { id: 'we_1', url: receiver.url, secret: generateWebhookSecret() },
      accountUpdated('evt_late'),
    );
    await sleep(500);

    expect(requestsAtClose).toBe(1);
    expect(receiver.received).toHaveLength(1);
    expect(dispatcher.pending()).toBe(0);
    expect(dispatcher.deliveries().map(({ eventId, outcome }) => ({ eventId, outcome }))).toEqual([
      { eventId: 'evt_0001', outcome: 'failed' },
    ]);
  });

  test('close() aborts a request in flight instead of waiting for its timeout', async () => {
    const receiver = await startReceiver(() => 'hang');
    const dispatcher = startDispatcher({ attemptTimeoutMs: 120_000 });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret: generateWebhookSecret() }, accountUpdated());
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), waitLong);
    await dispatcher.close();
    await dispatcher.close();

    expect(dispatcher.pending()).toBe(0);
    expect(dispatcher.deliveries()).toMatchObject([
      { attempt: 1, outcome: 'gave_up', error: 'dispatcher closed' },
    ]);
  });

  test('gives up at once, without a request, on an unusable URL or secret, never echoing the secret', async () => {
    const receiver = await startReceiver();
    const dispatcher = startDispatcher();
    const badSecret = 'whsec_this is not base64 at all';

    dispatcher.deliver(
      { id: 'we_ftp', url: 'ftp://127.0.0.1/hooks', secret: generateWebhookSecret() },
      accountUpdated(),
    );
    dispatcher.deliver({ id: 'we_rel', url: '/hooks', secret: generateWebhookSecret() }, accountUpdated());
    dispatcher.deliver({ id: 'we_key', url: receiver.url, secret: badSecret }, accountUpdated());
    await sleep(100);

    expect(receiver.received).toHaveLength(0);
    expect(dispatcher.pending()).toBe(0);
    const attempts = dispatcher.deliveries();
    expect(attempts.map(({ endpointId, attempt, outcome }) => ({ endpointId, attempt, outcome }))).toEqual([
      { endpointId: 'we_ftp', attempt: 0, outcome: 'gave_up' },
      { endpointId: 'we_rel', attempt: 0, outcome: 'gave_up' },
      { endpointId: 'we_key', attempt: 0, outcome: 'gave_up' },
    ]);
    expect(attempts[0]!.error).toMatch(/http: or https:/);
    expect(attempts[1]!.error).toMatch(/absolute URL/);
    expect(attempts[2]!.error).toMatch(/whsec_/);
    expect(JSON.stringify(attempts)).not.toContain('not base64 at all');
  });

  test('never records or sends the secret itself', async () => {
    const receiver = await startReceiver((n) => (n === 1 ? 500 : 200));
    const secret = generateWebhookSecret();
    const dispatcher = startDispatcher({ retryBaseMs: 10 });

    dispatcher.deliver({ id: 'we_1', url: receiver.url, secret }, accountUpdated());
    await vi.waitFor(() => expect(dispatcher.pending()).toBe(0), waitLong);

    const secretBase64 = secret.slice('whsec_'.length);
    expect(JSON.stringify(dispatcher.deliveries())).not.toContain(secretBase64);
    for (const webhook of receiver.received) {
      expect(JSON.stringify(webhook)).not.toContain(secretBase64);
    }
  });

  test('does not throw into the caller on an event that cannot be serialised', () => {
    const dispatcher = startDispatcher();
    const event = accountUpdated('evt_bigint');
    event.data.object = { balance: 10n };

    expect(() =>
      dispatcher.deliver({ id: 'we_1', url: 'http://127.0.0.1:9/', secret: generateWebhookSecret() }, event),
    ).not.toThrow();
    expect(dispatcher.deliveries()).toMatchObject([
      { eventId: 'evt_bigint', attempt: 0, outcome: 'gave_up' },
    ]);
    expect(dispatcher.deliveries()[0]!.error).toMatch(/could not be serialised/);
  });

  test('keeps only the most recent 1000 attempts', () => {
    const dispatcher = startDispatcher();
    for (let i = 1; i <= 1005; i += 1) {
      dispatcher.deliver(
        { id: 'we_1', url: 'not a url', secret: generateWebhookSecret() },
        accountUpdated(`evt_${i}`),
      );
    }
    const attempts = dispatcher.deliveries();
    expect(attempts).toHaveLength(1000);
    expect(attempts[0]!.eventId).toBe('evt_6');
    expect(attempts.at(-1)!.eventId).toBe('evt_1005');
  });

  test('rejects options out of range when created', () => {
    expect(() => createWebhookDispatcher({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => createWebhookDispatcher({ maxAttempts: 2.5 })).toThrow(/maxAttempts/);
    expect(() => createWebhookDispatcher({ retryBaseMs: -1 })).toThrow(/retryBaseMs/);
    expect(() => createWebhookDispatcher({ attemptTimeoutMs: Number.NaN })).toThrow(/attemptTimeoutMs/);
  });
});
