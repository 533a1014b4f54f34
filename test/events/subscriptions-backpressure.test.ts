import { describe, expect, test } from 'vitest';
import { parseExposition, valueOf } from '../support/metrics.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const QUEUE_LIMIT = 2;
// How long the slow subscriber's stalled read lasts: the facade's upstream timeout.
const STALL_MS = 6_000;

const stack = useStack({
  env: {
    WEBHOOK_REGISTER: 'true',
    SUBSCRIPTION_QUEUE_LIMIT: String(QUEUE_LIMIT),
    UPSTREAM_HEADERS_TIMEOUT_MS: String(STALL_MS),
    UPSTREAM_RETRY_MAX_ATTEMPTS: '1',
  },
});

describe('slow subscribers', () => {
  test(
    'a slow subscriber does not delay a fast one, and when it overflows it is told where to resume, then completed',
    { timeout: 40_000 },
    async () => {
      const slowClient = stack.connect();
      const fastClient = stack.connect();
      const slow = slowClient.subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId cursor account { customer { displayName } } }
      }`);
      const fast = fastClient.subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId occurredAt account { balances { available } } }
      }`);
      await stack.subscriptionsStarted(2);
      // The slow subscriber selects the account's customer; the first customer read after both
      // subscribed (each reads its customer once at subscribe time) stalls in the upstream, so its
      // first event takes STALL_MS while the next ones pile up in its queue.
      await fetch(`${stack.emulator.url}/_emulator/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          latency: { fixedMs: 0, jitterMs: 0 },
          rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'stall', rate: 1, times: 1 }],
        }),
      });

      const topUps = QUEUE_LIMIT + 2;
      for (let i = 0; i < topUps; i += 1) {
        const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
          body: { amount: '1.00', currency: 'USDC' },
        });
        expect(topUp.status).toBe(200);
      }

      await waitFor(() => fast.data.length === topUps, 'the fast subscriber to receive every top-up');
      // Still inside its stalled read: nothing has reached the slow subscriber yet.
      expect(slow.data).toEqual([]);
      // Each event shows the account as it is when read, so the last read shows every top-up.
      const balances = fast.data.map((data) => data.accountChanged.account.balances[0].available).sort();
      expect(balances.at(-1)).toBe('12504.00');

      await slow.done;
      // It gets the event it was reading (its stalled field null with an error), then the overflow notice.
      expect(slow.data).toHaveLength(1);
      expect(slow.data[0].accountChanged.account).toEqual({ customer: null });
      expect(slow.errors.map((error) => error.extensions?.code)).toEqual([
        'UPSTREAM_UNAVAILABLE',
        'SUBSCRIPTION_OVERFLOW',
      ]);
      const overflow = slow.errors.find((error) => error.extensions?.code === 'SUBSCRIPTION_OVERFLOW');
      const undelivered = fast.data
        .map((data) => data.accountChanged)
        .filter((event) => event.eventId !== slow.data[0].accountChanged.eventId);
      expect(overflow).toMatchObject({
        message: expect.stringMatching(/fell more than 2 events behind.*"after"/),
        extensions: {
          limit: QUEUE_LIMIT,
          dropped: topUps - 1,
          resumeSince: undelivered.map((event) => event.occurredAt).sort()[0],
          // The last event it was handed: resuming after it gives exactly the dropped ones.
          resumeAfter: slow.data[0].accountChanged.cursor,
        },
      });
      expect(slow.completed).toBe(true);
      expect(fast.completed).toBe(false);
      // The overflow is counted once in the facade's metrics; both sockets are still open.
      const samples = parseExposition(await stack.facade.app.metrics.registry.metrics());
      expect(valueOf(samples, 'facade_subscriber_queue_overflows_total')).toBe(1);
      expect(valueOf(samples, 'facade_graphql_ws_connections')).toBe(2);
      fast.stop();
    },
  );
});
