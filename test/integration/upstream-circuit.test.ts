/**
 * The upstream circuit breaker against the real emulator's faults: it opens after five failed calls
 * in a row, then one probe per interval goes upstream and nothing else; it closes once a probe is
 * answered, saying so once in the log and in the metrics. Mutations meet it before anything is
 * sent, and a mutation whose attempt timed out is retried only with its own Idempotency-Key: the
 * emulator's records and the account's balance count the writes.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { scrape, valueOf } from '../support/metrics.ts';

const EVERY_CALL_FAILS = { rules: [{ kind: 'request_failed' as const, rate: 1 }] };
const CAPABILITIES = 'GET /v3/capabilities';
const TOP_UP_ROUTE = 'POST /v3/sandbox/accounts/{accountId}/topup';
const TOP_UP = `mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } idempotencyKey replayed } }`;
const topUpOf = (key: string) => ({
  input: { accountId: 'acc_globex_eth', amount: '10.00', currency: 'USDC', idempotencyKey: key },
});
type TopUp = { sandboxTopUp: { replayed: boolean; idempotencyKey: string } | null };

async function balanceOf(stack: Stack): Promise<number> {
  const result = await stack.query<{ account: { balances: { available: string }[] } }>(
    '{ account(customerId: "cus_globex", id: "acc_globex_eth") { balances { available } } }',
  );
  return Number(result.body.data!.account.balances[0]!.available);
}

/** Six reads failing after their attempts: more than the five failed calls that open the circuit. */
async function openTheCircuit(stack: Stack): Promise<void> {
  await stack.setFaults(EVERY_CALL_FAILS);
  for (const id of ['cus_a', 'cus_b', 'cus_c']) {
    await stack.query(`{ customer(id: "${id}") { id accounts(first: 1) { nodes { id } } } }`);
  }
  const refused = await stack.query('{ customer(id: "cus_acme") { id } }');
  expect(refused.body.errors?.[0]?.extensions).toMatchObject({ reason: 'circuit_open', retryable: true });
}

/** Waits until a read is answered again (the circuit closed once its probe was answered). */
async function untilAnswered(stack: Stack): Promise<void> {
  let answered = false;
  await waitFor(
    () => answered,
    'the circuit to close',
    undefined,
    async () => {
      answered = (await stack.query('{ customer(id: "cus_acme") { id } }')).body.errors === undefined;
    },
  );
}

/** The emulator's record of the requests it received since the last reset, oldest first. */
async function requestLog(stack: Stack): Promise<{ route: string; status: number | null }[]> {
  const response = await fetch(`${stack.emulatorUrl}/_emulator/requests`);
  return ((await response.json()) as { requests: { route: string; status: number | null }[] }).requests;
}

const linesSaying = (stack: Stack, message: string) =>
  stack.logs().filter((line) => (JSON.parse(line) as { msg?: string }).msg?.startsWith(message) === true);

