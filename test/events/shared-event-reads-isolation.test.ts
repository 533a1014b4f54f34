/**
 * What sharing an event's reads must never change: a subscriber receives what its own read would
 * have returned, whatever the other subscribers of its group ask for. The per-event limits (the
 * upstream call budget) are those of each operation, not a pool another subscriber can drain.
 */
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { issuerSignedToken } from '../support/tokens.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import type { Received } from '../support/harness/live-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
// Three calls per event: enough for either document below alone (the account, its customer, one list).
const stack = useStack({ env: { WEBHOOK_SECRETS: secret, UPSTREAM_MAX_CALLS_PER_OPERATION: '3' } });

const WITH_ACCOUNTS = `subscription {
  accountChanged(customerId: "cus_acme") { account { id customer { id accounts(first: 5) { nodes { id } } } } }
}`;
const WITH_RELATED_PARTIES = `subscription {
  accountChanged(customerId: "cus_acme") { account { id customer { id relatedParties(first: 5) { nodes { id } } } } }
}`;

const running: (Received & { stop(): void })[] = [];
afterEach(async () => {
  const stopping = running.splice(0);
  for (const subscription of stopping) subscription.stop();
  await stack.subscriptionsCompleted(stopping.length);
});

async function subscribeAs(subject: string, query: string) {
  const token = await issuerSignedToken({ sub: subject, customer_ids: ['cus_acme'] });
  const subscription = stack.connect({ Authorization: `Bearer ${token}` }).subscribe(query);
  running.push(subscription);
  await stack.subscriptionsStarted(1);
  return subscription;
}

async function accountUpdated(subscriptions: Received[]): Promise<void> {
  const before = subscriptions.map((subscription) => subscription.data.length + subscription.errors.length);
  const event = upstreamEvent({
    type: 'account.updated',
    environment: 'sandbox',
    customerId: 'cus_acme',
    resourceType: 'account',
    resourceId: 'acc_acme_eth',
  });
  expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
  await waitFor(
    () =>
      subscriptions.every(
        (subscription, index) => subscription.data.length + subscription.errors.length > before[index]!,
      ),
    'the event on every subscription',
  );
}

describe('a subscriber of a group cannot spend what another subscriber’s read needs', () => {
  test('each document alone stays within the call budget', async () => {
    for (const query of [WITH_ACCOUNTS, WITH_RELATED_PARTIES]) {
      const alone = await subscribeAs('acme-alone', query);
      await stack.resetUpstreamCalls();
      await accountUpdated([alone]);
      expect((await stack.upstreamCalls()).total).toBe(3);
      expect(alone.errors).toEqual([]);
      alone.stop();
      running.splice(running.indexOf(alone), 1);
      await stack.subscriptionsCompleted(1);
    }
  });

  test('two documents of one scope on the same event each get their whole payload', async () => {
    const accounts = await subscribeAs('acme-user-1', WITH_ACCOUNTS);
    const relatedParties = await subscribeAs('acme-user-2', WITH_RELATED_PARTIES);
    await stack.resetUpstreamCalls();

    await accountUpdated([accounts, relatedParties]);

    for (const subscription of [accounts, relatedParties]) {
      expect(subscription.errors).toEqual([]);
    }
    expect(accounts.data.at(-1)).toMatchObject({
      accountChanged: { account: { customer: { accounts: { nodes: expect.any(Array) } } } },
    });
    expect(relatedParties.data.at(-1)).toMatchObject({
      accountChanged: { account: { customer: { relatedParties: { nodes: expect.any(Array) } } } },
    });
  });
});
