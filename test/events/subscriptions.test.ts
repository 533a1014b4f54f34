import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

// With no WEBHOOK_PUBLIC_URL the facade registers its own loopback URL, as `npm start` does.
const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

describe('live subscriptions against the emulator', () => {
  test('registers its webhook endpoint with the upstream at start, secret kept out of the logs', async () => {
    const endpoints = await stack.emulator.rest('GET', '/v3/webhooks');
    const mine = endpoints.body.data.filter(
      (endpoint: { url: string }) => endpoint.url === stack.facade.webhookUrl,
    );
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ status: 'active', events: expect.arrayContaining(['account.updated']) });
    expect(stack.facade.logs().join('\n')).toMatch(/registered a webhook endpoint/);
    expect(stack.facade.logs().join('\n')).not.toMatch(/whsec_/);
  });

  test('a sandbox top-up produces accountChanged with the new balance and nested fields', async () => {
    const live = stack.connect();
    const received = live.subscribe(
      `subscription ($customerId: ID!, $accountId: ID) {
        accountChanged(customerId: $customerId, accountId: $accountId) {
          eventId type occurredAt replayed customerId accountId
          account { id balances { currency available } fees { breakdown { developer { bips fixed } } } }
        }
      }`,
      { customerId: 'cus_acme', accountId: 'acc_acme_eth' },
    );
    await stack.subscriptionsStarted(1);

    const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '100.25', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);

    await waitFor(() => received.data.length === 1, 'accountChanged');
    const event = received.data[0].accountChanged;
    expect(event).toMatchObject({
      eventId: expect.stringMatching(/^evt_/),
      type: 'account.updated',
      replayed: false,
      customerId: 'cus_acme',
      accountId: 'acc_acme_eth',
      account: {
        id: 'acc_acme_eth',
        balances: [{ currency: 'USDC', available: '12600.25' }],
        fees: { breakdown: { developer: { bips: 25, fixed: '0.50' } } },
      },
    });
    expect(received.errors).toEqual([]);
    received.stop();
  });

  test('a forced capability status produces capabilityChanged', async () => {
    const live = stack.connect();
    const received = live.subscribe(
      `subscription { capabilityChanged(customerId: "cus_acme") { type capabilityId capability { id status } } }`,
    );
    await stack.subscriptionsStarted(1);
    const forced = await stack.emulator.rest(
      'POST',
      '/v3/sandbox/customers/cus_acme/capabilities/cap_acme_wire/status',
      {
        body: { status: 'rejected' },
      },
    );
    expect(forced.status).toBe(200);
    await waitFor(() => received.data.length === 1, 'capabilityChanged');
    expect(received.data[0].capabilityChanged).toEqual({
      type: 'capability.status_changed',
      capabilityId: 'cap_acme_wire',
      capability: { id: 'cap_acme_wire', status: 'rejected' },
    });
    received.stop();
  });

  test('refuses a connection that brings a platform key instead of a token, with 4401 and no upstream call', async () => {
    await fetch(`${stack.emulator.url}/_emulator/requests`, { method: 'DELETE' });
    const live = stack.connect({ 'X-API-Key': 'sk_sandbox_emulator' });
    expect((await live.closed).code).toBe(4401);
    const calls = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as {
      total: number;
    };
    expect(calls.total).toBe(0);
  });

  test('refuses a key that is not a string with 4401, without asking the upstream or using its own key', async () => {
    await fetch(`${stack.emulator.url}/_emulator/requests`, { method: 'DELETE' });
    const live = stack.connect({ 'X-API-Key': 42 });
    expect((await live.closed).code).toBe(4401);
    const calls = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as {
      total: number;
    };
    expect(calls.total).toBe(0);
  });
});

describe("a facade that has not yet learnt its key's environment", () => {
  // A facade of its own: the environment of a key is learnt once, at its first connection.
  const fresh = useStack();

  test('closes with 1013 (try again later) when the upstream cannot check the key', async () => {
    await fetch(`${fresh.emulator.url}/_emulator/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        latency: { fixedMs: 0, jitterMs: 0 },
        rules: [{ route: 'GET /v3/capabilities', kind: 'internal_error', rate: 1 }],
      }),
    });
    try {
      const live = fresh.connect();
      expect((await live.closed).code).toBe(1013);
    } finally {
      await fetch(`${fresh.emulator.url}/_emulator/faults`, { method: 'DELETE' });
    }
    // The upstream back, the same client configuration connects and subscribes.
    const live = fresh.connect();
    const received = live.subscribe(`subscription { events(customerId: "cus_acme") { eventId } }`);
    await fresh.subscriptionsStarted(1);
    expect(received.errors).toEqual([]);
    received.stop();
  });
});
