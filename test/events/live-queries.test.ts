/**
 * Live queries (`query @live`) against real servers: the emulator sends its signed webhooks to the
 * facade's registered endpoint, callers hold tokens of the run's issuer, and the emulator counts
 * every upstream call. A dashboard is answered at once and again after a top-up over graphql-ws,
 * SSE and Apollo's multipart protocol; watchers of one dashboard cost its reads once per change however many they are; another
 * customer's dashboard is refused with no upstream call, and another customer's change sends
 * nothing; an unchanged answer is not sent again; token expiry ends a live query as it ends a
 * subscription; over HTTP (POST, GET or in a batch) the query is refused before it reads anything,
 * saying where it updates and how to get one answer; a write through the facade and a change
 * only the reconciler finds each send the new answer.
 */
import { LIVE_TRANSPORTS } from '../../src/edge/live-transports.ts';
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { facadeReads, topUp } from '../support/harness/live-query-top-ups.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer, issuerSignedToken, tokenFor } from '../support/tokens.ts';

const DASHBOARD = `query Dashboard($customerId: ID!) @live {
  customer(id: $customerId) {
    id
    displayName
    accounts(first: 10) { edges { node { id balances { currency available } } } }
  }
}`;

/** The same dashboard with the customer written in, for SSE's raw reader (which sends no variables). */
const dashboardOf = (customerId: string) =>
  DASHBOARD.replace('$customerId: ID!', '').replace('()', '').replace('$customerId', `"${customerId}"`);

interface Dashboard {
  customer: {
    id: string;
    accounts: { edges: { node: { id: string; balances: { currency: string; available: string }[] } }[] };
  };
}

/** The account's available USDC (what the top-ups add to), as a number; 0 when it holds none yet. */
const availableOf = (data: Dashboard, accountId: string) =>
  Number(
    data.customer.accounts.edges
      .find((edge) => edge.node.id === accountId)
      ?.node.balances.find((balance) => balance.currency === 'USDC')?.available ?? '0',
  );

