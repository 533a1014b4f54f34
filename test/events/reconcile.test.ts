/**
 * Missed webhooks: the upstream's deliveries fail until it gives up, a resource changes, and the
 * subscribers of two replicas still receive the change, once, through the reconciliation of the
 * customers they follow (updated-since lists compared with the event log).
 */
import { createServer } from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { SUBSCRIBED_EVENT_KINDS } from '../../src/events/receiving/event-kinds.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { parseExposition, valueOf } from '../support/metrics.ts';

/** A loopback port nothing listens on: every delivery to it is refused. */
async function deadUrl(): Promise<string> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/webhooks/platform`;
}

async function gaveUp(stack: Stack, eventType: string): Promise<string[]> {
  const deliveries = (await (await fetch(`${stack.emulator.url}/_emulator/webhook-deliveries`)).json()) as {
    data: { eventId: string; eventType: string; outcome: string }[];
  };
  return deliveries.data
    .filter((delivery) => delivery.eventType === eventType && delivery.outcome === 'gave_up')
    .map((delivery) => delivery.eventId);
}

async function reconciledTotal(facade: RunningFacade): Promise<number> {
  return valueOf(
    parseExposition(await facade.app.metrics.registry.metrics()),
    'facade_events_reconciled_total',
  );
}

const ACCOUNT = `subscription {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") {
    eventId cursor type occurredAt account { balances { available } }
  }
}`;

describe('a change whose webhook never arrives', () => {
  const stack = useStack({
    facades: 2,
    redis: true,
    // Two attempts 50 ms apart, then the upstream gives up on the delivery.
    emulator: { webhookMaxAttempts: 2 },
    env: { RECONCILE_INTERVAL_SECONDS: '1', RECONCILE_GRACE_SECONDS: '0' },
  });

  test(
    'reaches the subscribers of both replicas once, through the reconciler',
    { timeout: 60_000 },
    async () => {
      const [first, second] = stack.facades as [RunningFacade, RunningFacade];
      const endpoint = await stack.emulator.rest('POST', '/v3/webhooks', {
        body: { url: await deadUrl(), events: SUBSCRIBED_EVENT_KINDS },
      });
      expect(endpoint.status).toBe(201);

      const onFirst = first.connect().subscribe(ACCOUNT);
      const onSecond = second.connect().subscribe(ACCOUNT);
      await first.subscriptionsStarted(1);
      await second.subscriptionsStarted(1);

      const topUp = async (): Promise<void> => {
        const before = (await gaveUp(stack, 'account.updated')).length;
        const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
          body: { amount: '3.00', currency: 'USDC' },
        });
        expect(response.status).toBe(200);
        // The upstream tried, failed, and gave up: no webhook will ever bring this change.
        let after = before;
        await waitFor(
          () => after > before,
          'the upstream to give up the delivery',
          10_000,
          async () => {
            after = (await gaveUp(stack, 'account.updated')).length;
          },
        );
      };

      await topUp();
      await waitFor(
        () => onFirst.data.length === 1 && onSecond.data.length === 1,
        'the reconciled change on both replicas',
        20_000,
      );
      await topUp();
      await waitFor(
        () => onFirst.data.length >= 2 && onSecond.data.length >= 2,
        'the second reconciled change on both replicas',
        20_000,
      );
      // Two more intervals: a change reconciled twice (by the other replica, or by a later run) would show.
      const runs = async () => (await reconciledTotal(first)) + (await reconciledTotal(second));
      const appendedSoFar = await runs();
      await new Promise((resolve) => setTimeout(resolve, 2_500));

      for (const received of [onFirst, onSecond]) {
        expect(received.errors).toEqual([]);
        const events = received.data.map((data) => data.accountChanged);
        expect(events).toHaveLength(2);
        expect(events.map((event) => event.eventId)).toEqual([
          expect.stringMatching(/^reconciled:account:acc_acme_eth:/),
          expect.stringMatching(/^reconciled:account:acc_acme_eth:/),
        ]);
        expect(events[0].eventId).not.toBe(events[1].eventId);
        expect(events.map((event) => event.type)).toEqual(['account.updated', 'account.updated']);
      }
      // Both replicas received the same log entries.
      expect(onSecond.data.map((data) => data.accountChanged.cursor)).toEqual(
        onFirst.data.map((data) => data.accountChanged.cursor),
      );
      // Appended once across the replicas: the top-up's account change (and whatever else of acme's
      // changed with it), and nothing more in the later runs.
      expect(await runs()).toBe(appendedSoFar);
      expect(appendedSoFar).toBeGreaterThanOrEqual(2);
    },
  );
});

describe('a change whose webhook arrives', () => {
  // A grace of a second: the reconciler looks only at changes older than that, by when the
  // webhook (delivered in milliseconds here) is in the log.
  const stack = useStack({
    redis: true,
    env: { WEBHOOK_REGISTER: 'true', RECONCILE_INTERVAL_SECONDS: '1', RECONCILE_GRACE_SECONDS: '1' },
  });

  test('is not appended again by the reconciler', { timeout: 30_000 }, async () => {
    const received = stack.connect().subscribe(ACCOUNT);
    await stack.subscriptionsStarted(1);
    const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '3.00', currency: 'USDC' },
    });
    expect(response.status).toBe(200);
    await waitFor(() => received.data.length === 1, 'the webhook event');
    await stack.resetUpstreamCalls();
    // Three reconciliation runs later, the change was compared with the log and found there.
    await new Promise((resolve) => setTimeout(resolve, 3_500));
    // The reconciler did run meanwhile: it read the upstream's list of acme's accounts.
    expect(Object.keys((await stack.upstreamCalls()).byRoute)).toContainEqual(
      expect.stringMatching(/^GET \S*\/accounts$/),
    );
    expect(received.data.map((data) => data.accountChanged.eventId)).toEqual([
      expect.stringMatching(/^evt_/),
    ]);
    expect(await reconciledTotal(stack.facade)).toBe(0);
  });
});
