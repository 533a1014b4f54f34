/**
 * A caller flooding graphql-ws with subscriptions: every subscription that hears an event costs a
 * queue, an execution and a message (the upstream read is shared by the subscribers that read
 * alike), so each subscription a caller adds multiplies the facade's work on its customer's
 * events. The operations one caller runs at once are capped (RATE_LIMIT_SUBSCRIPTIONS), over all
 * its connections; other callers keep their own.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { tokenFor } from '../support/tokens.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
const stack = useStack({ env: { WEBHOOK_SECRETS: secret, RATE_LIMIT_SUBSCRIPTIONS: '2' } });

const ACCOUNT_CHANGED = 'subscription { accountChanged(customerId: "cus_acme") { accountId } }';

async function upstreamTotal(): Promise<number> {
  const calls = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as { total: number };
  return calls.total;
}

describe('a caller over its running-subscription cap', () => {
  test('is refused another subscription on any connection, and its running ones share one read', async () => {
    const acme = { Authorization: `Bearer ${await tokenFor('acme')}` };
    const firstConnection = stack.connect(acme);
    const first = firstConnection.subscribe(ACCOUNT_CHANGED);
    const second = stack.connect(acme).subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(2);

    const third = firstConnection.subscribe(ACCOUNT_CHANGED);
    await waitFor(
      () => third.errors.length > 0 || stack.facade.lifecycle.count('subscriptionStarted') >= 3,
      'the third subscribe',
    );
    expect(third.errors).toEqual([
      [
        expect.objectContaining({
          message: expect.stringMatching(/already runs 2 operations over graphql-ws/),
          extensions: { code: 'RATE_LIMITED' },
        }),
      ],
    ]);

    // Another caller has its own cap.
    const operator = stack.connect().subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(1);
    await fetch(`${stack.emulator.url}/_emulator/requests`, { method: 'DELETE' });
    const event = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    await waitFor(
      () => first.data.length >= 1 && second.data.length >= 1 && operator.data.length >= 1,
      'the event on every running subscription',
    );
    // One read per group that reads alike: acme's two subscriptions share one, the operator has its own.
    expect(await upstreamTotal()).toBe(2);

    // Once one ends, the caller may start another.
    first.stop();
    await stack.subscriptionsCompleted(1);
    const again = firstConnection.subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(1);
    expect(again.errors).toEqual([]);
  });
});
