/**
 * Subscriptions and callers: a caller scoped to one customer hears only that customer's events,
 * over every subscription; a token that expires ends the feed with UNAUTHENTICATED and 4401; a
 * refused connection costs no upstream call; browsers from other origins cannot open a socket.
 */
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { describe, expect, test } from 'vitest';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
const stack = useStack({ env: { WEBHOOK_SECRETS: secret } });

const bearer = async (caller: 'acme' | 'nobody' | 'operator') => ({
  Authorization: `Bearer ${await tokenFor(caller)}`,
});

function accountUpdated(customerId: string, accountId: string) {
  return upstreamEvent({
    type: 'account.updated',
    environment: 'sandbox',
    customerId,
    resourceType: 'account',
    resourceId: accountId,
  });
}

async function upstreamTotal(): Promise<number> {
  const calls = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as { total: number };
  return calls.total;
}

async function resetUpstreamCalls(): Promise<void> {
  await fetch(`${stack.emulator.url}/_emulator/requests`, { method: 'DELETE' });
}

describe('a subscriber scoped to one customer', () => {
  test('hears its own customer’s events and never another’s, with no read made for the others', async () => {
    const acme = stack.connect(await bearer('acme'));
    const everything = acme.subscribe(
      `subscription { events { eventId customerId resource { ... on Account { id } } } }`,
    );
    await stack.subscriptionsStarted(1);
    await resetUpstreamCalls();

    const globexEvent = accountUpdated('cus_globex', 'acc_globex_eth');
    const acmeEvent = accountUpdated('cus_acme', 'acc_acme_eth');
    for (const event of [globexEvent, acmeEvent]) {
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    }

    await waitFor(() => everything.data.length >= 1, 'the acme event');
    expect(everything.data).toEqual([
      { events: { eventId: acmeEvent.id, customerId: 'cus_acme', resource: { id: 'acc_acme_eth' } } },
    ]);
    // One read, of acme's account: the globex event never reached the queue.
    expect(await upstreamTotal()).toBe(1);
    everything.stop();
  });

  test('subscribing to another customer with since answers NOT_FOUND, as for an unknown one, with no upstream call', async () => {
    const acme = stack.connect(await bearer('acme'));
    await resetUpstreamCalls();
    const other = acme.subscribe(
      `subscription { accountChanged(customerId: "cus_globex", since: "2000-01-01T00:00:00Z") { accountId } }`,
    );
    await other.done;
    // graphql-ws counts a refused operation as started: keep the harness's count in step.
    await stack.subscriptionsStarted(1);

    expect(other.errors.map((error: { extensions?: { code?: string } }) => error.extensions?.code)).toEqual([
      'NOT_FOUND',
    ]);
    expect(other.data).toEqual([]);
    expect(await upstreamTotal()).toBe(0);
  });

  test('a live subscription to another customer answers NOT_FOUND too, and the caller’s own keeps listening', async () => {
    const acme = stack.connect(await bearer('acme'));
    const own = acme.subscribe(`subscription { accountChanged(customerId: "cus_acme") { accountId } }`);
    await stack.subscriptionsStarted(1);
    await resetUpstreamCalls();
    const other = acme.subscribe(`subscription { accountChanged(customerId: "cus_globex") { accountId } }`);
    await other.done;
    // graphql-ws counts a refused operation as started: keep the harness's count in step.
    await stack.subscriptionsStarted(1);
    expect(other.errors.map((error: { extensions?: { code?: string } }) => error.extensions?.code)).toEqual([
      'NOT_FOUND',
    ]);
    expect(await upstreamTotal()).toBe(0);

    await postSignedEvent(stack.facade.webhookUrl, secret, accountUpdated('cus_globex', 'acc_globex_eth'));
    const marker = accountUpdated('cus_acme', 'acc_acme_eth');
    await postSignedEvent(stack.facade.webhookUrl, secret, marker);

    await waitFor(() => own.data.length >= 1, 'the acme marker');
    expect(own.data).toEqual([{ accountChanged: { accountId: 'acc_acme_eth' } }]);
    expect(other.data).toEqual([]);
    own.stop();
  });
});