describe('with a probe every 300 ms', () => {
  const stack = useStack({ env: { UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: '300' } });

  test('open: one probe per interval goes upstream and nothing else; answered, it closes, logged and counted once', async () => {
    const openedBefore = linesSaying(stack, 'upstream circuit opened').length;
    const closedBefore = linesSaying(stack, 'upstream circuit closed').length;
    await openTheCircuit(stack);
    expect(linesSaying(stack, 'upstream circuit opened')).toHaveLength(openedBefore + 1);
    const open = await scrape(stack.metricsUrl);
    expect(valueOf(open, 'facade_upstream_circuit_state')).not.toBe(0);

    await stack.resetUpstreamCalls();
    const started = performance.now();
    for (let query = 0; query < 20; query += 1) {
      const refused = await stack.query('{ customer(id: "cus_acme") { id } }');
      expect(refused.body.errors?.[0]?.extensions?.reason).toBe('circuit_open');
    }
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const elapsed = performance.now() - started;
    const calls = await stack.upstreamCalls();
    // Only probes, at most one per interval (each waits its interval after the last one ended; one
    // may have been on its way when the counts were reset).
    expect(calls.total).toBe(calls.byRoute[CAPABILITIES]);
    expect(calls.total).toBeGreaterThanOrEqual(1);
    expect(calls.total).toBeLessThanOrEqual(Math.ceil(elapsed / 300) + 1);

    await stack.clearFaults();
    const back = performance.now();
    await untilAnswered(stack);
    // Within about one interval of the upstream's return.
    expect(performance.now() - back).toBeLessThan(2_000);
    expect(linesSaying(stack, 'upstream circuit closed')).toHaveLength(closedBefore + 1);
    expect(linesSaying(stack, 'upstream circuit opened')).toHaveLength(openedBefore + 1);
    const closed = await scrape(stack.metricsUrl);
    expect(valueOf(closed, 'facade_upstream_circuit_state')).toBe(0);
    const moves = (to: string) =>
      valueOf(closed, 'facade_upstream_circuit_transitions_total', { to }) -
      valueOf(open, 'facade_upstream_circuit_transitions_total', { to });
    expect(moves('closed')).toBe(1);
    expect(moves('half-open')).toBeGreaterThanOrEqual(1);
  });

  test('open: a mutation is refused at once with its key and a retryable code, nothing sent; later the same key executes it once', async () => {
    const before = await balanceOf(stack);
    const key = randomUUID();
    await openTheCircuit(stack);
    await stack.resetUpstreamCalls();

    const started = performance.now();
    const refused = await stack.query<TopUp>(TOP_UP, topUpOf(key));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(refused.body.data).toEqual({ sandboxTopUp: null });
    expect(refused.body.errors?.[0]).toMatchObject({
      path: ['sandboxTopUp'],
      extensions: {
        code: 'UPSTREAM_UNAVAILABLE',
        reason: 'circuit_open',
        retryable: true,
        idempotencyKey: key,
      },
    });
    expect((await stack.upstreamCalls()).byRoute[TOP_UP_ROUTE]).toBeUndefined();

    await stack.clearFaults();
    await untilAnswered(stack);
    await stack.resetUpstreamCalls();
    const retried = await stack.query<TopUp>(TOP_UP, topUpOf(key));
    expect(retried.body.errors).toBeUndefined();
    expect(retried.body.data?.sandboxTopUp?.replayed).toBe(false);
    expect((await stack.upstreamCalls()).byRoute[TOP_UP_ROUTE]).toBe(1);
    expect((await balanceOf(stack)) - before).toBe(10);
  });
});

describe('with attempts that time out after 300 ms', () => {
  // Retries spread over more than the emulator's 2 s of work (about 2.5 s of backoff in all), so
  // the last one meets its answer.
  const stack = useStack({
    env: {
      UPSTREAM_HEADERS_TIMEOUT_MS: '300',
      UPSTREAM_RETRY_MAX_ATTEMPTS: '10',
      UPSTREAM_RETRY_BASE_DELAY_MS: '200',
      UPSTREAM_RETRY_MAX_DELAY_MS: '400',
    },
  });

  test('a mutation whose attempt timed out (the write done upstream) is retried with the same key: one write, replayed', async () => {
    const before = await balanceOf(stack);
    const key = randomUUID();
    // The first attempt is held 2 s, then executed: the facade gave up on it long before.
    await stack.setFaults({ rules: [{ route: TOP_UP_ROUTE, kind: 'delay', delayMs: 2_000, times: 1 }] });

    const result = await stack.query<TopUp>(TOP_UP, topUpOf(key));

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data?.sandboxTopUp).toMatchObject({ idempotencyKey: key, replayed: true });
    const attempts = (await requestLog(stack)).filter((request) => request.route === TOP_UP_ROUTE);
    // The timed-out first attempt, then retries of the same key: refused as in progress while the
    // first ran, then its answer replayed.
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.at(-1)!.status).toBe(200);
    for (const retry of attempts.slice(1, -1)) expect(retry.status).toBe(409);
    // Written once: a retry with another key would have topped up twice.
    expect((await balanceOf(stack)) - before).toBe(10);
  });
});
