/**
 * Subscriptions over Apollo's HTTP callback protocol, spoken to the facade as a gateway speaks it:
 * the subscription POSTed with `Accept: application/json;callbackSpec=1.0` and
 * `extensions.subscription`, and a real callback endpoint on loopback (a gateway's) that records
 * every request and answers as each test says. The protocol as written (`check` before the answer,
 * `next` with the event's cursor, heartbeats, `complete`), a 404 that ends it, the token's expiry,
 * and the emulator's counts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  callbackExtension,
  startCallbackReceiver,
  subscribeByCallback,
  TAKE,
  UNKNOWN,
  type CallbackReceiver,
} from '../support/harness/callback-receiver.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { liveGauges } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';

const ACCOUNT = `subscription Account {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId type }
}`;

let receiver: CallbackReceiver;
let stack: Stack;

beforeAll(async () => {
  receiver = await startCallbackReceiver();
  stack = await startStack({
    env: { WEBHOOK_REGISTER: 'true', SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `${receiver.url}/callback/` },
  });
  // The facade key's environment learnt once (the first live connection asks the upstream), so
  // each test counts only its own calls.
  const watching = stack.connect().subscribe(ACCOUNT);
  await stack.subscriptionsStarted(1);
  watching.stop();
  await stack.subscriptionsCompleted(1);
});

afterAll(async () => {
  await stack?.close();
  await receiver?.close();
});

beforeEach(async () => {
  receiver.answerWith(TAKE);
  receiver.received.length = 0;
  await stack.resetUpstreamCalls();
});

const operator = async () => ({ authorization: `Bearer ${await tokenFor('operator')}` });
const topUp = async () => {
  const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '2.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};
const callbackGauges = () => liveGauges(stack, 'callback');
const actions = (id: string) =>
  receiver.received.filter((request) => request.body.id === id).map((request) => request.body.action);

describe('subscriptions over the HTTP callback protocol', () => {
  test('a check before the answer, each event as a `next` with its cursor, in order', async () => {
    const subscription = callbackExtension(receiver.url);
    const answer = await subscribeByCallback(stack.graphqlUrl, await operator(), ACCOUNT, subscription);
    expect(answer).toEqual({ status: 200, protocol: 'callback/1.0', body: { data: null } });
    // The check came first, and was answered before the POST was.
    expect(receiver.received).toHaveLength(1);
    const [check] = receiver.received;
    expect(check).toMatchObject({
      path: `/callback/${subscription.subscriptionId}`,
      body: {
        kind: 'subscription',
        action: 'check',
        id: subscription.subscriptionId,
        verifier: subscription.verifier,
      },
    });
    expect(check!.headers['content-type']).toBe('application/json');
    expect(check!.headers['subscription-protocol']).toBe('callback/1.0');
    await stack.subscriptionsStarted(1);
    expect(await callbackGauges()).toEqual({ connections: 1, subscriptions: 1 });

    for (let made = 0; made < 3; made += 1) await topUp();
    await waitFor(
      () => actions(subscription.subscriptionId).filter((a) => a === 'next').length === 3,
      'three events',
    );
    const nexts = receiver.received.filter((request) => request.body.action === 'next');
    const cursors = nexts.map((request) => request.body.payload?.extensions?.cursor ?? '');
    for (const cursor of cursors) expect(cursor).toMatch(/^\d+-\d+$/);
    // In the log's order, each once.
    expect([...cursors].sort(compareCursors)).toEqual(cursors);
    expect(new Set(cursors).size).toBe(3);
    expect(nexts[0]!.body.payload).toMatchObject({ data: { accountChanged: { type: 'account.updated' } } });
    expect(nexts.every((request) => request.body.verifier === subscription.verifier)).toBe(true);

    // The gateway forgets it: the next message is answered 404, and the facade ends its side with nothing more.
    receiver.answerWith(UNKNOWN);
    await topUp();
    await stack.subscriptionsCompleted(1);
    const after = receiver.received.length;
    await topUp();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.length).toBe(after);
    expect(await callbackGauges()).toEqual({ connections: 0, subscriptions: 0 });
  });

  test('a quiet subscription sends a check every half heartbeat interval; one the gateway does not know ends', async () => {
    const subscription = callbackExtension(receiver.url, 1_000);
    expect(
      (await subscribeByCallback(stack.graphqlUrl, await operator(), ACCOUNT, subscription)).status,
    ).toBe(200);
    await stack.subscriptionsStarted(1);
    await waitFor(() => actions(subscription.subscriptionId).length >= 4, 'three heartbeats after the check');
    const times = receiver.received.map((request) => request.at);
    const gaps = times.slice(1).map((at, index) => at - times[index]!);
    // Half the interval, never as late as the whole of it (the gateway's own deadline).
    for (const gap of gaps) expect(gap).toBeLessThan(1_000);
    expect(actions(subscription.subscriptionId).every((action) => action === 'check')).toBe(true);

    const answeredAt = Date.now();
    receiver.answerWith(UNKNOWN);
    await stack.subscriptionsCompleted(1);
    // Within one heartbeat interval of the gateway forgetting it.
    expect(Date.now() - answeredAt).toBeLessThan(1_000 + 500);
  });

  test(
    'the token’s expiry ends it with a `complete` carrying UNAUTHENTICATED',
    { timeout: 30_000 },
    async () => {
      const token = await issuerSignedToken({
        sub: 'expiring-gateway-user',
        exp: Math.floor(Date.now() / 1000) + 3,
      });
      const subscription = callbackExtension(receiver.url);
      const answer = await subscribeByCallback(
        stack.graphqlUrl,
        { authorization: `Bearer ${token}` },
        ACCOUNT,
        subscription,
      );
      expect(answer.status).toBe(200);
      await stack.subscriptionsStarted(1);
      await stack.subscriptionsCompleted(1);
      const last = receiver.received.at(-1)!;
      expect(last.body.action).toBe('complete');
      expect(last.body.errors?.map((error) => error.extensions?.code)).toEqual(['UNAUTHENTICATED']);
      expect(await callbackGauges()).toEqual({ connections: 0, subscriptions: 0 });
    },
  );

  test('a check the gateway does not take refuses the subscription, and it never listens', async () => {
    receiver.answerWith(UNKNOWN);
    const subscription = callbackExtension(receiver.url);
    const answer = await subscribeByCallback(stack.graphqlUrl, await operator(), ACCOUNT, subscription);
    expect(answer.status).toBe(400);
    expect(answer.body.errors?.[0]?.message).toContain('did not confirm the subscription');
    expect(actions(subscription.subscriptionId)).toEqual(['check']);
    expect(await callbackGauges()).toEqual({ connections: 0, subscriptions: 0 });
    expect((await stack.upstreamCalls()).byRoute).toEqual({});
  });

  test('another customer’s subscription is answered with its error after the check, and nothing else is called back', async () => {
    const subscription = callbackExtension(receiver.url);
    const answer = await subscribeByCallback(
      stack.graphqlUrl,
      { authorization: `Bearer ${await tokenFor('acme')}` },
      'subscription { accountChanged(customerId: "cus_globex") { eventId } }',
      subscription,
    );
    expect(answer.status).toBe(200);
    expect(answer.body.errors?.map((error) => error.extensions?.code)).toEqual(['NOT_FOUND']);
    expect(actions(subscription.subscriptionId)).toEqual(['check']);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

/** Orders two `<ms>-<seq>` cursors as the log does. */
function compareCursors(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? Number(as - bs) : am < bm ? -1 : 1;
}
