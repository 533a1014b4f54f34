/**
 * An attacker's view of the door's newer surfaces, against real servers (the emulator counts every
 * upstream call, tokens come from the run's issuer): Apollo's multipart HTTP subscriptions at
 * `/graphql` (path tricks, a mutation or query sent with the multipart `Accept`, malformed and huge
 * bodies, a hostile page's simple request); `@live` queries (another customer's answer through a
 * group an operator opened, `node(id:)`/`nodes(ids:)`, `@live` on a mutation or a subscription,
 * `@live(if:)`); `@defer` at the facade; and the Customer entity fetch that skips the record read
 * when only lists are selected.
 */
import { describe, expect, test } from 'vitest';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer, tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true', CACHE_ENABLED: 'true' } });

const MULTIPART = 'multipart/mixed;subscriptionSpec=1.0,application/json;q=0.9';
const GLOBEX_EVENTS = 'subscription { accountChanged(customerId: "cus_globex") { eventId } }';
const TOP_UP = `mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", amount: "1.00", currency: "USDC", idempotencyKey: "attack-${Date.now()}" }) { topUp { id } } }`;

const DASHBOARD = `query Dashboard($customerId: ID!) @live {
  customer(id: $customerId) { id displayName accounts(first: 10) { edges { node { id } } } }
}`;

/** A raw request at `path` of the facade (kept as written: no URL normalisation by the client). */
async function raw(path: string, init: { method?: string; headers?: Record<string, string>; body?: string }) {
  const response = await fetch(`${stack.facadeUrl}${path}`, init);
  const text = await response.text();
  let body: { errors?: { message: string; extensions?: { code?: string } }[]; data?: unknown } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  return { status: response.status, contentType: response.headers.get('content-type') ?? '', text, body };
}

/**
 * Upstream calls but the facade's own probe of its key (`GET /v3/capabilities`, made once in the
 * background after it starts, at a moment no test controls).
 */
const callerReads = async () => {
  const calls = await stack.upstreamCalls();
  return calls.total - (calls.byRoute['GET /v3/capabilities'] ?? 0);
};

const topUpsSeen = async () =>
  Object.entries((await stack.upstreamCalls()).byRoute)
    .filter(([route]) => route.includes('topup'))
    .reduce((sum, [, count]) => sum + count, 0);

