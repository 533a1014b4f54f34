/**
 * One event, many subscriptions of one caller: each execution gets its document's cost-derived call
 * budget, and the caller's executions of one event share one pool of UPSTREAM_MAX_CALLS_PER_OPERATION
 * calls, so subscribing 200 times with reads that share nothing cannot turn one event into
 * thousands of upstream calls (docs/security.md, "Live operations").
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const secret = generateWebhookSecret();
const MAX_CALLS = 40;
const stack = useStack({
  env: { WEBHOOK_SECRETS: secret, UPSTREAM_MAX_CALLS_PER_OPERATION: String(MAX_CALLS) },
});

const LISTS = 15;
const variables = Array.from({ length: LISTS }, (_, j) => `$t${j}: DateTime`).join(', ');
const lists = Array.from(
  { length: LISTS },
  (_, j) => `a${j}: accounts(first: 1, updatedSince: $t${j}) { nodes { id } }`,
).join(' ');
const FIFTEEN_LISTS = `subscription Amplify(${variables}) {
  accountChanged(customerId: "cus_acme") { account { customer { ${lists} } } }
}`;

describe('200 subscriptions of one caller, each with 15 lists of its own, and one event', () => {
  test('cost the upstream at most the per-event bound, and every subscription still hears the event', async () => {
    const acme = { Authorization: `Bearer ${await tokenFor('acme')}` };
    const subscriptions: ReturnType<ReturnType<typeof stack.connect>['subscribe']>[] = [];
    for (let connection = 0; connection < 4; connection += 1) {
      const live = stack.connect(acme);
      for (let i = 0; i < 50; i += 1) {
        const n = connection * 50 + i;
        const since = Object.fromEntries(
          Array.from({ length: LISTS }, (_, j) => [
            `t${j}`,
            new Date(Date.UTC(2020, 0, 1) + (n * LISTS + j) * 1000).toISOString(),
          ]),
        );
        subscriptions.push(live.subscribe(FIFTEEN_LISTS, since));
      }
    }
    await stack.subscriptionsStarted(200);
    await stack.resetUpstreamCalls();

    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    await waitFor(
      () => subscriptions.every((received) => received.data.length + received.errors.length >= 1),
      'the event on every subscription',
    );

    // Without the shared pool: 200 × (15 lists) distinct reads, about 3,000 calls.
    const calls = (await stack.upstreamCalls()).total;
    expect(calls).toBeGreaterThan(0);
    expect(calls).toBeLessThanOrEqual(MAX_CALLS);
    for (const received of subscriptions) received.stop();
    await stack.subscriptionsCompleted(200);
  });
});
