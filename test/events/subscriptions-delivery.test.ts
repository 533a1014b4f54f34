import { signWebhook, generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { describe, expect, test } from 'vitest';
import { tokenFor } from '../support/tokens.ts';
import { LIVE_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { acmeAccountUpdated, postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

// Deliveries are signed here with a secret the facade is configured with (WEBHOOK_SECRETS), so a
// test controls exactly what arrives and when; the resources they name are real emulator records,
// read by the facade with each subscriber's own key.
const secret = generateWebhookSecret();
// Server-side callers may bring their own platform key (one per environment below).
const stack = useStack({ env: { WEBHOOK_SECRETS: secret, AUTH_ALLOW_CALLER_API_KEY: 'true' } });

const ACCOUNT_CHANGED = `subscription {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId account { id } }
}`;

describe('webhook deliveries reaching subscribers', () => {
  test('the same delivery posted twice reaches the subscriber once', async () => {
    const received = stack.connect().subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(1);
    const event = acmeAccountUpdated();
    expect(await postSignedEvent(stack.facade.webhookUrl, secret, event)).toMatchObject({
      status: 200,
      body: { duplicate: false },
    });
    expect(await postSignedEvent(stack.facade.webhookUrl, secret, event)).toMatchObject({
      status: 200,
      body: { duplicate: true },
    });
    // A later event proves nothing else was queued before it.
    const marker = acmeAccountUpdated();
    await postSignedEvent(stack.facade.webhookUrl, secret, marker);
    await waitFor(() => received.data.length >= 2, 'the event and the marker');
    expect(received.data.map((data) => data.accountChanged.eventId)).toEqual([event.id, marker.id]);
    received.stop();
  });

  test('a forged or stale signature is refused with 401 and nothing is published', async () => {
    const received = stack.connect().subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(1);

    const forged = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, generateWebhookSecret(), forged)).status).toBe(
      401,
    );

    const stale = acmeAccountUpdated();
    const body = JSON.stringify(stale);
    const timestamp = Math.floor(Date.now() / 1000) - 3600;
    const response = await fetch(stack.facade.webhookUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': stale.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook({ secret, id: stale.id, timestamp, body }),
      },
      body,
    });
    expect(response.status).toBe(401);

    const marker = acmeAccountUpdated();
    await postSignedEvent(stack.facade.webhookUrl, secret, marker);
    await waitFor(() => received.data.length >= 1, 'the marker');
    expect(received.data.map((data) => data.accountChanged.eventId)).toEqual([marker.id]);
    received.stop();
  });

  test('an event of one environment never reaches a subscriber of the other', async () => {
    const EVENTS = `subscription { events { eventId type resource { ... on Account { id } } } }`;
    const liveSubscriber = stack.connect({ 'X-API-Key': LIVE_KEY }).subscribe(EVENTS);
    const sandboxSubscriber = stack.connect({ apiKey: SANDBOX_KEY }).subscribe(EVENTS);
    await stack.subscriptionsStarted(2);

    // Labelled sandbox but about a live account: the live key could read the account, so only the
    // environment keeps it from the live subscriber; the sandbox key's read is refused (404).
    const sandboxAboutLiveAccount = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_live_northwind',
      resourceType: 'account',
      resourceId: 'acc_live_northwind_eth',
    });
    const liveEvent = {
      ...sandboxAboutLiveAccount,
      id: `${sandboxAboutLiveAccount.id}_live`,
      environment: 'live',
    };
    const sandboxEvent = acmeAccountUpdated();
    for (const event of [sandboxAboutLiveAccount, liveEvent, sandboxEvent]) {
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    }

    await waitFor(
      () => liveSubscriber.data.length >= 1 && sandboxSubscriber.data.length >= 1,
      'one event for each subscriber',
    );
    expect(liveSubscriber.data.map((data) => data.events)).toEqual([
      { eventId: liveEvent.id, type: 'account.updated', resource: { id: 'acc_live_northwind_eth' } },
    ]);
    expect(sandboxSubscriber.data.map((data) => data.events)).toEqual([
      { eventId: sandboxEvent.id, type: 'account.updated', resource: { id: 'acc_acme_eth' } },
    ]);
    liveSubscriber.stop();
    sandboxSubscriber.stop();
  });

  test('an archived document is shown from the event, and only to a subscriber who may read its customer', async () => {
    const DOCUMENTS = `subscription { documentChanged(customerId: "cus_acme") { type documentId document { id status } } }`;
    const received = stack.connect().subscribe(DOCUMENTS);
    await stack.subscriptionsStarted(1);
    const archived = await stack.emulator.rest(
      'DELETE',
      '/v3/customers/cus_acme/documents/doc_acme_ownership',
    );
    expect(archived.status).toBe(200);
    const event = upstreamEvent({
      type: 'document.archived',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'document',
      resourceId: 'doc_acme_ownership',
      object: archived.body.data,
    });
    await postSignedEvent(stack.facade.webhookUrl, secret, event);
    await waitFor(() => received.data.length >= 1, 'documentChanged');
    expect(received.data[0].documentChanged).toEqual({
      type: 'document.archived',
      documentId: 'doc_acme_ownership',
      document: { id: 'doc_acme_ownership', status: 'archived' },
    });
    received.stop();
  });

  test('filters by event kind and customer', async () => {
    const received = stack
      .connect()
      .subscribe(
        `subscription { events(customerId: "cus_acme", types: ["capability.status_changed"]) { eventId resourceId } }`,
      );
    await stack.subscriptionsStarted(1);
    const otherKind = acmeAccountUpdated();
    const otherCustomer = upstreamEvent({
      type: 'capability.status_changed',
      environment: 'sandbox',
      customerId: 'cus_ada',
      resourceType: 'capability',
      resourceId: 'cap_ada_ach',
    });
    const wanted = upstreamEvent({
      type: 'capability.status_changed',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'capability',
      resourceId: 'cap_acme_ach',
    });
    for (const event of [otherKind, otherCustomer, wanted])
      await postSignedEvent(stack.facade.webhookUrl, secret, event);
    await waitFor(() => received.data.length >= 1, 'the wanted event');
    expect(received.data).toEqual([{ events: { eventId: wanted.id, resourceId: 'cap_acme_ach' } }]);
    received.stop();
  });

  test('transferChanged and events show the transfer as it is now, as a Transfer in the union', async () => {
    const transfers = stack
      .connect()
      .subscribe(
        `subscription { transferChanged(customerId: "cus_acme") { eventId type transferId transfer { id state amount } } }`,
      );
    const everything = stack
      .connect()
      .subscribe(
        `subscription { events(customerId: "cus_acme", types: ["transfer.completed"]) { eventId resourceType resource { __typename ... on Transfer { id state } } } }`,
      );
    await stack.subscriptionsStarted(2);
    const completed = upstreamEvent({
      type: 'transfer.completed',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'transfer',
      resourceId: 'trf_acme_payout',
    });
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, completed)).status).toBe(200);
    await waitFor(
      () => transfers.data.length >= 1 && everything.data.length >= 1,
      'the transfer event on both subscriptions',
    );
    expect(transfers.data[0].transferChanged).toEqual({
      eventId: completed.id,
      type: 'transfer.completed',
      transferId: 'trf_acme_payout',
      transfer: { id: 'trf_acme_payout', state: 'completed', amount: '2500.00' },
    });
    expect(everything.data[0].events).toEqual({
      eventId: completed.id,
      resourceType: 'transfer',
      resource: { __typename: 'Transfer', id: 'trf_acme_payout', state: 'completed' },
    });
    expect([...transfers.errors, ...everything.errors]).toEqual([]);
    transfers.stop();
    everything.stop();
  });

  test('a subscription sent over HTTP is told to use graphql-ws', async () => {
    const response = await fetch(`${stack.facade.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await tokenFor('operator')}` },
      body: JSON.stringify({ query: ACCOUNT_CHANGED }),
    });
    const body = (await response.json()) as { errors?: { message: string }[] };
    expect(body.errors?.[0]?.message).toMatch(/graphql-ws|WebSocket|subscription/i);
  });
});
