/**
 * Subscriptions and `@live` queries through an upstream outage, against real servers: the emulator
 * keeps sending its signed webhooks (its reads fail, its writes and deliveries do not), the facade
 * cannot read what changed. A subscriber is sent nothing while the upstream is down, keeps its
 * cursor, and once the upstream is back receives every event of the outage once, in order, each
 * with the resource as it is then; one resuming after its last cursor gets the same events. A live
 * query's watcher keeps its last answer through the outage, then is sent the current one.
 */
import { describe, expect, test } from 'vitest';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer } from '../support/tokens.ts';

/** The reads the deliveries make fail; the emulator's writes and webhooks go on. */
const READS_FAIL = {
  rules: [
    'GET /v3/customers/{customerId}',
    'GET /v3/customers/{customerId}/accounts',
    'GET /v3/customers/{customerId}/accounts/{accountId}',
    // The circuit's probe: the upstream is down for it too.
    'GET /v3/capabilities',
  ].map((route) => ({ route, kind: 'request_failed' as const, rate: 1 })),
};

const ACCOUNT_CHANGED = `subscription ($after: String) {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth", after: $after) {
    cursor eventId replayed account { balances { currency available } }
  }
}`;

interface Change {
  accountChanged: {
    cursor: string;
    eventId: string;
    replayed: boolean;
    account: { balances: { currency: string; available: string }[] } | null;
  };
}

const usdcOf = (change: Change) =>
  Number(change.accountChanged.account?.balances.find((held) => held.currency === 'USDC')?.available);

async function topUp(stack: Stack): Promise<void> {
  const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '5.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
}

/** Waits until the emulator has delivered `count` more webhooks (answered 2xx) than `before`. */
async function webhooksDelivered(stack: Stack, before: number, count: number): Promise<void> {
  let delivered = before;
  await waitFor(
    () => delivered >= before + count,
    `${count} webhooks delivered`,
    undefined,
    async () => {
      delivered = await deliveredCount(stack);
    },
  );
}

/**
 * Breaks the upstream's reads, makes `topUps` top-ups at the emulator and waits for their
 * webhooks to be delivered (after `deliveredBefore` ones), then 1.5 s more for whatever they cause.
 */
async function outageWithTopUps(stack: Stack, topUps: number, deliveredBefore: number): Promise<void> {
  await stack.setFaults(READS_FAIL);
  for (let made = 0; made < topUps; made += 1) await topUp(stack);
  await webhooksDelivered(stack, deliveredBefore, topUps);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
}

async function deliveredCount(stack: Stack): Promise<number> {
  const response = await fetch(`${stack.emulatorUrl}/_emulator/webhook-deliveries`);
  const { data } = (await response.json()) as { data: { eventType: string; outcome: string }[] };
  return data.filter(
    (delivery) => delivery.eventType === 'account.updated' && delivery.outcome === 'delivered',
  ).length;
}

