/**
 * The held whole answers (src/graph/answer-cache.ts) as an attacker meets them, against a real
 * emulator and a real facade with real tokens: no held answer reaches a caller a fresh execution
 * would refuse or answer otherwise (an expired token, a spent budget, a role or an environment
 * changed under one subject, another customer's entities, another text under a persisted-query
 * hash, a write racing the query), nothing the door counts or measures is skipped by a held answer,
 * input the facade answers without held answers is answered alike, and what the held answers keep
 * in memory stays within what they count. test/cache/answer-cache.test.ts covers the key's
 * callers, scopes, errors and reads.
 */
import { createHash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { requiredValueOf, scrape } from '../support/metrics.ts';
import { waitFor } from '../support/harness/wait.ts';
import { LIVE_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { bearer, issuerSignedToken } from '../support/tokens.ts';
import type { CacheRead, CachedAnswer } from '../../src/upstream/response-cache.ts';

const stack = useStack({
  env: { CACHE_ENABLED: 'true', QUERY_MAX_COST: '100000', RATE_LIMIT_BY_CLIENT: 'test-batch-job=3' },
});

const CUSTOMER = 'query Customer($id: ID!) { customer(id: $id) { id displayName status } }';

async function metric(url: string, name: string): Promise<number> {
  return requiredValueOf(await scrape(url), name);
}

/** Node's collector, reachable without starting the test process with `--expose-gc`. */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Lets the current job end (a WeakRef keeps its target alive until then), then collects. */
async function collectGarbage(): Promise<void> {
  const gc = collector();
  for (let round = 0; round < 3; round += 1) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
}

describe('memory', () => {
  test('a held answer keeps alive no upstream answer the response cache has let go', async () => {
    const cache = stack.app.responseCache!;
    // Watches (weakly) each body the response cache hands out for the customer's record.
    const handed: WeakRef<object>[] = [];
    const read = cache.read;
    cache.read = async (request: CacheRead, load: () => Promise<CachedAnswer>) => {
      const answer = await read.call(cache, request, load);
      if (request.path === '/v3/customers/cus_acme' && typeof answer.body === 'object' && answer.body) {
        handed.push(new WeakRef(answer.body));
      }
      return answer;
    };
    try {
      // Two held answers made from one held record.
      await stack.queryAs('acme', '{ customer(id: "cus_acme") { id } }');
      await stack.queryAs('acme', '{ customer(id: "cus_acme") { displayName } }');
      expect(handed).toHaveLength(2);
      expect(handed[0]!.deref()).toBe(handed[1]!.deref());
      // The record read anew (a caller's `no-cache`; an event, a write, the maximum age or the byte
      // cap drop it alike): the response cache no longer holds the first body.
      const headers = { ...(await bearer('acme')), 'cache-control': 'no-cache' };
      await stack.query('{ customer(id: "cus_acme") { id } }', undefined, headers);
      expect(handed).toHaveLength(3);
      expect(handed[2]!.deref()).not.toBe(handed[0]!.deref());
    } finally {
      cache.read = read;
    }
    // The second answer, still held but no longer current, must not keep the first body alive:
    // otherwise answers that read large pages pin every page the response cache let go, past both caps.
    await collectGarbage();
    expect(handed[0]!.deref()).toBeUndefined();

    // And it is not served: it executes over the record held now.
    await stack.resetUpstreamCalls();
    const again = await stack.queryAs('acme', '{ customer(id: "cus_acme") { displayName } }');
    expect(again.body.data).toMatchObject({ customer: { displayName: expect.any(String) } });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a held answer counts the record of what it was made from, not only its data', async () => {
    // Many distinct reads, each answering a few bytes: the record of the reads is most of what is
    // held. Fourteen aliases (the limit is fifteen) under each customer of a page of three.
    const instants = Array.from(
      { length: 14 },
      (_, index) => `2020-01-01T00:00:00.${String(index).padStart(3, '0')}Z`,
    );
    const lists = instants
      .map(
        (instant, index) =>
          `a${index}: accounts(first: 1, updatedSince: "${instant}") { pageInfo { hasNextPage } }`,
      )
      .join(' ');
    const document = `{ customers(first: 3) { nodes { id ${lists} } } }`;
    const bytesBefore = await metric(stack.metricsUrl, 'facade_answer_cache_bytes');
    const keptBefore = await metric(stack.metricsUrl, 'facade_answer_cache_kept_total');
    const result = await stack.queryAs<{ customers: { nodes: { id: string }[] } }>('operator', document);
    expect(result.body.errors).toBeUndefined();
    const customerIds = result.body.data!.customers.nodes.map(({ id }) => id);
    expect(customerIds).toHaveLength(3);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_kept_total')).toBe(keptBefore + 1);

    // What the held answer records of each read: at least the path and query of the upstream
    // request, counted as the answer's own key is (two bytes a character).
    const paths = customerIds.flatMap((id) =>
      instants.map(
        (instant) =>
          `/v3/customers/${id}/accounts?${new URLSearchParams({ limit: '1', updatedSince: instant })}`,
      ),
    );
    expect((await stack.upstreamCalls()).total).toBe(1 + paths.length);
    const recorded = paths.reduce((sum, path) => sum + 2 * path.length, 0);
    const data = 2 * JSON.stringify(result.body.data).length;
    const counted = (await metric(stack.metricsUrl, 'facade_answer_cache_bytes')) - bytesBefore;
    expect(counted).toBeGreaterThanOrEqual(data + recorded);
  });
});

describe('bad input', () => {
  test('variables nested deeper than JSON.stringify can write: the query is answered as without the answer cache', async () => {
    // JSON.parse reads this (10 kB); JSON.stringify throws RangeError on it. The operation declares
    // no such variable, so the door and the executor let it be, and only the answer's key reads it.
    const depth = 5_000;
    const authorization = (await bearer('acme')).authorization;
    const response = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', authorization },
      body: `{"query":${JSON.stringify(CUSTOMER)},"variables":{"id":"cus_acme","deep":${'['.repeat(depth)}${']'.repeat(depth)}}}`,
    });
    const body = (await response.json()) as { data?: unknown; errors?: unknown[] };
    expect(response.status).toBe(200);
    expect(body.errors).toBeUndefined();
    expect(body.data).toEqual({
      customer: { id: 'cus_acme', displayName: expect.any(String), status: expect.any(String) },
    });
    expect(stack.logs().filter((line) => line.includes('"level":"error"'))).toEqual([]);
  });
});