describe('live queries driven by the platform’s webhooks (the emulator sends them)', () => {
  const stack = useStack({
    env: { WEBHOOK_REGISTER: 'true', AUTH_CLOCK_TOLERANCE_SECONDS: '1', CACHE_ENABLED: 'true' },
  });

  test('over graphql-ws: the dashboard at once, then again after a top-up; five watchers cost its reads once', async () => {
    const acme = await bearer('acme');
    const first = stack.connect({ Authorization: acme.authorization });
    const one = first.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => one.data.length === 1, 'the first answer');
    const before = availableOf(one.data[0] as Dashboard, 'acc_acme_eth');
    expect(before).toBeGreaterThan(0);

    // One watcher: what one change costs.
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_acme_eth');
    await waitFor(() => one.data.length === 2, 'the answer after the top-up');
    expect(availableOf(one.data[1] as Dashboard, 'acc_acme_eth')).toBeCloseTo(before + 3, 6);
    const readsForOne = await facadeReads(stack);
    expect(readsForOne).toBeGreaterThan(0);

    // Four more watchers of the same dashboard, on other connections.
    const others = await Promise.all(
      [0, 1, 2, 3].map(async () => stack.connect({ Authorization: acme.authorization })),
    );
    const watchers = [
      one,
      ...others.map((client) => client.subscribe(DASHBOARD, { customerId: 'cus_acme' })),
    ];
    await waitFor(() => watchers.every((watcher) => watcher.data.length >= 1), 'every first answer');
    const counts = watchers.map((watcher) => watcher.data.length);
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_acme_eth');
    await waitFor(
      () => watchers.every((watcher, index) => watcher.data.length === counts[index]! + 1),
      'every watcher’s answer after the second top-up',
    );
    expect(await facadeReads(stack)).toBe(readsForOne);
    for (const watcher of watchers) {
      expect(availableOf(watcher.data.at(-1) as Dashboard, 'acc_acme_eth')).toBeCloseTo(before + 6, 6);
      expect(watcher.errors).toEqual([]);
      watcher.stop();
    }
    for (const client of [first, ...others]) await client.dispose();
  });

  test('over SSE: the dashboard at once, then again after a top-up', async () => {
    const stream = await openSseStream<Dashboard>(
      stack.facadeUrl,
      dashboardOf('cus_acme'),
      await bearer('acme'),
    );
    expect(stream.status).toBe(200);
    const nexts = () => stream.messages.filter((message) => message.event === 'next');
    await waitFor(() => nexts().length === 1, 'the first answer');
    const before = availableOf(nexts()[0]!.data!.data!, 'acc_acme_eth');
    await topUp(stack, 'acc_acme_eth');
    await waitFor(() => nexts().length === 2, 'the answer after the top-up');
    expect(availableOf(nexts()[1]!.data!.data!, 'acc_acme_eth')).toBeCloseTo(before + 3, 6);
    stream.close();
    await stream.ended;
  });

  test('over Apollo’s multipart HTTP protocol: the dashboard at once, then again after a top-up', async () => {
    const acme = await bearer('acme');
    const stream = await openMultipartStream<Dashboard>(
      stack.facadeUrl,
      DASHBOARD,
      { Authorization: acme.authorization },
      { customerId: 'cus_acme' },
    );
    expect(stream.status).toBe(200);
    await waitFor(() => stream.results().length === 1, 'the first answer');
    const before = availableOf(stream.results()[0]!.data!, 'acc_acme_eth');
    await topUp(stack, 'acc_acme_eth');
    await waitFor(() => stream.results().length === 2, 'the answer after the top-up');
    expect(availableOf(stream.results()[1]!.data!, 'acc_acme_eth')).toBeCloseTo(before + 3, 6);
    stream.close();
    await stream.ended;
  });

  test('another customer’s dashboard is refused with no upstream call, over graphql-ws and SSE', async () => {
    await stack.resetUpstreamCalls();
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const refused = client.subscribe(DASHBOARD, { customerId: 'cus_globex' });
    await refused.done;
    expect(refused.completed).toBe(true);
    expect(refused.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    const stream = await openSseStream(stack.facadeUrl, dashboardOf('cus_globex'), await bearer('acme'));
    await stream.ended;
    const messages = stream.messages.map((message) => message.event);
    expect(messages).toEqual(['next', 'complete']);
    expect(stream.messages[0]!.data!.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
    await client.dispose();
  });

  test('a change to another customer re-reads and sends nothing', async () => {
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const watcher = client.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => watcher.data.length === 1, 'the first answer');
    const operator = stack.connect({ Authorization: `Bearer ${await tokenFor('operator')}` });
    const started = stack.facade.lifecycle.count('subscriptionStarted');
    const events = operator.subscribe('subscription { events { eventId customerId } }');
    await stack.facade.lifecycle.reached('subscriptionStarted', started + 1, 'the operator’s subscription');
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_globex_eth');
    // The operator hears the event after every cache on this replica dropped what it names.
    await waitFor(() => events.data.length === 1, 'globex’s event');
    expect(events.data[0].events.customerId).toBe('cus_globex');
    // A live query it made stale would have been run after this turn: give it a few.
    for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    // The operator's subscription reads globex's account for its payload; the dashboard's routes, nothing.
    const { byRoute } = await stack.upstreamCalls();
    expect(byRoute['GET /v3/customers/{customerId}']).toBeUndefined();
    expect(byRoute['GET /v3/customers/{customerId}/accounts']).toBeUndefined();
    expect(byRoute['GET /v3/customers/{customerId}/accounts/{accountId}']).toBe(1);
    expect(watcher.data).toHaveLength(1);
    watcher.stop();
    events.stop();
    await client.dispose();
    await operator.dispose();
  });

  test('token expiry ends a live query with UNAUTHENTICATED, then closes the socket with 4401', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const client = stack.connect({ Authorization: `Bearer ${token}` });
    const watcher = client.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => watcher.data.length === 1, 'the first answer');
    await watcher.done;
    expect(watcher.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/access token of this connection has expired/),
        extensions: { code: 'UNAUTHENTICATED' },
      }),
    ]);
    expect((await client.closed).code).toBe(4401);
    // Nothing is followed for it any more: a change reads nothing for it.
    await stack.resetUpstreamCalls();
    await topUp(stack, 'acc_acme_eth');
    for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(watcher.data).toHaveLength(1);
  });

  test('token expiry ends a live query over SSE: UNAUTHENTICATED, then the stream completes', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const stream = await openSseStream<Dashboard>(stack.facadeUrl, dashboardOf('cus_acme'), {
      authorization: `Bearer ${token}`,
    });
    expect(stream.status).toBe(200);
    await stream.ended;
    expect(stream.messages.map((message) => message.event)).toEqual(['next', 'next', 'complete']);
    expect(stream.messages[1]!.data!.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/access token of this connection has expired/),
        extensions: { code: 'UNAUTHENTICATED' },
      }),
    ]);
  });

  test('over HTTP a live query is refused before it reads anything, saying where it updates and how to get one answer', async () => {
    await stack.resetUpstreamCalls();
    const token = await tokenFor('acme');
    // The refusal's body, as a single request's answer or one element of a batch's.
    const refusedAs = (body: {
      data?: unknown;
      errors?: readonly { message: string; extensions?: Record<string, unknown> }[];
    }) => {
      expect(body.data ?? null).toBeNull();
      expect(body.errors).toHaveLength(1);
      const [error] = body.errors!;
      expect(error!.extensions?.code).toBe('BAD_REQUEST');
      expect(error!.message).toMatch(
        /^This query is marked @live, and over HTTP it would be answered once and never updated\./,
      );
      for (const transport of LIVE_TRANSPORTS)
        expect(error!.message).toContain(`to ${transport.rules.connects.path}`);
      expect(error!.message).toContain('sends queries marked @live to GraphQLWsLink');
      expect(error!.message).toContain('@live(if: false)');
    };
    const posted = await stack.queryAs('acme', DASHBOARD, { customerId: 'cus_acme' });
    expect(posted.status).toBe(400);
    refusedAs(posted.body);
    // GET, as a CDN-friendly client sends a query, and one element of a batch: refused alike.
    const url = new URL(stack.graphqlUrl);
    url.searchParams.set('query', DASHBOARD);
    url.searchParams.set('variables', JSON.stringify({ customerId: 'cus_acme' }));
    const viaGet = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, 'apollo-require-preflight': 'true' },
    });
    expect(viaGet.status).toBe(400);
    refusedAs((await viaGet.json()) as never);
    const batch = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify([
        { query: DASHBOARD, variables: { customerId: 'cus_acme' } },
        { query: '{ __typename }' },
      ]),
    });
    // A batch is answered 200, each operation with its own errors.
    expect(batch.status).toBe(200);
    const [live, plainInBatch] = (await batch.json()) as [never, { data?: unknown; errors?: unknown }];
    refusedAs(live);
    expect(plainInBatch).toEqual({ data: { __typename: 'Query' } });
    // Nothing was read for a refused live query.
    expect((await stack.upstreamCalls()).total).toBe(0);
    // For one answer over HTTP: the same document with @live(if: false), or without @live.
    for (const once of [DASHBOARD.replace('@live', '@live(if: false)'), DASHBOARD.replace(' @live', '')]) {
      const answer = await stack.queryAs('acme', once, { customerId: 'cus_acme' });
      expect(answer.status).toBe(200);
      expect(answer.body.errors).toBeUndefined();
      expect((answer.body.data as unknown as Dashboard).customer.id).toBe('cus_acme');
      expect(answer.body.extensions).toBeUndefined();
    }
  });

  test('a plain query over a live transport is refused, naming where it goes', async () => {
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const refused = client.subscribe(DASHBOARD.replace(' @live', ''), { customerId: 'cus_acme' });
    await refused.done;
    expect(refused.errors.flat()).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/subscriptions only, and queries marked @live/),
      }),
    ]);
    const notLive = client.subscribe(DASHBOARD.replace('@live', '@live(if: false)'), {
      customerId: 'cus_acme',
    });
    await notLive.done;
    expect(notLive.errors.flat()).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/subscriptions only, and queries marked @live/),
      }),
    ]);
    await client.dispose();
  });
});

