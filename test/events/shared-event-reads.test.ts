/**
 * One upstream read per event per group of subscribers that read alike (the same upstream key and
 * the same scope), counted at the emulator: many subscribers of one group cost what one costs,
 * whatever documents they sent, each group reads for itself, and every subscriber still receives
 * its own payload.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import type { Received } from '../support/harness/live-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
const stack = useStack({ env: { WEBHOOK_SECRETS: secret } });

const ACCOUNT_WITH_FEES = `subscription {
  accountChanged(customerId: "cus_acme") {
    accountId
    account { id balances { available } fees { breakdown { developer { bips } } } }
  }
}`;
const ACCOUNT_ID_ONLY =
  'subscription { accountChanged(customerId: "cus_acme") { accountId account { id } } }';

/** Posts an `account.updated` of acme's ETH account and waits until every subscription has it. */
async function accountUpdated(subscriptions: Received[]): Promise<void> {
  const before = subscriptions.map((subscription) => subscription.data.length);
  const event = acmeAccountUpdated();
  expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
  await waitFor(
    () => subscriptions.every((subscription, index) => subscription.data.length > before[index]!),
    'the event on every subscription',
  );
}

/** Every subscription a test starts, stopped after it so the next test's counts are its own. */
const running: (Received & { stop(): void })[] = [];
function subscribe(connectionParams: Record<string, unknown>, query: string) {
  const subscription = stack.connect(connectionParams).subscribe(query);
  running.push(subscription);
  return subscription;
}
afterEach(async () => {
  const stopping = running.splice(0);
  for (const subscription of stopping) subscription.stop();
  await stack.subscriptionsCompleted(stopping.length);
});

const bearerOf = async (token: Promise<string>) => ({ Authorization: `Bearer ${await token}` });

describe('subscribers that read alike share each event’s reads', () => {
  test('five subscriptions in two groups make the reads of two, and each receives the whole payload', async () => {
    const operator = await bearerOf(tokenFor('operator'));
    const acme = await bearerOf(tokenFor('acme'));
    const operators = [1, 2, 3].map(() => subscribe(operator, ACCOUNT_WITH_FEES));
    const acmes = [1, 2].map(() => subscribe(acme, ACCOUNT_WITH_FEES));
    await stack.subscriptionsStarted(5);
    await stack.resetUpstreamCalls();

    await accountUpdated([...operators, ...acmes]);

    // The account (its fees come with it), once for the operators' group and once for acme's.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
    });
    const payloads = [...operators, ...acmes].map((subscription) => subscription.data.at(-1));
    for (const payload of payloads) {
      expect(payload).toMatchObject({
        accountChanged: {
          accountId: 'acc_acme_eth',
          account: {
            id: 'acc_acme_eth',
            balances: expect.any(Array),
            fees: { breakdown: expect.any(Object) },
          },
        },
      });
      expect(payload).toEqual(payloads[0]);
    }
    for (const subscription of [...operators, ...acmes]) expect(subscription.errors).toEqual([]);
  });

  test('callers with other subjects but the same scope share; a wider scope reads for itself', async () => {
    // Two different subjects scoped to cus_acme alone, and one scoped to two customers.
    // (The first two have the scope of the `acme` test client too: one group with it.)
    const first = await bearerOf(issuerSignedToken({ sub: 'acme-user-1', customer_ids: ['cus_acme'] }));
    const second = await bearerOf(issuerSignedToken({ sub: 'acme-user-2', customer_ids: ['cus_acme'] }));
    const wider = await bearerOf(
      issuerSignedToken({ sub: 'acme-and-globex', customer_ids: ['cus_acme', 'cus_globex'] }),
    );
    const subscriptions = [
      subscribe(first, ACCOUNT_ID_ONLY),
      subscribe(second, ACCOUNT_ID_ONLY),
      subscribe(wider, ACCOUNT_ID_ONLY),
    ];
    await stack.subscriptionsStarted(3);
    await stack.resetUpstreamCalls();

    await accountUpdated(subscriptions);

    expect(await stack.upstreamCalls()).toMatchObject({
      total: 2,
      byRoute: { 'GET /v3/customers/{customerId}/accounts/{accountId}': 2 },
    });
    for (const subscription of subscriptions) {
      expect(subscription.data.at(-1)).toEqual({
        accountChanged: { accountId: 'acc_acme_eth', account: { id: 'acc_acme_eth' } },
      });
    }
  });

  test('different documents in one group share the reads, each getting its own selection', async () => {
    // Each keeps its own context and call budget (another document could spend them), and the
    // group's GET answers are shared between them.
    const operator = await bearerOf(tokenFor('operator'));
    const full = subscribe(operator, ACCOUNT_WITH_FEES);
    const idOnly = subscribe(operator, ACCOUNT_ID_ONLY);
    await stack.subscriptionsStarted(2);
    await stack.resetUpstreamCalls();

    await accountUpdated([full, idOnly]);

    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
    });
    expect(idOnly.data.at(-1)).toEqual({
      accountChanged: { accountId: 'acc_acme_eth', account: { id: 'acc_acme_eth' } },
    });
    expect(full.data.at(-1)).toMatchObject({ accountChanged: { account: { fees: expect.any(Object) } } });
  });

  test('each event is read afresh: a second event makes its own reads', async () => {
    const operator = await bearerOf(tokenFor('operator'));
    const subscriptions = [1, 2].map(() => subscribe(operator, ACCOUNT_ID_ONLY));
    await stack.subscriptionsStarted(2);
    await stack.resetUpstreamCalls();

    await accountUpdated(subscriptions);
    await accountUpdated(subscriptions);

    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
    });
    for (const subscription of subscriptions) {
      expect(subscription.data).toHaveLength(2);
    }
  });
});