describe('races', () => {
  test('a write through the facade while a query reads what it changes: the query after the write never meets the old answer', async () => {
    const parties = '{ customer(id: "cus_acme") { id relatedParties(first: 100) { nodes { id } } } }';
    type Parties = { customer: { relatedParties: { nodes: { id: string }[] } } };
    const idsOf = (result: { body: { data?: Parties | null } }) =>
      result.body.data!.customer.relatedParties.nodes.map(({ id }) => id);
    const before = idsOf(await stack.queryAs<Parties>('acme', parties));
    // Held no more once read anew: the racing query below reads upstream, slowly.
    await stack.query(parties, undefined, { ...(await bearer('acme')), 'cache-control': 'no-cache' });
    await stack.setFaults({ latency: { fixedMs: 300, jitterMs: 0 } });
    await stack.resetUpstreamCalls();
    const racing = stack.query<Parties>(parties, undefined, {
      ...(await bearer('acme')),
      'cache-control': 'no-cache',
    });
    let reading = 0;
    await waitFor(
      () => reading === 1,
      "the racing query's read of the list to reach the upstream",
      10_000,
      async () => {
        reading =
          (await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}/related-parties'] ?? 0;
      },
    );
    const created = await stack.queryAs<{ createRelatedParty: { relatedParty: { id: string } } }>(
      'acme',
      'mutation ($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id } } }',
      {
        input: {
          customerId: 'cus_acme',
          partyType: 'person',
          roles: ['DIRECTOR'],
          person: { firstName: 'Katherine', lastName: 'Johnson', residenceCountry: 'US' },
          idempotencyKey: `answer-race-${Date.now()}`,
        },
      },
    );
    expect(created.body.errors, JSON.stringify(created.body.errors)).toBeUndefined();
    expect((await racing).body.errors).toBeUndefined();
    await stack.clearFaults();

    // Whatever the racing query saw and kept, the next one sees the write.
    const after = idsOf(await stack.queryAs<Parties>('acme', parties));
    expect(after).toEqual([...before, created.body.data!.createRelatedParty.relatedParty.id]);
  });
});

