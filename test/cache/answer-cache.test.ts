/**
 * Whole answers of repeated queries, against a real emulator and a real facade with real tokens: a
 * held answer is served only to the caller (and scope) whose execution made it, only while every
 * upstream answer it was made from is still held, and never for an answer with an error or one that
 * read what the response cache does not keep. The freshness of a held answer after an event or a
 * write is the response cache's (test/cache/response-cache-events.test.ts and
 * response-cache-freshness.test.ts repeat their reads, so they run through held answers too).
 */
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { requiredValueOf, scrape } from '../support/metrics.ts';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { bearer, issuerSignedToken, type TestCallerName } from '../support/tokens.ts';

const stack = useStack({ env: { CACHE_ENABLED: 'true', QUERY_MAX_COST: '100000' } });

const DASHBOARD = `query Dashboard($id: ID!) {
  customer(id: $id) {
    id displayName status
    accounts { nodes { id status balances { currency available } } }
    relatedParties { nodes { id } }
    capabilities { nodes { id status } }
  }
}`;

/** Reads of the dashboard of one customer: the customer and its three lists. */
const DASHBOARD_READS = 4;

async function metric(name: string): Promise<number> {
  return requiredValueOf(await scrape(stack.metricsUrl), name);
}

/** What a caller can tell of an answer: status, data, and each error's path and code. */
function seen(result: GraphQLResult): string {
  return JSON.stringify({
    status: result.status,
    data: result.body.data,
    errors: result.body.errors?.map(({ path, extensions }) => ({ path, code: extensions?.code })),
  });
}