describe('multipart subscriptions under attack', () => {
  test.each(['//graphql', '/graphql/', '/GraphQL', '/%2Fgraphql', '/graphql//', '/graphql?x=1'])(
    '%s: another customer’s subscription is never streamed, and no token is 401',
    async (path) => {
      await stack.resetUpstreamCalls();
      const body = JSON.stringify({ query: GLOBEX_EVENTS });
      const acme = await raw(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: MULTIPART, ...(await bearer('acme')) },
        body,
      });
      expect(acme.contentType).not.toMatch(/multipart/);
      expect(acme.text).not.toContain('payload');
      if (acme.status === 200) {
        expect(acme.body?.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      } else {
        expect([400, 404, 405]).toContain(acme.status);
      }
      const anonymous = await raw(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: MULTIPART },
        body,
      });
      expect(anonymous.contentType).not.toMatch(/multipart/);
      expect([401, 404]).toContain(anonymous.status);
      expect(await callerReads()).toBe(0);
    },
  );

  test('a mutation sent with the multipart Accept is refused and never runs, by POST, GET or a hostile page', async () => {
    await stack.resetUpstreamCalls();
    const operator = await bearer('operator');
    const post = await openMultipartStream(stack.facadeUrl, TOP_UP, operator);
    expect(post.status).toBe(400);
    expect(post.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] });

    const get = await openMultipartStream(stack.facadeUrl, TOP_UP, operator, {}, 'GET');
    expect(get.status).toBe(400);
    expect(get.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] });

    // A GET asking for JSON: Apollo Server refuses a mutation over GET.
    const url = new URL(stack.graphqlUrl);
    url.searchParams.set('query', TOP_UP);
    const plainGet = await fetch(url, {
      headers: { accept: 'application/json', 'apollo-require-preflight': 'true', ...operator },
    });
    expect(plainGet.status).toBe(405);

    // A page of another origin can send a simple request only: no Authorization, text/plain.
    const simple = await raw('/graphql', {
      method: 'POST',
      headers: { origin: 'https://hostile.example', accept: MULTIPART, 'content-type': 'text/plain' },
      body: JSON.stringify({ query: TOP_UP }),
    });
    expect(simple.status).toBe(401);
    expect(simple.body?.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    // A GET with this Accept is a simple request too (the Accept value is safelisted): still anonymous.
    const simpleGet = await raw(`/graphql?query=${encodeURIComponent(TOP_UP)}`, {
      headers: { origin: 'https://hostile.example', accept: MULTIPART },
    });
    expect(simpleGet.status).toBe(401);
    expect(simpleGet.body?.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(await topUpsSeen()).toBe(0);
    expect(await callerReads()).toBe(0);
  });

  test('a document holding a subscription and a mutation runs neither when operationName picks the mutation', async () => {
    await stack.resetUpstreamCalls();
    const both = `subscription Watch { accountChanged(customerId: "cus_acme") { eventId } }\n${TOP_UP.replace('mutation {', 'mutation Pay {')}`;
    const operator = await bearer('operator');
    for (const operationName of ['Pay', undefined]) {
      const response = await raw('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: MULTIPART, ...operator },
        body: JSON.stringify({ query: both, operationName }),
      });
      expect(response.status, String(operationName)).toBe(400);
      expect(response.contentType).not.toMatch(/multipart/);
    }
    const live = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const client = live.client;
    const errors: unknown[] = [];
    await new Promise<void>((resolve) => {
      client.subscribe(
        { query: both, operationName: 'Pay' },
        { next: () => undefined, error: (error) => (errors.push(error), resolve()), complete: resolve },
      );
    });
    expect(errors).toHaveLength(1);
    expect(await topUpsSeen()).toBe(0);
    expect(await callerReads()).toBe(0);
    await live.dispose();
  });

  test('a plain query with the multipart Accept is refused without an upstream read', async () => {
    await stack.resetUpstreamCalls();
    const query = await openMultipartStream(
      stack.facadeUrl,
      '{ customer(id: "cus_acme") { id } }',
      await bearer('acme'),
    );
    expect(query.status).toBe(400);
    expect(JSON.stringify(query.body)).toContain('subscriptions only');
    expect(await callerReads()).toBe(0);
  });

  test('malformed, mistyped and oversized bodies get a clear 4xx and the server keeps serving', async () => {
    await stack.resetUpstreamCalls();
    const operator = await bearer('operator');
    const send = (body: string, contentType = 'application/json') =>
      raw('/graphql', {
        method: 'POST',
        headers: { 'content-type': contentType, accept: MULTIPART, ...operator },
        body,
      });
    const broken = await send('{"query": ');
    expect(broken.status).toBe(400);
    expect(broken.contentType).not.toMatch(/multipart/);

    const array = await send(JSON.stringify([{ query: GLOBEX_EVENTS }]));
    expect(array.status).toBe(400);
    expect(array.body?.errors?.[0]?.extensions?.code).toBe('GRAPHQL_PARSE_FAILED');

    const notString = await send(JSON.stringify({ query: { subscription: true } }));
    expect(notString.status).toBe(400);

    const badVariables = await send(JSON.stringify({ query: GLOBEX_EVENTS, variables: [1] }));
    expect(badVariables.status).toBe(400);

    const huge = await send(JSON.stringify({ query: `subscription { ${'a'.repeat(200_000)} }` }));
    expect(huge.status).toBe(413);
    expect(huge.contentType).not.toMatch(/multipart/);

    const getBadJson = await raw('/graphql?query=subscription%7Ba%7D&variables=%7B', {
      headers: { accept: MULTIPART, ...operator },
    });
    expect(getBadJson.status).toBe(400);
    expect(getBadJson.body?.errors?.[0]?.extensions?.code).toBe('GRAPHQL_PARSE_FAILED');

    expect(await callerReads()).toBe(0);
    // Still serving.
    const ok = await stack.queryAs('operator', '{ customer(id: "cus_acme") { id } }');
    expect(ok.body.data).toEqual({ customer: { id: 'cus_acme' } });
  });
});

