/**
 * Budgets of upstream calls over time (`RATE_LIMIT_UPSTREAM_CALLS`, `..._BY_CLIENT`) end to end: two
 * facade replicas sharing the run's Redis, real tokens, the emulator counting what reached it. Each
 * call an operation sends is charged to its caller (and its named client) as it leaves, over every
 * transport, MCP included; once a budget is spent the next operation is refused 429 before it
 * sends anything, on either replica.
 */
import { describe, expect, test } from 'vitest';
import type { RunningFacade } from '../support/harness/facade.ts';
import { mcpRequest, openRawSession } from '../support/harness/mcp-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { bearer, issuerSignedToken } from '../support/tokens.ts';

/** A customer and its accounts: more than one upstream call per operation. */
const QUERY = '{ customer(id: "cus_acme") { id accounts(first: 10) { nodes { id } } } }';
const READ = {
  jsonrpc: '2.0',
  id: 3,
  method: 'resources/read',
  params: { uri: 'platform://customers/cus_acme/accounts' },
};

const stack = useStack({
  facades: 2,
  redis: true,
  env: { RATE_LIMIT_UPSTREAM_CALLS: '10', RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT: 'shared-app=6' },
});
const replica = (index: number): RunningFacade => stack.facades[index]!;

const upstreamTotal = async (): Promise<number> => (await stack.upstreamCalls()).total;

describe('budgets of upstream calls, across two replicas sharing Redis', () => {
  test('a caller’s operations stop once they sent its budget, on either replica and over MCP; another caller goes on', async () => {
    const acme = await bearer('acme');
    // Opened first: a caller out of upstream calls cannot open a session either (every POST is an operation).
    const session = await openRawSession(replica(1).url, acme.authorization.slice('Bearer '.length));
    const perOperation: number[] = [];
    let refused: Awaited<ReturnType<RunningFacade['query']>> | undefined;
    for (let i = 0; refused === undefined && i < 20; i += 1) {
      const before = await upstreamTotal();
      const answer = await replica(i % 2).query(QUERY, undefined, acme);
      if (answer.status === 429) refused = answer;
      else {
        expect(answer.status).toBe(200);
        perOperation.push((await upstreamTotal()) - before);
      }
    }
    const sent = perOperation.reduce((sum, calls) => sum + calls, 0);
    const most = Math.max(...perOperation);
    expect(most).toBeGreaterThan(1);
    // Admitted while calls were left; the last one admitted may go past the budget by its own calls.
    expect(sent).toBeGreaterThanOrEqual(10);
    expect(sent - perOperation.at(-1)!).toBeLessThan(10);
    expect(refused?.status).toBe(429);
    const retryAfter = Number(refused!.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused!.body.errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      retryAfterSeconds: retryAfter,
    });

    const before = await upstreamTotal();
    expect((await replica(0).query(QUERY, undefined, acme)).status).toBe(429);
    expect((await replica(1).query(QUERY, undefined, acme)).status).toBe(429);
    const read = await mcpRequest(replica(1).url, READ, session);
    expect(read.status).toBe(429);
    expect(read.body).toMatchObject({ error: { data: { code: 'RATE_LIMITED' } } });
    expect(await upstreamTotal()).toBe(before);

    // Another caller's budget is its own.
    const other = await issuerSignedToken({ sub: 'another-caller', client_id: 'another-app' });
    const served = await replica(0).query(QUERY, undefined, { authorization: `Bearer ${other}` });
    expect(served.status).toBe(200);
    expect(await upstreamTotal()).toBeGreaterThan(before);
  });

  test('a named client’s tenants share its budget of upstream calls: spent over MCP, it stops the other over HTTP', async () => {
    const tenantA = await issuerSignedToken({ sub: 'tenant-a', client_id: 'shared-app' });
    const tenantB = await issuerSignedToken({ sub: 'tenant-b', client_id: 'shared-app' });
    const session = await openRawSession(replica(0).url, tenantA);
    // A reads its accounts over MCP until the client's 6 are spent (before its own 10).
    let reads = 0;
    let refused = false;
    const before = await upstreamTotal();
    while (!refused && reads < 20) {
      const read = await mcpRequest(replica(0).url, READ, session);
      if (read.status === 429) refused = true;
      else {
        expect(read.status).toBe(200);
        reads += 1;
      }
    }
    expect(refused).toBe(true);
    const sentByA = (await upstreamTotal()) - before;
    expect(sentByA).toBeGreaterThanOrEqual(6);
    expect(sentByA).toBeLessThan(10);

    // B has sent nothing of its own, yet its client's pool is spent: refused on the other replica,
    // nothing sent.
    const first = await replica(1).query(QUERY, undefined, { authorization: `Bearer ${tenantB}` });
    expect(first.status).toBe(429);
    expect(first.body.errors?.[0]?.extensions?.['code']).toBe('RATE_LIMITED');
    expect(await upstreamTotal()).toBe(before + sentByA);
  });
});

describe('an operation already running when its caller’s budget runs out', () => {
  // One call retried up to ten times: one operation alone could send past a budget of 4.
  const own = useStack({
    redis: true,
    env: { RATE_LIMIT_UPSTREAM_CALLS: '4', UPSTREAM_RETRY_MAX_ATTEMPTS: '10' },
  });

  test('stops sending: its next call is not sent, its field answers TOO_MANY_UPSTREAM_CALLS with the wait', async () => {
    await own.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'internal_error', rate: 1 }],
    });
    const answer = await own.query('{ customer(id: "cus_acme") { id } }', undefined, await bearer('acme'));
    const sent = (await own.upstreamCalls()).total;
    // The fifth call's charge finds the budget spent; the sixth attempt, 5 to 20 ms later, stays here.
    expect(sent).toBeGreaterThanOrEqual(4);
    expect(sent).toBeLessThanOrEqual(6);
    expect(answer.body.data).toEqual({ customer: null });
    const extensions = answer.body.errors?.[0]?.extensions;
    expect(extensions?.['code']).toBe('TOO_MANY_UPSTREAM_CALLS');
    expect(Number(extensions?.['retryAfterSeconds'])).toBeGreaterThanOrEqual(1);
    // Its next operation is refused at the door, nothing sent.
    await own.clearFaults();
    await own.resetUpstreamCalls();
    expect(
      (await own.query('{ customer(id: "cus_acme") { id } }', undefined, await bearer('acme'))).status,
    ).toBe(429);
    expect((await own.upstreamCalls()).total).toBe(0);
  });
});