describe('the door before every held answer', () => {
  test('an expired token with the claims of a token whose answer is held is refused (401), not served', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { sub: 'expiring-holder', client_id: 'expiring-holder' };
    const valid = await issuerSignedToken(claims);
    const expired = await issuerSignedToken({ ...claims, iat: now - 900, exp: now - 600 });
    const asked = (token: string) =>
      stack.query(CUSTOMER, { id: 'cus_acme' }, { authorization: `Bearer ${token}` });
    await asked(valid);
    expect((await asked(valid)).body.data).toMatchObject({ customer: { id: 'cus_acme' } });

    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const refused = await asked(expired);
    expect(refused.status).toBe(401);
    expect(refused.body.data ?? null).toBeNull();
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits);
  });

  test("a held answer spends the caller's operation budget like an execution: refused (429) once it is spent", async () => {
    // `test-batch-job` may run three operations a window: one executed, two held, then refused.
    const statuses: number[] = [];
    for (let sent = 0; sent < 3; sent += 1) {
      statuses.push((await stack.queryAs('batchJob', CUSTOMER, { id: 'cus_acme' })).status);
    }
    expect(statuses).toEqual([200, 200, 200]);
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const refused = await stack.queryAs('batchJob', CUSTOMER, { id: 'cus_acme' });
    expect(refused.status).toBe(429);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect(refused.body.data ?? null).toBeNull();
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits);
  });

  test("a held answer is measured by the door: X-GraphQL-Cost gives the operation's own estimate, and no upstream call", async () => {
    const headers = { ...(await bearer('acme')), 'x-graphql-cost': 'true' };
    const costOf = (result: { body: unknown }) =>
      (result.body as { extensions?: { cost?: { estimated: number; upstreamCalls: number } } }).extensions
        ?.cost;
    const executed = await stack.query(CUSTOMER, { id: 'cus_acme' }, headers);
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const held = await stack.query(CUSTOMER, { id: 'cus_acme' }, headers);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
    expect(held.body.data).toEqual(executed.body.data);
    expect(costOf(held)?.estimated).toBe(costOf(executed)?.estimated);
    expect(costOf(held)?.estimated).toBeGreaterThan(0);
    expect(costOf(held)?.upstreamCalls).toBe(0);
  });

  test('variables that serialise alike but are not alike (1e400 is Infinity, written as null) are refused, not served', async () => {
    const document = `query Accounts($since: DateTime) {
      customer(id: "cus_acme") { accounts(updatedSince: $since) { nodes { id } } }
    }`;
    const authorization = (await bearer('acme')).authorization;
    const post = async (variables: string) => {
      const response = await fetch(stack.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization },
        body: `{"query":${JSON.stringify(document)},"variables":${variables}}`,
      });
      return (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
    };
    expect((await post('{"since":null}')).errors).toBeUndefined();
    expect((await post('{"since":null}')).data).toMatchObject({
      customer: { accounts: { nodes: expect.any(Array) } },
    });
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const infinite = await post('{"since":1e400}');
    expect(infinite.data ?? null).toBeNull();
    expect(infinite.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits);
  });

  test('one document, two operations: the operation named is the one answered, held or not', async () => {
    const document = `query Names { customer(id: "cus_acme") { displayName } }
      query Statuses { customer(id: "cus_acme") { status } }`;
    const authorization = (await bearer('acme')).authorization;
    const run = async (operationName: string) => {
      const response = await fetch(stack.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization },
        body: JSON.stringify({ query: document, operationName }),
      });
      return ((await response.json()) as { data?: unknown }).data;
    };
    const names = await run('Names');
    expect(names).toEqual({ customer: { displayName: expect.any(String) } });
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    expect(await run('Names')).toEqual(names);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
    expect(await run('Statuses')).toEqual({ customer: { status: expect.any(String) } });
  });
  test('a persisted-query hash names the text it was computed from: another text under a held hash is refused, never answered', async () => {
    const names = '{ customer(id: "cus_acme") { displayName } }';
    const statuses = '{ customer(id: "cus_acme") { status } }';
    const persistedQuery = { version: 1, sha256Hash: createHash('sha256').update(names).digest('hex') };
    const authorization = (await bearer('acme')).authorization;
    const post = async (body: Record<string, unknown>) => {
      const response = await fetch(stack.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as { data?: unknown } };
    };
    const registered = await post({ query: names, extensions: { persistedQuery } });
    expect(registered.body.data).toEqual({ customer: { displayName: expect.any(String) } });

    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const otherText = await post({ query: statuses, extensions: { persistedQuery } });
    expect(otherText.status).toBe(400);
    expect(otherText.body.data ?? null).toBeNull();
    // The hash alone runs the text it was registered with, and finds that text's held answer.
    expect((await post({ extensions: { persistedQuery } })).body).toEqual(registered.body);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
  });
  test("federation: another customer's caller sending the same representations gets its own refusal, not the held entities", async () => {
    const document = `query Entities($representations: [_Any!]!) {
      _entities(representations: $representations) { ... on Customer { id displayName } }
    }`;
    const variables = { representations: [{ __typename: 'Customer', id: 'cus_acme' }] };
    const fresh = await stack.queryAs('globex', document, variables);
    await stack.queryAs('acme', document, variables);
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    const held = await stack.queryAs('acme', document, variables);
    expect(held.body.data).toEqual({ _entities: [{ id: 'cus_acme', displayName: expect.any(String) }] });
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);

    const other = await stack.queryAs('globex', document, variables);
    expect(other.body.data).toEqual({ _entities: [null] });
    expect(other.body.errors?.[0]?.extensions?.code).toBe(fresh.body.errors?.[0]?.extensions?.code);
    expect(other.body.errors?.[0]?.extensions?.code).toBeDefined();
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
  });

  test('a @live query over HTTP is refused before any held answer is looked up, and none is kept', async () => {
    const live = 'query Live @live { customer(id: "cus_acme") { id displayName } }';
    const kept = await metric(stack.metricsUrl, 'facade_answer_cache_kept_total');
    const hits = await metric(stack.metricsUrl, 'facade_answer_cache_hits_total');
    await stack.resetUpstreamCalls();
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const refused = await stack.queryAs('acme', live);
      expect(refused.status).toBe(400);
      expect(refused.body.data ?? null).toBeNull();
      expect(refused.body.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_kept_total')).toBe(kept);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits);
  });
});