describe('live queries under attack', () => {
  test('a customer-scoped caller cannot join the group an operator opened for another customer', async () => {
    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const watching = operator.subscribe(DASHBOARD, { customerId: 'cus_globex' });
    await waitFor(() => watching.data.length === 1, 'the operator’s first answer');
    await stack.resetUpstreamCalls();

    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const joined = acme.subscribe(DASHBOARD, { customerId: 'cus_globex' });
    await joined.done;
    expect(joined.completed).toBe(true);
    expect(joined.data).toEqual([{ customer: null }]);
    expect(joined.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    // The same over multipart, with the same document and variables as the open group.
    const stream = await openMultipartStream(stack.facadeUrl, DASHBOARD, await bearer('acme'), {
      customerId: 'cus_globex',
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.stringify(stream.body)).not.toContain('cus_globex"');
    expect(stream.body).toMatchObject({ errors: [{ extensions: { code: 'NOT_FOUND' } }] });
    expect(await callerReads()).toBe(0);
    watching.stop();
    await operator.dispose();
    await acme.dispose();
  });

  test('the same list document under an operator and a customer-scoped caller: each re-execution stays in its scope', async () => {
    const CUSTOMERS = 'query @live { customers(first: 50) { nodes { id } } }';
    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const wide = operator.subscribe(CUSTOMERS);
    await waitFor(() => wide.data.length === 1, 'the operator’s first list');
    const narrow = acme.subscribe(CUSTOMERS);
    await waitFor(() => narrow.data.length === 1, 'acme’s first list');
    expect(narrow.data[0]).toEqual({ customers: { nodes: [{ id: 'cus_acme' }] } });

    // A write through the facade makes the list stale: both groups run again, each in its scope.
    const created = await stack.queryAs<{ createCustomer: { customer: { id: string } } }>(
      'operator',
      `mutation { createCustomer(input: { idempotencyKey: "attack-live-${Date.now()}", type: "business", externalId: "attack-${Date.now()}", displayName: "Attack" }) { customer { id } } }`,
    );
    const newId = created.body.data!.createCustomer.customer.id;
    await waitFor(
      () => JSON.stringify(wide.data).includes(newId),
      'the operator’s list with the new customer',
    );
    expect(JSON.stringify(narrow.data)).not.toContain(newId);
    expect(narrow.data.every((data) => JSON.stringify(data) === JSON.stringify(narrow.data[0]))).toBe(true);
    wide.stop();
    narrow.stop();
    await operator.dispose();
    await acme.dispose();
  });

  test('node(id:) and nodes(ids:) of another customer in a live query are refused before the upstream', async () => {
    await stack.resetUpstreamCalls();
    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const node = acme.subscribe('query @live { node(id: "cus_globex") { nodeId } }');
    await waitFor(() => node.data.length + node.errors.length >= 1, 'the node answer');
    const nodes = acme.subscribe(
      'query @live { nodes(ids: ["cus_acme/acc_acme_eth", "cus_globex", "cus_globex/acc_globex_usdc"]) { nodeId } }',
    );
    await waitFor(() => nodes.data.length + nodes.errors.length >= 1, 'the nodes answer');
    const seen = JSON.stringify([node.data, node.errors, nodes.data, nodes.errors]);
    expect(seen).not.toMatch(/"nodeId":"cus_globex/);
    // Only acme's own account was read.
    const calls = await stack.upstreamCalls();
    expect(Object.keys(calls.byRoute).every((route) => !route.includes('globex'))).toBe(true);
    expect(await callerReads()).toBeLessThanOrEqual(1);
    node.stop();
    nodes.stop();
    await acme.dispose();
  });

  test('@live on a mutation or a subscription is refused, over HTTP and graphql-ws, and runs nothing', async () => {
    await stack.resetUpstreamCalls();
    const liveMutation = TOP_UP.replace('mutation {', 'mutation @live {');
    const http = await raw('/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('operator')) },
      body: JSON.stringify({ query: liveMutation }),
    });
    expect(http.body?.data).toBeUndefined();
    expect(http.body?.errors).toEqual([
      expect.objectContaining({
        message: 'Directive "@live" may not be used on MUTATION.',
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
      }),
    ]);

    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const overWs = operator.subscribe(liveMutation);
    await overWs.done;
    expect(overWs.data).toEqual([]);
    expect(overWs.errors.length).toBeGreaterThan(0);

    const liveSubscription = operator.subscribe(
      'subscription @live { accountChanged(customerId: "cus_acme") { eventId } }',
    );
    await liveSubscription.done;
    expect(liveSubscription.data).toEqual([]);
    expect(JSON.stringify(liveSubscription.errors)).toMatch(/@live/);

    const overMultipart = await openMultipartStream(stack.facadeUrl, liveMutation, await bearer('operator'));
    expect(overMultipart.status).toBe(400);
    expect(await topUpsSeen()).toBe(0);
    expect(await callerReads()).toBe(0);
    await operator.dispose();
  });

  test('@live(if: $live) with false over a live transport is a plain query there: refused, nothing read', async () => {
    await stack.resetUpstreamCalls();
    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const document = 'query ($live: Boolean!) @live(if: $live) { customer(id: "cus_globex") { id } }';
    const off = acme.subscribe(document, { live: false });
    await off.done;
    expect(off.data).toEqual([]);
    expect(off.errors.length).toBeGreaterThan(0);
    const on = acme.subscribe(document, { live: true });
    await on.done;
    expect(on.data).toEqual([{ customer: null }]);
    expect(on.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    expect(await callerReads()).toBe(0);
    await acme.dispose();
  });
});

describe('@defer and the list-only Customer entity fetch', () => {
  const ENTITIES = `query ($representations: [_Any!]!) {
    _entities(representations: $representations) { ... on Customer { accounts(first: 5) { edges { node { id } } } } }
  }`;

  test('@defer at the facade is refused with where it is served, before any upstream call', async () => {
    await stack.resetUpstreamCalls();
    const deferred = await stack.queryAs(
      'operator',
      '{ customer(id: "cus_acme") { id ... @defer { accounts(first: 5) { edges { node { id } } } } } }',
    );
    expect(deferred.status).toBe(400);
    expect(deferred.body.data).toBeUndefined();
    expect(deferred.body.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/^@defer is served by the gateway/),
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect(await callerReads()).toBe(0);
  });

  test('lists of another customer’s entity are refused with 0 upstream calls; an unknown id is NOT_FOUND', async () => {
    await stack.resetUpstreamCalls();
    const other = await stack.queryAs('acme', ENTITIES, {
      representations: [{ __typename: 'Customer', id: 'cus_globex' }],
    });
    expect(other.body.data).toEqual({ _entities: [{ accounts: null }] });
    expect(other.body.errors).toEqual([
      expect.objectContaining({
        path: ['_entities', 0, 'accounts'],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    // Every list a Customer entity has, and the id: still nothing read, each list refused.
    const LISTS = [
      'accounts',
      'relatedParties',
      'capabilities',
      'documents',
      'recipients',
      'tasks',
      'quotes',
      'transfers',
      'rules',
    ];
    const everyList = await stack.queryAs(
      'acme',
      `query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Customer { id ${LISTS.map((list) => `${list}(first: 5) { pageInfo { hasNextPage } }`).join(' ')} } } }`,
      {
        representations: [
          { __typename: 'Customer', id: 'cus_globex' },
          { __typename: 'Customer', id: 'cus_ada' },
        ],
      },
    );
    expect(everyList.body.errors?.length).toBe(LISTS.length * 2);
    expect(everyList.body.errors?.every((error) => error.extensions?.['code'] === 'NOT_FOUND')).toBe(true);
    for (const entity of (everyList.body.data as { _entities: Record<string, unknown>[] })._entities) {
      for (const list of LISTS) expect(entity[list]).toBeNull();
    }
    // Out of scope whether or not it exists: no read tells the two apart.
    const outOfScope = await stack.queryAs('acme', ENTITIES, {
      representations: [{ __typename: 'Customer', id: 'cus_nobody' }],
    });
    expect(outOfScope.body.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
    expect(await callerReads()).toBe(0);

    // No token: nothing is resolved at all.
    const anonymous = await stack.queryAnonymously(ENTITIES, {
      representations: [{ __typename: 'Customer', id: 'cus_acme' }],
    });
    expect(anonymous.body.data?._entities ?? null).toBeNull();
    expect(await callerReads()).toBe(0);

    // An operator asking for an unknown customer's lists: the list read answers NOT_FOUND.
    const unknown = await stack.queryAs('operator', ENTITIES, {
      representations: [{ __typename: 'Customer', id: 'cus_nobody' }],
    });
    expect(unknown.body.data).toEqual({ _entities: [{ accounts: null }] });
    expect(unknown.body.errors?.[0]?.extensions?.['code']).toBe('NOT_FOUND');
  });
});
