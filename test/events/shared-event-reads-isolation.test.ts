/**
 * What sharing an event's reads must never change: a subscriber receives what its own read would
 * have returned, whatever the other subscribers of its group ask for. The per-event limits (the
 * upstream call budget) are those of each operation, not a pool another subscriber can drain.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';
import { acmeAccountUpdated, postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
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

async function subscribeAs(subject: string, query: string, variables?: Record<string, unknown>) {
  const token = await issuerSignedToken({ sub: subject, customer_ids: ['cus_acme'] });
  const subscription = stack.connect({ Authorization: `Bearer ${token}` }).subscribe(query, variables);
  running.push(subscription);
  await stack.subscriptionsStarted(1);
  return subscription;
}

async function accountUpdated(subscriptions: Received[]): Promise<void> {
  const before = subscriptions.map((subscription) => subscription.data.length + subscription.errors.length);
  const event = acmeAccountUpdated();
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
    // The account and the customer read once between them, each list by the one that asked: each
    // document was charged its own three calls, the upstream served four.
    expect((await stack.upstreamCalls()).total).toBe(4);
  });

  test('a shared answer still counts against the budget of the operation that uses it', async () => {
    // Four calls alone (the account, its customer, two lists): over the budget of three.
    const both = `subscription {
      accountChanged(customerId: "cus_acme") { account { id customer { id
        accounts(first: 5) { nodes { id } } relatedParties(first: 5) { nodes { id } } } } }
    }`;
    const accounts = await subscribeAs('acme-user-1', WITH_ACCOUNTS);
    const greedy = await subscribeAs('acme-user-2', both);
    await stack.resetUpstreamCalls();

    await accountUpdated([accounts, greedy]);

    expect(accounts.errors).toEqual([]);
    // Its reads of the account and the customer came from the other's answers, and were counted.
    expect(greedy.data.at(-1)).toMatchObject({
      accountChanged: { account: { customer: { id: 'cus_acme' } } },
    });
    expect(greedy.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'TOO_MANY_UPSTREAM_CALLS' }) }),
    ]);
  });
});

const FEES_IF = `subscription ($withFees: Boolean!) {
  accountChanged(customerId: "cus_acme") { account { id fees @include(if: $withFees) { breakdown { developer { bips } } } } }
}`;

describe('what decides that two subscriptions share an execution', () => {
  test('the same text with other variables is executed for itself; the same variables share', async () => {
    const withFees = await subscribeAs('acme-user-1', FEES_IF, { withFees: true });
    const withoutFees = await subscribeAs('acme-user-2', FEES_IF, { withFees: false });
    const alsoWithFees = await subscribeAs('acme-user-3', FEES_IF, { withFees: true });
    await stack.resetUpstreamCalls();

    await accountUpdated([withFees, withoutFees, alsoWithFees]);

    expect(withFees.data.at(-1)).toEqual({
      accountChanged: { account: { id: 'acc_acme_eth', fees: { breakdown: expect.any(Object) } } },
    });
    expect(alsoWithFees.data.at(-1)).toEqual(withFees.data.at(-1));
    expect(withoutFees.data.at(-1)).toEqual({ accountChanged: { account: { id: 'acc_acme_eth' } } });
    // One read between the three: the other variables run their own execution on the shared answer.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
    });
  });
});

describe('a closed connection leaves nothing listening', () => {
  test('after its client disconnects, a subscription hears and reads none of the events that follow', async () => {
    // Subscribed first: while it listened, its read of an event went out before the operator's.
    const leaving = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    leaving.subscribe('subscription { accountChanged(customerId: "cus_acme") { account { id } } }');
    await stack.subscriptionsStarted(1);
    // Another group (the operator), so it shares nothing with the one that leaves.
    const operator = stack
      .connect()
      .subscribe('subscription { accountChanged(customerId: "cus_acme") { account { id } } }');
    running.push(operator);
    await stack.subscriptionsStarted(1);
    await leaving.dispose();
    await stack.subscriptionsCompleted(1);
    await stack.resetUpstreamCalls();

    await accountUpdated([operator]);
    await accountUpdated([operator]);

    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
    });
  });
});

describe('the subscriber that made a shared read cannot take it from the others', () => {
  test('when it disconnects while the read is in flight, the others of its group still get the payload', async () => {
    const query = 'subscription { accountChanged(customerId: "cus_acme") { account { id label } } }';
    const first = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    first.subscribe(query);
    await stack.subscriptionsStarted(1);
    const staying = await subscribeAs('acme-user-2', query);
    await stack.setFaults({ latency: { fixedMs: 300, jitterMs: 0 } });
    try {
      await stack.resetUpstreamCalls();
      const event = acmeAccountUpdated();
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
      // The shared read has reached the upstream; the subscriber that started it leaves.
      // (The emulator counts a request when it arrives, before the added latency.)
      while ((await stack.upstreamCalls()).total === 0) await nextTurn();
      await first.dispose();
      await waitFor(() => staying.data.length + staying.errors.length > 0, 'the payload');
    } finally {
      await stack.clearFaults();
    }
    expect(staying.errors).toEqual([]);
    expect(staying.data).toEqual([
      { accountChanged: { account: { id: 'acc_acme_eth', label: expect.any(String) } } },
    ]);
    expect((await stack.upstreamCalls()).total).toBe(1);
    await stack.subscriptionsCompleted(1);
  });
});

describe('the parsed documents kept by text', () => {
  test('a text already accepted is checked again with each subscribe’s own variables', async () => {
    // The first subscribe leaves the document parsed and kept; what depends on the variables is
    // still checked for every subscribe, not remembered with the text.
    const query = 'subscription ($id: ID!) { accountChanged(customerId: $id) { account { id } } }';
    const live = stack.connect();
    const valid = live.subscribe(query, { id: 'cus_acme' });
    running.push(valid);
    await stack.subscriptionsStarted(1);
    const malformed = live.subscribe(query, { id: '\udfffcus' });
    await malformed.done;

    expect(malformed.errors.flat()).toEqual([
      expect.objectContaining({
        message: 'Variable "$id" holds a lone UTF-16 surrogate; strings must be well-formed Unicode.',
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    expect(valid.errors).toEqual([]);
  });
});

describe('subscribers of other scopes on one event', () => {
  test('`events` of every customer: each scope hears and reads what it may, whoever read first', async () => {
    const query = `subscription {
      events { customerId resource { ... on Account { id customer { id displayName } } } }
    }`;
    const operator = stack.connect().subscribe(query);
    running.push(operator);
    await stack.subscriptionsStarted(1);
    const acme = await subscribeAs('acme-user-1', query);
    const wideToken = await issuerSignedToken({
      sub: 'acme-and-globex',
      customer_ids: ['cus_acme', 'cus_globex'],
    });
    const wide = stack.connect({ Authorization: `Bearer ${wideToken}` }).subscribe(query);
    running.push(wide);
    await stack.subscriptionsStarted(1);
    await stack.resetUpstreamCalls();

    const globexEvent = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_globex',
      resourceType: 'account',
      resourceId: 'acc_globex_eth',
    });
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, globexEvent)).status).toBe(200);
    await waitFor(() => operator.data.length === 1 && wide.data.length === 1, 'the globex event');
    // Then one of acme's, which every one of them hears: acme heard nothing before it.
    await accountUpdated([operator, acme, wide]);

    const globexPayload = {
      events: {
        customerId: 'cus_globex',
        resource: { id: 'acc_globex_eth', customer: { id: 'cus_globex', displayName: expect.any(String) } },
      },
    };
    expect(operator.data[0]).toEqual(globexPayload);
    expect(wide.data[0]).toEqual(globexPayload);
    expect(acme.data).toHaveLength(1);
    expect(acme.data[0]).toMatchObject({
      events: { customerId: 'cus_acme', resource: { id: 'acc_acme_eth' } },
    });
    for (const subscription of [operator, acme, wide]) expect(subscription.errors).toEqual([]);
    // Each group read for itself: the globex account and customer twice, acme's three times.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 5,
      'GET /v3/customers/{customerId}': 5,
    });
  });
});