describe('an event naming the subscriber’s customer about another customer’s resource', () => {
  test('is dropped: the record it carries never stands in for a read the scope refused', async () => {
    const acme = stack.connect(await bearer('acme'));
    const everything = acme.subscribe(
      `subscription { events { eventId resource { ... on Account { id customerId } ... on Customer { id displayName } } } }`,
    );
    // Listening for sure once an event of its own has arrived.
    const probes = new Set<string>();
    await waitFor(
      () => everything.data.length >= 1,
      'the subscription to listen',
      10_000,
      async () => {
        const probe = accountUpdated('cus_acme', 'acc_acme_eth');
        probes.add(probe.id);
        await postSignedEvent(stack.facade.webhookUrl, secret, probe);
      },
    );

    const foreignAccount = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'account',
      resourceId: 'acc_globex_eth',
      object: { id: 'acc_globex_eth', customerId: 'cus_globex' },
    });
    const foreignCustomer = upstreamEvent({
      type: 'customer.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'customer',
      resourceId: 'cus_globex',
      object: { id: 'cus_globex', displayName: 'Globex Corporation' },
    });
    const marker = accountUpdated('cus_acme', 'acc_acme_eth');
    for (const event of [foreignAccount, foreignCustomer, marker]) {
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    }

    // Events are delivered in order: the marker comes after whatever the two others became.
    const isMarker = (data: { events: { eventId: string } }) => data.events.eventId === marker.id;
    await waitFor(() => everything.data.some(isMarker), 'the acme marker');
    expect(
      everything.data.filter((data: { events: { eventId: string } }) => !probes.has(data.events.eventId)),
    ).toEqual([{ events: { eventId: marker.id, resource: { id: 'acc_acme_eth', customerId: 'cus_acme' } } }]);
    everything.stop();
  });
});

describe('connecting', () => {
  test('without a token: 4401, and no upstream call', async () => {
    await resetUpstreamCalls();
    const anonymous = stack.connect({});

    expect((await anonymous.closed).code).toBe(4401);
    expect(await upstreamTotal()).toBe(0);
  });

  test('with a forged token: 4401, and no upstream call', async () => {
    await resetUpstreamCalls();
    const forged = stack.connect({ authorization: `Bearer ${(await tokenFor('acme')).slice(0, -4)}AAAA` });

    expect((await forged.closed).code).toBe(4401);
    expect(await upstreamTotal()).toBe(0);
  });

  test('with a valid token that names no customer and no role: 4403', async () => {
    const nobody = stack.connect(await bearer('nobody'));

    expect((await nobody.closed).code).toBe(4403);
  });

  test('the token of the upgrade request’s Authorization header is accepted too', async () => {
    const socket = new WebSocket(stack.facade.wsUrl, {
      protocols: 'graphql-transport-ws',
      headers: { authorization: `Bearer ${await tokenFor('acme')}` },
    } as unknown as string[]);
    const messages: unknown[] = [];
    socket.addEventListener('message', (event) => messages.push(JSON.parse(String(event.data))));
    await new Promise((resolve) => socket.addEventListener('open', resolve));
    socket.send(JSON.stringify({ type: 'connection_init' }));
    await waitFor(() => messages.length >= 1, 'connection_ack');
    expect(messages[0]).toEqual({ type: 'connection_ack' });
    socket.close();
  });
});

describe('a token that expires while subscribed', () => {
  test('ends each subscription with UNAUTHENTICATED, then closes the socket with 4401', async () => {
    const expiresIn = 2;
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + expiresIn });
    const live = stack.connect({ Authorization: `Bearer ${token}` });
    const received = live.subscribe(`subscription { accountChanged(customerId: "cus_acme") { accountId } }`);
    await stack.subscriptionsStarted(1);

    await received.done;
    expect(received.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/access token of this connection has expired/),
        extensions: { code: 'UNAUTHENTICATED' },
      }),
    ]);
    expect((await live.closed).code).toBe(4401);

    // A fresh token reconnects.
    const again = stack.connect(await bearer('acme'));
    const resumed = again.subscribe(`subscription { accountChanged(customerId: "cus_acme") { accountId } }`);
    await stack.subscriptionsStarted(1);
    expect(resumed.errors).toEqual([]);
    resumed.stop();
  });
});
