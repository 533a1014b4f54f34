/**
 * What a caller's live queries may cost the upstream, tried as a hostile tenant would: one token
 * scoped to one customer holds 100 `@live` watchers of one document with distinct variables
 * (`accounts(first: $n)`, three lists of them, n = 1…100), 100 groups that each re-run on their
 * own: 300 upstream reads for one top-up without a pool. One top-up costs
 * that caller at most one pool of `UPSTREAM_MAX_CALLS_PER_OPERATION` (100) upstream calls, and so
 * does each refresh window with no event at all; every watcher still reaches the new balance (the
 * groups the pool left out run in the next windows), with no error sent; another caller's live
 * query is answered at once whatever this one spent. Real servers, graphql-ws clients, and the
 * emulator's exact request counts.
 */
import { describe, expect, test } from 'vitest';
import { useStack, type Stack } from '../support/harness/stack.ts';
import type { LiveClient } from '../support/harness/live-client.ts';
import { facadeReads, topUp } from '../support/harness/live-query-top-ups.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs, PROCESS_TEST_TIMEOUT_MS } from '../support/load-budget.ts';
import { bearer } from '../support/tokens.ts';

const ACCOUNTS = `query Accounts($customerId: ID!, $n: Int!) @live {
  customer(id: $customerId) {
    id
    accounts(first: $n) { edges { node { id balances { currency available } } } }
    since2000: accounts(first: $n, updatedSince: "2000-01-01T00:00:00Z") { nodes { id updatedAt } }
    since2020: accounts(first: $n, updatedSince: "2020-01-01T00:00:00Z") { nodes { id updatedAt } }
  }
}`;

interface Accounts {
  customer: {
    accounts: { edges: { node: { id: string; balances: { currency: string; available: string }[] } }[] };
  };
}

const WATCHERS = 100;

/** The account's available USDC in a watcher's latest answer; 0 when it holds none yet. */
const latestAvailable = (watcher: { data: unknown[] }) =>
  Number(
    (watcher.data.at(-1) as Accounts | undefined)?.customer.accounts.edges
      .find((edge) => edge.node.id === 'acc_acme_eth')
      ?.node.balances.find((balance) => balance.currency === 'USDC')?.available ?? '0',
  );

/** Waits until the facade's reads stop growing for `quietMs`: the re-runs an event caused are over. */
async function settledReads(stack: Stack, quietMs = loadScaledMs(1_500)): Promise<number> {
  let last = await facadeReads(stack);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    const now = await facadeReads(stack);
    if (now === last) return now;
    last = now;
  }
}

/** acme's 100 watchers, n = 1…100, over four connections, each answered once. */
async function hundredWatchers(stack: Stack) {
  const { authorization } = await bearer('acme');
  const clients: LiveClient[] = [];
  for (let index = 0; index < 4; index += 1) clients.push(stack.connect({ Authorization: authorization }));
  const watchers = Array.from({ length: WATCHERS }, (_, index) =>
    clients[index % clients.length]!.subscribe(ACCOUNTS, { customerId: 'cus_acme', n: index + 1 }),
  );
  await waitFor(() => watchers.every((watcher) => watcher.data.length >= 1), 'every first answer');
  return {
    watchers,
    async close() {
      for (const watcher of watchers) watcher.stop();
      for (const client of clients) await client.dispose();
    },
  };
}

describe('one caller’s 100 live-query groups share one pool per invalidation', () => {
  const stack = useStack({
    // The refresh windows stay out of the event's count: at the default 30 s a loaded machine's
    // settling could reach the next window, whose refreshes and owed runs were then counted too.
    env: {
      WEBHOOK_REGISTER: 'true',
      CACHE_ENABLED: 'true',
      CACHE_MAX_AGE_SECONDS: '600',
      RATE_LIMIT_ENABLED: 'false',
    },
  });

  test('one top-up costs that caller at most 100 upstream calls; another caller’s live query is answered at once', async () => {
    // Another caller (the operator, a pool of its own) watching the same customer: what one
    // top-up costs for it alone, before acme's watchers exist.
    const operator = stack.connect({ Authorization: (await bearer('operator')).authorization });
    const other = operator.subscribe(ACCOUNTS, { customerId: 'cus_acme', n: 10 });
    await waitFor(() => other.data.length === 1, 'the operator’s first answer');
    const before = latestAvailable(other);
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_acme_eth');
    await waitFor(() => other.data.length === 2, 'the operator’s answer after the first top-up');
    const operatorAlone = await settledReads(stack);
    expect(operatorAlone).toBeGreaterThan(0);

    const acme = await hundredWatchers(stack);
    expect(acme.watchers.map(latestAvailable)).toEqual(acme.watchers.map(() => before + 3));
    await settledReads(stack);
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_acme_eth');
    await waitFor(() => other.data.length === 3, 'the operator’s answer after the second top-up');
    expect(latestAvailable(other)).toBeCloseTo(before + 6, 6);
    const reads = await settledReads(stack);
    console.info(
      `one top-up, 100 acme watchers and 1 operator watcher: ${reads} upstream reads (operator alone: ${operatorAlone})`,
    );
    expect(reads).toBeLessThanOrEqual(100 + operatorAlone);
    // The pool served some of acme's groups at once; the rest wait for the refresh window.
    expect(acme.watchers.some((watcher) => latestAvailable(watcher) === before + 6)).toBe(true);
    expect(acme.watchers.flatMap((watcher) => watcher.errors)).toEqual([]);
    expect(other.errors).toEqual([]);
    other.stop();
    await operator.dispose();
    await acme.close();
  });
});

describe('one caller’s 100 live-query groups share one pool per refresh window', () => {
  const windowSeconds = 2;
  const stack = useStack({
    env: {
      WEBHOOK_REGISTER: 'true',
      CACHE_ENABLED: 'true',
      RATE_LIMIT_ENABLED: 'false',
      CACHE_MAX_AGE_SECONDS: String(windowSeconds),
    },
  });

  test(
    'with no event, the refreshes cost at most 100 upstream calls a window; after a top-up every watcher reaches the new balance, with no error',
    async () => {
      const acme = await hundredWatchers(stack);
      const before = Math.max(...acme.watchers.map(latestAvailable));

      // Idle: whole windows measured, from one window's start to a later one's.
      const windowMs = windowSeconds * 1000;
      const windows = 3;
      await new Promise((resolve) => setTimeout(resolve, windowMs - (Date.now() % windowMs) + 100));
      await stack.resetUpstreamCalls();
      const startedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, windows * windowMs));
      const idle = await facadeReads(stack);
      // The windows the count touched, as long as it really took (a loaded machine's timers run
      // late), the one it ends in included: that one may have begun its round too.
      const touched = Math.ceil((Date.now() - startedAt) / windowMs) + 1;
      console.info(`idle refresh: ${idle} upstream reads in ${touched - 1}+ windows of ${windowSeconds} s`);
      expect(idle).toBeLessThanOrEqual(touched * 100);

      await topUp(stack, 'acc_acme_eth');
      await waitFor(
        () => acme.watchers.every((watcher) => latestAvailable(watcher) === before + 3),
        'every watcher’s answer after the top-up',
        loadScaledMs(60_000),
      );
      expect(acme.watchers.flatMap((watcher) => watcher.errors)).toEqual([]);
      await acme.close();
      // Idle windows, then rounds of the pool until every group ran: longer than an in-process test's.
    },
    PROCESS_TEST_TIMEOUT_MS,
  );
});