describe('a re-execution whose answer did not change (a signed webhook that changes nothing)', () => {
  const secret = generateWebhookSecret();
  const stack = useStack({ env: { WEBHOOK_SECRETS: secret, CACHE_ENABLED: 'true' } });

  test('reads the dashboard again and sends nothing', async () => {
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const watcher = client.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => watcher.data.length === 1, 'the first answer');
    await stack.resetUpstreamCalls();
    const posted = await postSignedEvent(
      `${stack.facadeUrl}/webhooks/platform`,
      secret,
      acmeAccountUpdated(),
    );
    expect(posted.status).toBeLessThan(300);
    let reads = 0;
    await waitFor(
      () => reads > 0,
      'the re-read of the dashboard',
      10_000,
      async () => {
        reads = (await stack.upstreamCalls()).total;
      },
    );
    for (let turn = 0; turn < 20; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(watcher.data).toHaveLength(1);
    expect(watcher.errors).toEqual([]);
    watcher.stop();
    await client.dispose();
  });
});

describe('a live query follows writes through the facade and the reconciler, with no webhook', () => {
  const stack = useStack({
    env: { CACHE_ENABLED: 'true', RECONCILE_INTERVAL_SECONDS: '1', RECONCILE_GRACE_SECONDS: '0' },
  });

  test('a top-up through the facade (a write) sends the new dashboard', async () => {
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const watcher = client.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => watcher.data.length === 1, 'the first answer');
    const before = availableOf(watcher.data[0] as Dashboard, 'acc_acme_eth');
    const written = await stack.query(
      `mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", amount: "2.00", currency: "USDC", idempotencyKey: "live-write-${Date.now()}" }) { topUp { id } } }`,
    );
    expect(written.body.errors).toBeUndefined();
    await waitFor(
      () => watcher.data.some((data) => availableOf(data as Dashboard, 'acc_acme_eth') === before + 2),
      'the dashboard after the write',
    );
    watcher.stop();
    await client.dispose();
  });

  test('a top-up whose webhook never comes reaches the dashboard through the reconciler', async () => {
    const client = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` });
    const watcher = client.subscribe(DASHBOARD, { customerId: 'cus_acme' });
    await waitFor(() => watcher.data.length === 1, 'the first answer');
    const before = availableOf(watcher.data.at(-1) as Dashboard, 'acc_acme_eth');
    // At the emulator directly, with no webhook endpoint registered: only the reconciler can tell.
    await topUp(stack, 'acc_acme_eth');
    await waitFor(
      () => watcher.data.some((data) => availableOf(data as Dashboard, 'acc_acme_eth') === before + 3),
      'the dashboard after the reconciliation',
      15_000,
    );
    watcher.stop();
    await client.dispose();
  });
});
