/**
 * Subscriptions through Hive Gateway: a client subscribes at the gateway (server-sent events), the
 * gateway subscribes to the facade over graphql-ws (`@graphql-mesh/transport-ws`, with compose's
 * deploy/gateway.config.ts and its token check at the edge), and each event arrives with a field
 * the support-notes subgraph resolves (`Customer.openSupportNoteCount`), fetched by the gateway
 * per event.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FederationStack, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGateway, startEdgeHiveGateway } from '../support/harness/gateways.ts';
import type { Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer, issuerEnv } from '../support/tokens.ts';

let federation: FederationStack;
let stack: Stack;
let gateway: RunningGateway;
let gatewayUrl: string;

beforeAll(async () => {
  // The emulator delivers its webhooks to the facade, as in compose.yaml.
  federation = await startFederationStack({ env: { WEBHOOK_REGISTER: 'true' } });
  ({ stack } = federation);
  // compose's own Hive Gateway configuration, trusting the run's OpenID provider.
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  gateway = await startEdgeHiveGateway(federation.supergraphSdl, {
    issuer: AUTH_ISSUER,
    audience: AUTH_AUDIENCE,
  });
  gatewayUrl = gateway.url;
});

afterAll(async () => {
  await gateway?.close();
  await federation?.close();
});

/** Subscribes at `url` over server-sent events and collects each `next` payload until aborted. */
function subscribeOverSse(
  url: string,
  query: string,
  credentials: Promise<Record<string, string>> = bearer('operator'),
) {
  const received: { data?: Record<string, unknown>; errors?: unknown[] }[] = [];
  const controller = new AbortController();
  const done = (async () => {
    const response = await fetch(url, {
      method: 'POST',
      // The gateway carries the caller's token to the facade in graphql-ws's connection_init.
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(await credentials),
      },
      body: JSON.stringify({ query }),
      signal: controller.signal,
    });
    if (response.status !== 200 || response.body === null)
      throw new Error(`the gateway answered ${response.status}`);
    const decoder = new TextDecoder();
    let buffer = '';
    const reader = response.body.getReader();
    for (;;) {
      const { value: chunk, done: ended } = await reader.read();
      if (ended) break;
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = message
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trim())
          .join('\n');
        if (/^event: next$/m.test(message) || (!/^event:/m.test(message) && data !== '')) {
          received.push(JSON.parse(data) as (typeof received)[number]);
        }
      }
    }
  })().catch((error: unknown) => {
    if (!controller.signal.aborted) throw error;
  });
  return { received, stop: () => controller.abort(), done };
}

describe('subscriptions through Hive Gateway', () => {
  it('delivers a facade event with a field of the support-notes subgraph in it', async () => {
    const subscription = subscribeOverSse(
      gatewayUrl,
      `subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") {
          type
          account { id customer { displayName openSupportNoteCount } }
        }
      }`,
    );
    try {
      // The gateway has subscribed at the facade, which listens from here on.
      await stack.subscriptionsStarted(1);
      const topUp = await fetch(`${stack.emulatorUrl}/v3/sandbox/accounts/acc_acme_eth/topup`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'sk_sandbox_emulator',
          'idempotency-key': `gateway-subscription-${Date.now()}`,
        },
        body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
      });
      expect(topUp.status).toBe(200);

      await waitFor(() => subscription.received.length >= 1, 'the event at the gateway', 15_000);
      const supportNotesCount = await fetch(gatewayUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await bearer('operator')) },
        body: JSON.stringify({ query: '{ customer(id: "cus_acme") { openSupportNoteCount } }' }),
      }).then(
        (response) => response.json() as Promise<{ data: { customer: { openSupportNoteCount: number } } }>,
      );
      // Demo data: cus_acme has open support notes, so the field is a positive count, not a null.
      expect(supportNotesCount.data.customer.openSupportNoteCount).toBeGreaterThan(0);
      expect(subscription.received[0]).toEqual({
        data: {
          accountChanged: {
            type: expect.stringMatching(/^account\./),
            account: {
              id: 'acc_acme_eth',
              customer: {
                displayName: 'Acme Robotics Ltd',
                openSupportNoteCount: supportNotesCount.data.customer.openSupportNoteCount,
              },
            },
          },
        },
      });
    } finally {
      subscription.stop();
      await subscription.done;
    }
  });

  it('refuses a subscription without a token at the gateway', async () => {
    const response = await fetch(gatewayUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { type } }',
      }),
    });
    expect(response.status).toBe(401);
    await response.body?.cancel();
  });

  it("carries each caller's own token: a scoped caller cannot subscribe to another customer through the gateway", async () => {
    // The operator's subscription runs meanwhile: its connection to the facade is not shared.
    const operator = subscribeOverSse(
      gatewayUrl,
      'subscription { accountChanged(customerId: "cus_globex", accountId: "acc_globex_eth") { type } }',
    );
    const acme = subscribeOverSse(
      gatewayUrl,
      'subscription { accountChanged(customerId: "cus_globex", accountId: "acc_globex_eth") { type } }',
      bearer('acme'),
    );
    try {
      await stack.subscriptionsStarted(1);
      await waitFor(() => acme.received.length >= 1, 'the refusal at the gateway', 15_000);
      expect(acme.received[0]).toMatchObject({
        errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) })],
      });
    } finally {
      operator.stop();
      acme.stop();
      await Promise.all([operator.done, acme.done]);
    }
  });
});
