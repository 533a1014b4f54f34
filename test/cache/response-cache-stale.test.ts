/**
 * Stale-if-error: when the upstream fails (a 5xx, a reset connection, the operation's deadline, an
 * open circuit), a read the response cache holds past its freshness answers, marked
 * `extensions.stale` with its age; only to a caller the cache would serve anyway, never what an
 * event or a write said changed, never past `CACHE_STALE_IF_ERROR_SECONDS`, and never kept or
 * served as a fresh whole answer. Against the real emulator's faults and real tokens.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { READ_ONLY_KEY, startEmulator } from '../support/harness/emulator.ts';
import { startFacade, type GraphQLResult } from '../support/harness/facade.ts';
import { startTcpProxy } from '../support/harness/tcp-proxy.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { scrape, valueOf } from '../support/metrics.ts';
import { bearer } from '../support/tokens.ts';

const secret = generateWebhookSecret();
const CUSTOMER = '{ customer(id: "cus_acme") { id displayName } }';
const ACCOUNT = '{ account(customerId: "cus_globex", id: "acc_globex_eth") { id balances { available } } }';
const ACCOUNT_ROUTE = 'GET /v3/customers/{customerId}/accounts/{accountId}';

type Stale = { extensions?: { stale?: { ageSeconds: number } } };
const staleOf = (result: GraphQLResult) => (result.body as Stale).extensions?.stale;
/** An answer that holds nothing stale: the upstream's failure, with no data for the field. */
function expectUnavailable(answer: GraphQLResult, code = 'UPSTREAM_UNAVAILABLE'): void {
  expect(Object.values(answer.body.data ?? {}).every((value) => value === null)).toBe(true);
  expect(answer.body.errors?.[0]?.extensions?.code).toBe(code);
  expect(staleOf(answer)).toBeUndefined();
}
const pastFreshness = () => new Promise((resolve) => setTimeout(resolve, 1_100));

/** Reads `document` fresh, lets it pass its one second of freshness, then breaks the upstream. */
async function heldPastFreshness(stack: Stack, document: string, fault: FaultKind = 'request_failed') {
  const fresh = await stack.query(document);
  expect(fresh.body.errors).toBeUndefined();
  await pastFreshness();
  await stack.setFaults({ rules: [{ kind: fault, rate: 1 }] });
  await stack.resetUpstreamCalls();
  return fresh;
}
type FaultKind = 'request_failed' | 'internal_error' | 'reset' | 'stall';

describe('with the circuit off, answers fresh for one second and stale for 30 more', () => {
  const stack = useStack({
    env: {
      CACHE_ENABLED: 'true',
      CACHE_MAX_AGE_SECONDS: '1',
      CACHE_STALE_IF_ERROR_SECONDS: '30',
      UPSTREAM_CIRCUIT_FAILURES: '0',
      OPERATION_TIMEOUT_MS: '1500',
      WEBHOOK_SECRETS: secret,
      AUTH_ALLOW_CALLER_API_KEY: 'true',
    },
  });

  test.each<[FaultKind, string]>([
    ['request_failed', '502'],
    ['internal_error', '500'],
    ['reset', 'a reset connection'],
    ['stall', "no answer before the operation's deadline"],
  ])('%s (%s): the held answer answers, marked with its age; the upstream was asked first', async (fault) => {
    const fresh = await heldPastFreshness(stack, CUSTOMER, fault);
    const stale = await stack.query(CUSTOMER);
    expect(stale.body.errors).toBeUndefined();
    expect(stale.body.data).toEqual(fresh.body.data);
    expect(staleOf(stale)?.ageSeconds).toBeGreaterThanOrEqual(1);
    expect(staleOf(stale)?.ageSeconds).toBeLessThan(30);
    expect((await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}']).toBeGreaterThanOrEqual(1);
  });

  test('a stale answer is never kept as a whole answer, and a held whole answer past its freshness is not served', async () => {
    const document = '{ customer(id: "cus_acme") { id status } }';
    await stack.query(document);
    await stack.resetUpstreamCalls();
    // Held whole: the same query again costs nothing upstream.
    expect(staleOf(await stack.query(document))).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(0);
    await pastFreshness();
    await stack.setFaults({ rules: [{ kind: 'request_failed', rate: 1 }] });
    // The held whole answer is no longer current: executed again, over the stale read, and marked.
    expect(staleOf(await stack.query(document))?.ageSeconds).toBeGreaterThanOrEqual(1);
    await stack.clearFaults();
    await stack.resetUpstreamCalls();
    // Back: read upstream (the stale answer was not kept), fresh and unmarked, then held again.
    const back = await stack.query(document);
    expect(staleOf(back)).toBeUndefined();
    expect(back.body).not.toHaveProperty('extensions');
    expect((await stack.upstreamCalls()).total).toBe(1);
    await stack.query(document);
    expect((await stack.upstreamCalls()).total).toBe(1);
  });

  test('an answer an event said changed is known stale: not served in an outage', async () => {
    const account = '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id balances { available } } }';
    await heldPastFreshness(stack, account);
    await stack.clearFaults();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    await stack.setFaults({ rules: [{ kind: 'request_failed', rate: 1 }] });
    expectUnavailable(await stack.query(account));
  });

  test('an answer a write through the facade changed is known stale: not served in an outage', async () => {
    await stack.query(ACCOUNT);
    await pastFreshness();
    const topUp = await stack.query(
      'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }',
      {
        input: {
          accountId: 'acc_globex_eth',
          amount: '1.00',
          currency: 'USDC',
          idempotencyKey: `stale-top-up-${Date.now()}`,
        },
      },
    );
    expect(topUp.body.errors).toBeUndefined();
    await stack.setFaults({ rules: [{ route: ACCOUNT_ROUTE, kind: 'request_failed', rate: 1 }] });
    expectUnavailable(await stack.query(ACCOUNT));
  });

  test('only to a caller a fresh hit would serve: another customer, another key get nothing of it', async () => {
    // The caller's own key is checked once at the door while the upstream answers (and remembered).
    expect((await stack.queryWithKey(READ_ONLY_KEY, '{ __typename }')).body.errors).toBeUndefined();
    const fresh = await heldPastFreshness(stack, CUSTOMER);
    // Another customer's token: refused by its scope before the cache, with no upstream call.
    expectUnavailable(await stack.queryAs('globex', CUSTOMER), 'NOT_FOUND');
    // A caller's own key: answers are kept per key, and this one holds nothing.
    expectUnavailable(await stack.queryWithKey(READ_ONLY_KEY, CUSTOMER));
    // The customer's own token: what a fresh hit would give it, marked.
    const acme = await stack.queryAs('acme', CUSTOMER);
    expect(acme.body.data).toEqual(fresh.body.data);
    expect(staleOf(acme)?.ageSeconds).toBeGreaterThanOrEqual(1);
  });

  test('Cache-Control: no-cache asks the upstream only: its failure is the answer', async () => {
    await heldPastFreshness(stack, CUSTOMER);
    const headers = { ...(await bearer('operator')), 'cache-control': 'no-cache' };
    expectUnavailable(await stack.query(CUSTOMER, undefined, headers));
  });
});

describe('with one second of stale-if-error', () => {
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1', CACHE_STALE_IF_ERROR_SECONDS: '1' },
  });

  test('an answer past its freshness and the bound is not served', async () => {
    await stack.query(CUSTOMER);
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    await stack.setFaults({ rules: [{ kind: 'request_failed', rate: 1 }] });
    expectUnavailable(await stack.query(CUSTOMER));
  });
});