describe('through an outage of the upstream', () => {
  const stack = useStack({
    env: { WEBHOOK_REGISTER: 'true', CACHE_ENABLED: 'true', UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: '300' },
  });

  test('a subscriber is sent nothing while down, then every event once, in order, read as it is now; a resume after its cursor gets the same', async () => {
    const client = stack.connect({ Authorization: (await bearer('acme')).authorization });
    const live = client.subscribe(ACCOUNT_CHANGED);
    // Another operation of the same read group: it shares the event's reads with the first.
    const other = client.subscribe(
      'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId account { id } } }',
    );
    await stack.subscriptionsStarted(2);
    const deliveredBefore = await deliveredCount(stack);
    await topUp(stack);
    await waitFor(() => live.data.length === 1, 'the first event');
    const [first] = live.data as Change[];
    expect(first!.accountChanged.account).not.toBeNull();

    // Down: the two events wait; the subscriber is sent nothing (no null resource, no error).
    await outageWithTopUps(stack, 2, deliveredBefore + 1);
    expect(live.errors).toEqual([]);
    expect(live.data).toHaveLength(1);
    expect(other.errors).toEqual([]);
    expect(other.data).toHaveLength(1);

    await stack.clearFaults();
    await waitFor(() => live.data.length === 3 && other.data.length === 3, 'the events of the outage');
    expect(live.errors).toEqual([]);
    expect(other.errors).toEqual([]);
    expect(other.data).toEqual(
      live.data.map((change) => ({
        accountChanged: {
          eventId: (change as Change).accountChanged.eventId,
          account: { id: 'acc_acme_eth' },
        },
      })),
    );
    const changes = live.data as Change[];
    const after = changes.slice(1);
    // Each read once the upstream was back: both show the account as it is now (two top-ups on).
    for (const change of after) expect(usdcOf(change)).toBeCloseTo(usdcOf(first!) + 10, 6);
    expect(new Set(changes.map((change) => change.accountChanged.eventId)).size).toBe(3);
    expect(after.map((change) => change.accountChanged.replayed)).toEqual([false, false]);
    // Nothing more: no duplicate follows.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(live.data).toHaveLength(3);

    // A subscriber that left during the outage resumes after its last cursor: the same two events.
    const resumed = client.subscribe(ACCOUNT_CHANGED, { after: first!.accountChanged.cursor });
    await waitFor(() => resumed.data.length === 2, 'the events after the cursor');
    expect((resumed.data as Change[]).map((change) => change.accountChanged.eventId)).toEqual(
      after.map((change) => change.accountChanged.eventId),
    );
    expect(resumed.errors).toEqual([]);
    await client.dispose();
  });

  test('a live query keeps its last answer while down, then is sent the current one', async () => {
    const client = stack.connect({ Authorization: (await bearer('acme')).authorization });
    const dashboard = client.subscribe(
      'query @live { customer(id: "cus_acme") { id accounts(first: 10) { nodes { id balances { currency available } } } } }',
    );
    await waitFor(() => dashboard.data.length === 1, 'the first answer');
    const deliveredBefore = await deliveredCount(stack);

    await outageWithTopUps(stack, 1, deliveredBefore);
    // Down: nothing sent (no answer with errors in place of the dashboard).
    expect(dashboard.errors).toEqual([]);
    expect(dashboard.data).toHaveLength(1);

    await stack.clearFaults();
    await waitFor(() => dashboard.data.length === 2, 'the answer once the upstream is back');
    expect(dashboard.errors).toEqual([]);
    const usdc = (data: unknown) =>
      Number(
        (
          data as {
            customer: {
              accounts: { nodes: { id: string; balances: { currency: string; available: string }[] }[] };
            };
          }
        ).customer.accounts.nodes
          .find((account) => account.id === 'acc_acme_eth')!
          .balances.find((held) => held.currency === 'USDC')!.available,
      );
    expect(usdc(dashboard.data[1])).toBeCloseTo(usdc(dashboard.data[0]) + 5, 6);
    await client.dispose();
  });
});

describe('with answers fresh for one second', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1' } });

  test('a live query started while down is answered from what is held, marked stale; once back, sent the current answer unmarked', async () => {
    const document = 'query @live { customer(id: "cus_acme") { id displayName } }';
    await stack.query(document);
    // Connected while the upstream answers: a connection's key is checked with the upstream once.
    const live = stack.connect({ Authorization: (await bearer('acme')).authorization });
    const warm = live.subscribe('subscription { customerChanged(customerId: "cus_acme") { eventId } }');
    await stack.subscriptionsStarted(1);
    warm.stop();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await stack.setFaults(READS_FAIL);
    const results: { data?: unknown; errors?: unknown; extensions?: { stale?: { ageSeconds: number } } }[] =
      [];
    const stop = live.client.subscribe(
      { query: document },
      {
        next: (result) => results.push(result as (typeof results)[number]),
        error: () => undefined,
        complete: () => undefined,
      },
    );
    await waitFor(() => results.length === 1, 'the first answer');
    expect(results[0]!.errors).toBeUndefined();
    expect(results[0]!.data).toEqual({ customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } });
    expect(results[0]!.extensions?.stale?.ageSeconds).toBeGreaterThanOrEqual(1);

    await stack.clearFaults();
    await waitFor(() => results.length === 2, 'the answer once the upstream is back');
    expect(results[1]).toEqual({ data: results[0]!.data });
    stop();
    await live.dispose();
  });
});
