/**
 * An upstream outage with sandbox and live in one deployment: each environment's client has its
 * own circuit (one opening refuses nothing of the other) and its own response cache (a stale
 * answer of one is never served in the other). Real tokens of a real dev issuer bind callers to
 * their environment; the attacker holds a live token scoped to the very customer the sandbox
 * cache holds, and another sandbox customer's token.
 */
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { LIVE_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { devIssuerEnv, useDevIssuer } from '../support/issuer.ts';
import { scrape, valueOf } from '../support/metrics.ts';

type Client = 'sandbox-ops' | 'live-ops' | 'live-acme' | 'sandbox-globex';

/** A client of the dev issuer bound to `environment`: an operator, or scoped to `customerIds`. */
const clientOf = (name: Client, environment: 'sandbox' | 'live', customerIds?: string[]) => ({
  clientId: name,
  clientSecret: `${name}-secret`,
  roles: customerIds === undefined ? ['operator'] : [],
  ...(customerIds === undefined ? {} : { customerIds }),
  environment,
});

const issuer = useDevIssuer({
  clients: [
    clientOf('sandbox-ops', 'sandbox'),
    clientOf('live-ops', 'live'),
    // Scoped to the sandbox customer whose answers are held, but in the other environment.
    clientOf('live-acme', 'live', ['cus_acme']),
    clientOf('sandbox-globex', 'sandbox', ['cus_globex']),
  ],
});
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    env: {
      ...devIssuerEnv(issuer),
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY,
      UPSTREAM_API_KEY_LIVE: LIVE_KEY,
      CACHE_ENABLED: 'true',
      CACHE_MAX_AGE_SECONDS: '1',
      UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS: '60000',
    },
  });
});
afterAll(() => stack?.close());
beforeEach(() => stack.clearFaults());

const tokens = new Map<Client, Promise<string>>();
async function queryAs(client: Client, document: string): Promise<GraphQLResult> {
  let token = tokens.get(client);
  if (token === undefined) tokens.set(client, (token = issuer.token(client)));
  return stack.query(document, undefined, { authorization: `Bearer ${await token}` });
}

const staleOf = (result: GraphQLResult) =>
  (result.body as { extensions?: { stale?: { ageSeconds: number } } }).extensions?.stale;

test('a stale answer is served only in its environment and scope: another environment and another customer get nothing', async () => {
  const document = '{ customer(id: "cus_acme") { id displayName } }';
  const fresh = await queryAs('sandbox-ops', document);
  expect(fresh.body.errors).toBeUndefined();
  // The attackers ask while the upstream still answers: nothing of sandbox reaches them either.
  expect((await queryAs('live-acme', document)).body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  await stack.setFaults({
    rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'request_failed', rate: 1 }],
  });

  for (const attacker of ['live-acme', 'live-ops', 'sandbox-globex'] as const) {
    const answer = await queryAs(attacker, document);
    expect(answer.body.data?.customer ?? null, attacker).toBeNull();
    expect(staleOf(answer), attacker).toBeUndefined();
    expect(JSON.stringify(answer.body), attacker).not.toContain('Acme Robotics');
  }
  const stale = await queryAs('sandbox-ops', document);
  expect(stale.body.data).toEqual(fresh.body.data);
  expect(staleOf(stale)?.ageSeconds).toBeGreaterThanOrEqual(1);
});

test("one environment's circuit opening refuses nothing of the other's", async () => {
  await stack.setFaults({
    rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'request_failed', rate: 1 }],
  });
  for (let read = 0; read < 6; read += 1)
    await queryAs('sandbox-ops', `{ customer(id: "cus_gone_${read}") { id } }`);
  const refused = await queryAs('sandbox-ops', '{ customer(id: "cus_ada") { id } }');
  expect(refused.body.errors?.[0]?.extensions).toMatchObject({ reason: 'circuit_open', retryable: true });

  // Live still goes upstream: its list answers, and its failing read fails upstream, not at the circuit.
  const list = await queryAs('live-ops', '{ customers(first: 5) { nodes { id } } }');
  expect(list.body.errors).toBeUndefined();
  const failing = await queryAs('live-ops', '{ customer(id: "cus_live_northwind") { id } }');
  expect(failing.body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_UNAVAILABLE');
  expect(failing.body.errors?.[0]?.extensions?.reason).toBeUndefined();

  const metrics = await scrape(stack.metricsUrl);
  expect(valueOf(metrics, 'facade_upstream_circuit_state', { environment: 'sandbox' })).toBe(1);
  expect(valueOf(metrics, 'facade_upstream_circuit_state', { environment: 'live' })).toBe(0);
  expect(
    valueOf(metrics, 'facade_upstream_circuit_transitions_total', { environment: 'sandbox', to: 'open' }),
  ).toBe(1);
  const opened = stack.logs().filter((line) => line.includes('upstream circuit opened'));
  expect(opened).toHaveLength(1);
  expect(JSON.parse(opened[0]!)).toMatchObject({ environment: 'sandbox', level: 'warn' });
});