describe('with CACHE_STALE_IF_ERROR_SECONDS=0', () => {
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1', CACHE_STALE_IF_ERROR_SECONDS: '0' },
  });

  test('nothing is served past its freshness', async () => {
    await heldPastFreshness(stack, CUSTOMER);
    expectUnavailable(await stack.query(CUSTOMER));
  });
});

describe('with the circuit open', () => {
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1', UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: '60000' },
  });

  test('a held answer answers at once, with nothing sent; a read held by nobody fails at once, retryable', async () => {
    const fresh = await heldPastFreshness(stack, CUSTOMER);
    for (const id of ['cus_x1', 'cus_x2', 'cus_x3', 'cus_x4', 'cus_x5']) {
      await stack.query(`{ customer(id: "${id}") { id } }`);
    }
    await stack.resetUpstreamCalls();
    const started = performance.now();
    const stale = await stack.query(CUSTOMER);
    const missed = await stack.query('{ customer(id: "cus_ada") { id } }');
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(stale.body.data).toEqual(fresh.body.data);
    expect(staleOf(stale)?.ageSeconds).toBeGreaterThanOrEqual(1);
    expect(missed.body.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      reason: 'circuit_open',
      retryable: true,
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
    const metrics = await scrape(stack.metricsUrl);
    expect(valueOf(metrics, 'facade_upstream_cache_stale_served_total')).toBeGreaterThanOrEqual(1);
  });
});

describe('with the upstream behind a proxy that goes away', () => {
  test('refused connections: the held answer answers, marked stale', async () => {
    const emulator = await startEmulator();
    const { port } = new URL(emulator.url);
    const proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(port) });
    const facade = await startFacade(`http://127.0.0.1:${proxy.port}`, {
      env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1', UPSTREAM_CIRCUIT_FAILURES: '0' },
    });
    try {
      const fresh = await facade.query(CUSTOMER);
      expect(fresh.body.errors).toBeUndefined();
      await pastFreshness();
      // Nothing listens on the upstream's port any more: every connection is refused.
      await proxy.close();
      const stale = await facade.query(CUSTOMER);
      expect(stale.body.errors).toBeUndefined();
      expect(stale.body.data).toEqual(fresh.body.data);
      expect(staleOf(stale)?.ageSeconds).toBeGreaterThanOrEqual(1);
      expectUnavailable(await facade.query('{ customer(id: "cus_ada") { id } }'));
    } finally {
      await facade.close();
      await emulator.close();
    }
  });
});