describe('INTROSPECTION=off: the SDL plugin before every held answer', () => {
  const closed = useStack({ env: { CACHE_ENABLED: 'true', INTROSPECTION: 'off' } });
  const READ_SDL = '{ _service { sdl } institutions(first: 1) { nodes { id } } }';

  test('a schema reader whose role is gone, same subject and client, is refused (403), not served its held answer', async () => {
    const claims = { sub: 'sdl-reader', client_id: 'sdl-reader', customer_ids: [] };
    const reader = await issuerSignedToken({ ...claims, roles: ['schema-reader'] });
    const demoted = await issuerSignedToken({ ...claims, roles: [] });
    const asked = (token: string) => closed.query(READ_SDL, undefined, { authorization: `Bearer ${token}` });
    expect((await asked(reader)).body.errors).toBeUndefined();
    const hits = await metric(closed.metricsUrl, 'facade_answer_cache_hits_total');
    const held = await asked(reader);
    expect(held.body.data).toMatchObject({ _service: { sdl: expect.stringContaining('type Query') } });
    expect(await metric(closed.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);

    const refused = await asked(demoted);
    expect(refused.status).toBe(403);
    expect(refused.body.data ?? null).toBeNull();
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // Anonymously, even the document's answer is refused before anything is looked up.
    const anonymous = await closed.queryAnonymously(READ_SDL);
    expect(anonymous.status).toBe(401);
    expect(await metric(closed.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
  });
});

describe('a key per environment', () => {
  const both = useStack({
    env: {
      CACHE_ENABLED: 'true',
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY,
      UPSTREAM_API_KEY_LIVE: LIVE_KEY,
    },
  });

  test("one subject, client and roles bound to the other environment meets none of the first one's held answers", async () => {
    const claims = {
      sub: 'env-hopper',
      client_id: 'env-hopper',
      roles: ['operator'],
      customer_ids: undefined,
    };
    const sandbox = await issuerSignedToken({ ...claims, environment: 'sandbox' });
    const live = await issuerSignedToken({ ...claims, environment: 'live' });
    const CUSTOMERS = '{ customers(first: 100) { nodes { id } } }';
    const asked = (token: string) =>
      both.query<{ customers: { nodes: { id: string }[] } }>(CUSTOMERS, undefined, {
        authorization: `Bearer ${token}`,
      });
    const idsOf = (result: Awaited<ReturnType<typeof asked>>) =>
      result.body.data?.customers.nodes.map(({ id }) => id);
    expect(idsOf(await asked(sandbox))).toEqual(['cus_acme', 'cus_ada', 'cus_globex']);
    const hits = await metric(both.metricsUrl, 'facade_answer_cache_hits_total');
    expect(idsOf(await asked(sandbox))).toEqual(['cus_acme', 'cus_ada', 'cus_globex']);
    expect(await metric(both.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);

    expect(idsOf(await asked(live))).toEqual(['cus_live_northwind']);
    expect(await metric(both.metricsUrl, 'facade_answer_cache_hits_total')).toBe(hits + 1);
    expect(await both.emulator.upstreamCallsByKey()).toMatchObject({ 'live-read-write': expect.any(Number) });
  });
});
