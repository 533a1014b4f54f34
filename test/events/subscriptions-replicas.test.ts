import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import type { RunningEmulator } from '../support/harness/emulator.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

let stack: Stack;
let emulator: RunningEmulator;
let first: RunningFacade;
let second: RunningFacade;
// Also accepted by both replicas, so a test can deliver to one of them only.
const testSecret = generateWebhookSecret();

beforeAll(async () => {
  // Each replica registers its own URL, so the upstream delivers every event to both: the shared
  // de-duplication store must let only one of them publish it.
  stack = await startStack({
    facades: 2,
    redis: true,
    env: { WEBHOOK_REGISTER: 'true', WEBHOOK_SECRETS: testSecret },
  });
  ({ emulator } = stack);
  [first, second] = stack.facades as [RunningFacade, RunningFacade];
});

afterAll(async () => {
  await stack?.close();
});

/**
 * Publishes one more event through the first replica and returns its id. Every publication
 * acknowledged before it reaches a subscriber before it (one Redis channel keeps order), so once
 * the marker arrived a duplicate would have arrived too: no waiting on a guessed delay.
 */
async function publishMarker(
  fields: Omit<Parameters<typeof upstreamEvent>[0], 'environment'>,
): Promise<string> {
  const marker = upstreamEvent({ ...fields, environment: 'sandbox' });
  expect((await postSignedEvent(first.webhookUrl, testSecret, marker)).status).toBe(200);
  return marker.id;
}

describe('two facade instances sharing one Redis', () => {
  test('a webhook received by the instances reaches a subscriber of the other exactly once', async () => {
    const client = second.connect();
    const received = client.subscribe(`subscription {
      accountChanged(customerId: "cus_ada", accountId: "acc_ada_polygon") { eventId account { balances { available } } }
    }`);
    await second.subscriptionsStarted(1);

    const topUp = await emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '5.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);

    await waitFor(() => received.data.length >= 1, 'the event through Redis');
    const eventId = received.data[0].accountChanged.eventId as string;
    // One delivery per replica's endpoint; both end acknowledged (one published it, the other found
    // it published, possibly after a 409 and a retry). Only then is the count final.
    let acknowledged = 0;
    await waitFor(
      () => acknowledged === 2,
      'both replicas to acknowledge the event',
      15_000,
      async () => {
        const deliveries = (await (await fetch(`${emulator.url}/_emulator/webhook-deliveries`)).json()) as {
          data: { eventId: string; outcome: string }[];
        };
        acknowledged = deliveries.data.filter(
          (delivery) => delivery.eventId === eventId && delivery.outcome === 'delivered',
        ).length;
      },
    );
    const marker = await publishMarker({
      type: 'account.updated',
      customerId: 'cus_ada',
      resourceType: 'account',
      resourceId: 'acc_ada_polygon',
    });
    await waitFor(() => received.data.length >= 2, 'the marker event');
    expect(received.data).toEqual([
      { accountChanged: { eventId, account: { balances: [{ available: '2005.00' }] } } },
      { accountChanged: { eventId: marker, account: { balances: [{ available: '2005.00' }] } } },
    ]);
    received.stop();
  });

  test('a webhook received by one instance only reaches a subscriber of the other, once', async () => {
    const client = second.connect();
    const received = client.subscribe(
      `subscription { events(customerId: "cus_globex") { eventId resourceId } }`,
    );
    await second.subscriptionsStarted(2);

    const event = upstreamEvent({
      type: 'capability.status_changed',
      environment: 'sandbox',
      customerId: 'cus_globex',
      resourceType: 'capability',
      resourceId: 'cap_globex_ach',
    });
    expect((await postSignedEvent(first.webhookUrl, testSecret, event)).status).toBe(200);
    // Redelivered to the other replica: already published, so acknowledged without publishing.
    expect(await postSignedEvent(second.webhookUrl, testSecret, event)).toMatchObject({
      status: 200,
      body: { duplicate: true },
    });
    const marker = await publishMarker({
      type: 'capability.status_changed',
      customerId: 'cus_globex',
      resourceType: 'capability',
      resourceId: 'cap_globex_ach',
    });
    await waitFor(() => received.data.length >= 2, 'the marker event');
    expect(received.data).toEqual([
      { events: { eventId: event.id, resourceId: 'cap_globex_ach' } },
      { events: { eventId: marker, resourceId: 'cap_globex_ach' } },
    ]);
    received.stop();
  });
});
