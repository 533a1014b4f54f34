/**
 * An upstream outage degrades, it does not pile up: with every upstream call failing, queries the
 * response cache does not hold stop costing the upstream retries once the environment's circuit
 * opens (they fail at once, retryable), and a read the cache holds past its freshness is answered
 * from it, marked stale with its age. Against the real emulator's injected faults, counted by the
 * emulator itself.
 */
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

/** Two reads: the customer and, started with it by the look-ahead, its first accounts. */
const customerWithAccounts = (id: string) =>
  `{ customer(id: "${id}") { id displayName accounts(first: 10) { nodes { id balances { currency available } } } } }`;

const EVERY_CALL_FAILS = { rules: [{ kind: 'request_failed' as const, rate: 1 }] };

describe('with every upstream call failing (502)', () => {
  // A probe interval longer than the test: no probe is part of the counts.
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: '60000' },
  });

  test('20 queries the cache does not hold cost a bounded number of upstream calls, then fail at once', async () => {
    await stack.setFaults(EVERY_CALL_FAILS);
    const answers = [];
    for (let index = 0; index < 20; index += 1) {
      const started = performance.now();
      const answer = await stack.query(customerWithAccounts(`cus_outage_${index}`));
      answers.push({ answer, ms: performance.now() - started });
    }
    const calls = await stack.upstreamCalls();
    // Before the circuit: 20 queries × 2 reads × 3 attempts = 120 calls. Now the circuit opens
    // after 5 failed calls (each after its 3 attempts), and nothing more is sent.
    expect(calls.total).toBeLessThanOrEqual(18);
    for (const { answer } of answers) {
      expect(answer.body.data?.customer ?? null).toBeNull();
      expect(answer.body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_UNAVAILABLE');
    }
    // From the fourth query on, the circuit is open: refused at once, retryable, with nothing sent.
    for (const { answer, ms } of answers.slice(3)) {
      expect(answer.body.errors?.[0]?.extensions).toMatchObject({
        code: 'UPSTREAM_UNAVAILABLE',
        reason: 'circuit_open',
        retryable: true,
      });
      expect(ms).toBeLessThan(1_000);
    }
  });
});

describe('with an answer held past its freshness', () => {
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1', CACHE_ANSWERS_MAX_BYTES: '1048576' },
  });

  test('a dashboard read 3 s past its freshness is answered from the cache, marked stale with its age', async () => {
    const dashboard = customerWithAccounts('cus_acme');
    const fresh = await stack.query(dashboard);
    expect(fresh.body.errors).toBeUndefined();
    expect(fresh.body).not.toHaveProperty('extensions');
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    await stack.setFaults(EVERY_CALL_FAILS);
    const stale = await stack.query(dashboard);
    expect(stale.body.errors).toBeUndefined();
    expect(stale.body.data).toEqual(fresh.body.data);
    const ageSeconds = (stale.body as { extensions?: { stale?: { ageSeconds?: number } } }).extensions?.stale
      ?.ageSeconds;
    expect(ageSeconds).toBeGreaterThanOrEqual(4);
    expect(ageSeconds).toBeLessThan(30);
  });
});