describe('held whole answers', () => {
  test('a repeated query is answered whole: no upstream call, no read of the response cache, same bytes', async () => {
    const hitsBefore = await metric('facade_answer_cache_hits_total');
    const first = await stack.queryAs('acme', DASHBOARD, { id: 'cus_acme' });
    expect(first.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(DASHBOARD_READS);
    await stack.resetUpstreamCalls();
    const heldReads = stack.app.responseCache!.stats();

    const again = await stack.queryAs('acme', DASHBOARD, { id: 'cus_acme' });
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect(again.headers.get('cache-control')).toBe('no-store');
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(stack.app.responseCache!.stats().hits).toBe(heldReads.hits);
    expect(stack.app.responseCache!.stats().misses).toBe(heldReads.misses);
    expect(await metric('facade_answer_cache_hits_total')).toBe(hitsBefore + 1);
    expect(await metric('facade_answer_cache_bytes')).toBeGreaterThan(0);
  });

  test('other variables are another answer', async () => {
    await stack.queryAs('operator', DASHBOARD, { id: 'cus_acme' });
    await stack.resetUpstreamCalls();
    const globex = await stack.queryAs('operator', DASHBOARD, { id: 'cus_globex' });
    expect(globex.body.data).toMatchObject({ customer: { id: 'cus_globex' } });
    expect((await stack.upstreamCalls()).total).toBe(DASHBOARD_READS);
  });

  test.each<[TestCallerName, TestCallerName]>([
    ['acme', 'globex'],
    ['acme', 'nobody'],
    ['operator', 'globex'],
    ['webApp', 'batchJob'],
  ])(
    "%s's held answer is never another caller's: %s gets what it gets with nothing held",
    async (holder, other) => {
      // With nothing held for `other`'s key, what it gets: then the holder's answer is made and held.
      const fresh = await stack.queryAs(other, DASHBOARD, { id: 'cus_acme' });
      await stack.queryAs(holder, DASHBOARD, { id: 'cus_acme' });
      const held = await stack.queryAs(holder, DASHBOARD, { id: 'cus_acme' });
      expect(held.body.data).toMatchObject({ customer: { id: 'cus_acme' } });

      const hitsBefore = await metric('facade_answer_cache_hits_total');
      const again = await stack.queryAs(other, DASHBOARD, { id: 'cus_acme' });
      expect(seen(again)).toBe(seen(fresh));
      // `other` found nothing of its own held when it was refused (a refusal is never kept).
      if (fresh.body.errors !== undefined) {
        expect(await metric('facade_answer_cache_hits_total')).toBe(hitsBefore);
      }
    },
  );

  test('a token whose scope changed does not meet the answers of its old scope', async () => {
    const both = await issuerSignedToken({ sub: 'scope-changer', customer_ids: ['cus_acme', 'cus_globex'] });
    const one = await issuerSignedToken({ sub: 'scope-changer', customer_ids: ['cus_acme'] });
    const asked = (token: string) =>
      stack.query(DASHBOARD, { id: 'cus_globex' }, { authorization: `Bearer ${token}` });
    expect((await asked(both)).body.data).toMatchObject({ customer: { id: 'cus_globex' } });
    expect((await asked(both)).body.errors).toBeUndefined();

    await stack.resetUpstreamCalls();
    const narrowed = await asked(one);
    expect(narrowed.body.data?.['customer'] ?? null).toBeNull();
    // Refused as a customer it may not see is (not found), and nothing asked of the upstream.
    expect(narrowed.body.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an answer with an error is never kept: the failed read is asked again', async () => {
    const missing = '{ customer(id: "cus_nobody_has") { id } }';
    const first = await stack.queryAs('operator', missing);
    expect(first.body.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    await stack.resetUpstreamCalls();
    const again = await stack.queryAs('operator', missing);
    expect(seen(again)).toBe(seen(first));
    expect((await stack.upstreamCalls()).total).toBe(1);
  });

  test('an answer that read what the response cache never keeps is never kept', async () => {
    // Webhook endpoints change without any event, so neither they nor an answer holding them are kept.
    const mixed = '{ customer(id: "cus_acme") { id } webhookEndpoints(first: 5) { nodes { id } } }';
    const first = await stack.queryAs('operator', mixed);
    expect(first.body.errors).toBeUndefined();
    await stack.resetUpstreamCalls();
    await stack.queryAs('operator', mixed);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/webhooks': 1 });
  });

  test('an answer that read nothing upstream is not kept: introspection runs each time', async () => {
    const kept = await metric('facade_answer_cache_kept_total');
    await stack.queryAs('acme', '{ __typename }');
    await stack.queryAs('acme', '{ __schema { queryType { name } } }');
    expect(await metric('facade_answer_cache_kept_total')).toBe(kept);
  });

  test('Cache-Control: no-cache executes and reads through, and its fresh answer is held for the next', async () => {
    await stack.queryAs('acme', DASHBOARD, { id: 'cus_acme' });
    await stack.resetUpstreamCalls();
    const headers = { ...(await bearer('acme')), 'cache-control': 'no-cache' };
    const fresh = await stack.query(DASHBOARD, { id: 'cus_acme' }, headers);
    expect(fresh.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(DASHBOARD_READS);

    await stack.resetUpstreamCalls();
    const held = await stack.queryAs('acme', DASHBOARD, { id: 'cus_acme' });
    expect(JSON.stringify(held.body)).toBe(JSON.stringify(fresh.body));
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a mutation is never answered from what is held', async () => {
    const topUp = 'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }';
    // The same document and variables twice: the second is the upstream's replay, still a call.
    const input = {
      accountId: 'acc_ada_polygon',
      amount: '1.00',
      currency: 'USDC',
      idempotencyKey: `answer-cache-${Date.now()}`,
    };
    for (let attempt = 0; attempt < 2; attempt += 1) {
      await stack.resetUpstreamCalls();
      const result = await stack.queryAs('operator', topUp, { input });
      expect(result.body.errors).toBeUndefined();
      const calls = await stack.upstreamCalls();
      expect(Object.keys(calls.byRoute).filter((route) => route.startsWith('POST '))).toHaveLength(1);
    }
  });

  test('a gateway asking for an inline trace gets one every time: its operation runs', async () => {
    const headers = { ...(await bearer('gateway')), 'apollo-federation-include-trace': 'ftv1' };
    const first = await stack.query(DASHBOARD, { id: 'cus_acme' }, headers);
    const again = await stack.query(DASHBOARD, { id: 'cus_acme' }, headers);
    const traceOf = (result: GraphQLResult) =>
      (result.body as { extensions?: Record<string, unknown> }).extensions?.['ftv1'];
    expect(typeof traceOf(first)).toBe('string');
    expect(typeof traceOf(again)).toBe('string');
    expect(again.body.data).toEqual(first.body.data);
  });
});
