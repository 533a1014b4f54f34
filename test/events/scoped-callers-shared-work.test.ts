/**
 * Nothing a refused or scoped caller does steers shared work or tells of other customers, against
 * real servers with the emulator and Redis counting: refused subscriptions leave no watched id and
 * cause no reconciliation read; cursors tell a scoped caller nothing of others' events; a write
 * the upstream refused drops no cached answer on either replica; junk posts from the upstream's
 * address cannot crowd out its signed webhooks; `upstreamCalls` counts the calls made.
 */
import { afterAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { connectRedis } from '../support/harness/redis.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { parseExposition, valueOf } from '../support/metrics.ts';
import { tokenFor } from '../support/tokens.ts';

const secret = generateWebhookSecret();

const acme = async () => ({ Authorization: `Bearer ${await tokenFor('acme')}` });

/** A subscription of `stack`'s facade over SSE, read to its end: its status and first error's code. */
async function streamOnce(
  stack: Stack,
  credentials: Record<string, string>,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<{ status: number; code: string | undefined }> {
  const response = await fetch(`${stack.facadeUrl}/graphql/stream`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      authorization: credentials.Authorization!,
    },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  const json = (response.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? (/^data: ?(.*)$/m.exec(text)?.[1] ?? '{}')
    : text;
  const body = JSON.parse(json) as { errors?: { extensions?: { code?: string } }[] };
  return { status: response.status, code: body.errors?.[0]?.extensions?.code };
}

/**
 * Starts a subscription with `subscribe` and resolves once it listens (the facade counts every
 * subscription it started, refused ones included, so the count is read before).
 */
async function listening<T>(stack: Stack, subscribe: () => T): Promise<T> {
  const before = stack.facade.lifecycle.count('subscriptionStarted');
  const subscription = subscribe();
  await stack.facade.lifecycle.reached('subscriptionStarted', before + 1, 'the subscription to listen');
  return subscription;
}

describe('subscriptions refused by the caller’s scope (Redis, the reconciler every second)', () => {
  const stack = useStack({
    redis: true,
    env: { RECONCILE_INTERVAL_SECONDS: '1', RECONCILE_GRACE_SECONDS: '0' },
  });
  let connection: ReturnType<typeof connectRedis> | undefined;
  const redis = () => (connection ??= connectRedis());
  const prefix = () => stack.config.events.redisKeyPrefix;
  const watchedIds = () => redis().zrange(`${prefix()}events:watched:sandbox`, 0, -1);
  const reconciledUntil = () => redis().get(`${prefix()}events:reconciled-until:sandbox`);
  /** Resolves once the reconciler has completed `runs` more runs. */
  const reconcilerRuns = async (runs: number) => {
    for (let run = 0; run < runs; run += 1) {
      const before = await reconciledUntil();
      let now = before;
      await waitFor(
        () => now !== before,
        'a reconciliation run',
        10_000,
        async () => {
          now = await reconciledUntil();
        },
      );
    }
  };

  test('a followed customer is watched while subscribed, and no longer once the subscription ends', async () => {
    const followed = await listening(stack, () =>
      stack.connect().subscribe('subscription { accountChanged(customerId: "cus_acme") { eventId } }'),
    );
    let watched: string[] = [];
    await waitFor(
      () => watched.length === 1,
      'cus_acme watched',
      10_000,
      async () => {
        watched = await watchedIds();
      },
    );
    expect(JSON.parse(watched[0]!)).toEqual(['cus_acme', expect.any(String)]);
    await reconcilerRuns(1);
    followed.stop();
    await waitFor(
      () => watched.length === 0,
      'no customer watched',
      10_000,
      async () => {
        watched = await watchedIds();
      },
    );
  });

  test('40 refused subscriptions (graphql-ws and SSE) leave 0 watched ids and cause 0 reconciler calls', async () => {
    // Runs that started while a customer was still watched are over before counting.
    await reconcilerRuns(1);
    await stack.resetUpstreamCalls();
    const ids = ['cus_globex', 'cus_ada', ...Array.from({ length: 38 }, (_, index) => `cus_madeup${index}`)];
    const client = stack.connect(await acme());
    const refusals: (string | undefined)[] = [];
    for (const [index, customerId] of ids.entries()) {
      const query = 'subscription ($id: ID!) { customerChanged(customerId: $id) { eventId } }';
      if (index % 2 === 0) {
        const received = client.subscribe(query, { id: customerId });
        await received.done;
        expect(received.data).toEqual([]);
        refusals.push((received.errors[0] as { extensions?: { code?: string } }).extensions?.code);
      } else {
        const answer = await streamOnce(stack, await acme(), query, { id: customerId });
        refusals.push(answer.code);
      }
    }
    expect(refusals).toEqual(ids.map(() => 'NOT_FOUND'));
    expect(await watchedIds()).toEqual([]);
    await reconcilerRuns(2);
    expect(await watchedIds()).toEqual([]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a customer the upstream cannot serve holds back no other: the window moves on, the failure is counted and retried', async () => {
    // Another replica's watch of a customer the upstream no longer serves (404 to every read).
    await redis().zadd(
      `${prefix()}events:watched:sandbox`,
      Date.now() + 600_000,
      JSON.stringify(['cus_gone', 'another-replica']),
    );
    const failures = async () =>
      valueOf(
        parseExposition(await stack.app.metrics.registry.metrics()),
        'facade_events_reconcile_failures_total',
      );
    const failedBefore = await failures();
    const ada = await listening(stack, () =>
      stack
        .connect()
        .subscribe('subscription { accountChanged(customerId: "cus_ada") { eventId accountId } }'),
    );
    await reconcilerRuns(1);
    // No webhook endpoint is registered: this change is heard of only through the reconciler.
    const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '1.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);
    await waitFor(() => ada.data.length === 1, 'the missed change of ada', 15_000);
    expect(ada.data[0].accountChanged).toMatchObject({
      eventId: expect.stringMatching(/^reconciled:account:acc_ada_polygon:/),
      accountId: 'acc_ada_polygon',
    });
    const until = Number(await reconciledUntil());
    await reconcilerRuns(1);
    expect(Number(await reconciledUntil())).toBeGreaterThan(until);
    expect(await failures()).toBeGreaterThanOrEqual(failedBefore + 2);
    expect(await redis().hexists(`${prefix()}events:reconcile-behind:sandbox`, 'cus_gone')).toBe(1);
    ada.stop();
    await redis().zrem(`${prefix()}events:watched:sandbox`, JSON.stringify(['cus_gone', 'another-replica']));
  });

  afterAll(async () => {
    await connection?.quit();
  });
});

describe('cursors and a scoped caller (the memory log, 20 events held)', () => {
  const stack = useStack({ env: { WEBHOOK_SECRETS: secret, EVENT_LOG_RETENTION: '20' } });
  const FAR_AHEAD = '99999999999999-0';
  const ACCOUNT = `subscription ($customerId: ID!, $after: String) {
    accountChanged(customerId: $customerId, after: $after) { eventId cursor replayed customerId }
  }`;
  const globexEvent = () =>
    upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_globex',
      resourceType: 'account',
      resourceId: 'acc_globex_eth',
    });

  test('the facade key’s environment is learnt once: the first subscription probes it, later ones do not', async () => {
    // The tests below count no upstream call, so this one also leaves the environment known.
    const subscribe = async (credentials: Record<string, string> | undefined) =>
      (
        await listening(stack, () =>
          stack.connect(credentials).subscribe(ACCOUNT, { customerId: 'cus_acme' }),
        )
      ).stop();
    await subscribe(undefined);
    expect((await stack.upstreamCalls()).byRoute['GET /v3/capabilities']).toBe(1);
    await stack.resetUpstreamCalls();
    await subscribe(undefined);
    await subscribe(await acme());
    expect((await stack.upstreamCalls()).byRoute['GET /v3/capabilities']).toBeUndefined();
  });

  test('a far-ahead cursor for another customer answers NOT_FOUND over graphql-ws and SSE, with no upstream call', async () => {
    const received = stack
      .connect(await acme())
      .subscribe(ACCOUNT, { customerId: 'cus_globex', after: FAR_AHEAD });
    await received.done;
    expect(received.data).toEqual([]);
    expect(received.errors).toMatchObject([{ extensions: { code: 'NOT_FOUND' } }]);
    expect(
      await streamOnce(stack, await acme(), ACCOUNT, { customerId: 'cus_globex', after: FAR_AHEAD }),
    ).toEqual({ status: 200, code: 'NOT_FOUND' });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a far-ahead cursor for its own customer resumes from now: others’ events are neither told nor timed', async () => {
    // Counted from this subscription on: the stack's running count also holds the earlier tests'.
    const credentials = await acme();
    const ahead = await listening(stack, () =>
      stack.connect(credentials).subscribe(ACCOUNT, { customerId: 'cus_acme', after: FAR_AHEAD }),
    );
    const other = globexEvent();
    const mine = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, other)).status).toBe(200);
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, mine)).status).toBe(200);
    await waitFor(() => ahead.data.length === 1, 'the acme event');
    expect(ahead.errors).toEqual([]);
    expect(ahead.data[0].accountChanged).toMatchObject({
      eventId: mine.id,
      replayed: false,
      customerId: 'cus_acme',
    });
    ahead.stop();
  });

  test('an expired cursor answers CURSOR_EXPIRED naming no oldest cursor to a scoped caller, and the oldest to an operator', async () => {
    for (let index = 0; index < 25; index += 1) {
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, globexEvent())).status).toBe(200);
    }
    const scoped = stack.connect(await acme()).subscribe(ACCOUNT, { customerId: 'cus_acme', after: '1-0' });
    await scoped.done;
    expect(scoped.errors).toHaveLength(1);
    expect(scoped.errors[0].extensions).toEqual({ code: 'CURSOR_EXPIRED', cursor: '1-0' });
    expect(JSON.stringify(scoped.errors[0])).not.toMatch(/\d{6,}-\d+/);
    const operator = stack.connect().subscribe(ACCOUNT, { customerId: 'cus_acme', after: '1-0' });
    await operator.done;
    expect(operator.errors[0].extensions).toMatchObject({
      code: 'CURSOR_EXPIRED',
      oldestCursor: expect.stringMatching(/^\d+-\d+$/),
    });
  });

  test('an event resumed with `after` is marked replayed; a live one is not', async () => {
    const credentials = await acme();
    const live = await listening(stack, () =>
      stack.connect(credentials).subscribe(ACCOUNT, { customerId: 'cus_acme' }),
    );
    const first = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, first)).status).toBe(200);
    await waitFor(() => live.data.length === 1, 'the first event');
    live.stop();
    const missed = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, missed)).status).toBe(200);

    const resumed = await listening(stack, () =>
      stack
        .connect(credentials)
        .subscribe(ACCOUNT, { customerId: 'cus_acme', after: live.data[0].accountChanged.cursor }),
    );
    await waitFor(() => resumed.data.length === 1, 'the missed event');
    const next = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, next)).status).toBe(200);
    await waitFor(() => resumed.data.length === 2, 'the live event');
    expect(resumed.data.map((data) => [data.accountChanged.eventId, data.accountChanged.replayed])).toEqual([
      [missed.id, true],
      [next.id, false],
    ]);
    resumed.stop();
  });
});

describe('writes the upstream refused, through one of two replicas sharing Redis and the cache', () => {
  const stack = useStack({ facades: 2, redis: true, env: { CACHE_ENABLED: 'true' } });
  const CUSTOMERS = '{ customers(first: 50) { nodes { id } } }';

  test('ten 404 writes by a scoped caller leave the operator’s cached list served from the cache on both replicas', async () => {
    const [writing, other] = stack.facades as [RunningFacade, RunningFacade];
    for (const facade of [writing, other])
      expect((await facade.query(CUSTOMERS)).body.errors).toBeUndefined();
    await stack.resetUpstreamCalls();
    for (let index = 0; index < 10; index += 1) {
      const archived = await writing.queryAs(
        'acme',
        'mutation ($input: ArchiveAccountInput!) { archiveAccount(input: $input) { account { id } } }',
        {
          input: {
            customerId: 'cus_acme',
            accountId: `acc_acme_missing${index}`,
            idempotencyKey: `missing-${index}-${Date.now()}`,
          },
        },
      );
      expect(archived.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    }
    // Each write reached the upstream and was refused there.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'DELETE /v3/customers/{customerId}/accounts/{accountId}': 10,
    });

    await stack.resetUpstreamCalls();
    for (const facade of [writing, other]) {
      for (let read = 0; read < 10; read += 1) {
        expect((await facade.query(CUSTOMERS)).body.errors).toBeUndefined();
      }
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a write that failed with a 5xx may have reached the upstream: it drops the cached list', async () => {
    const [writing] = stack.facades as [RunningFacade, RunningFacade];
    expect((await writing.query(CUSTOMERS)).body.errors).toBeUndefined();
    await stack.setFaults({
      rules: [
        { route: 'DELETE /v3/customers/{customerId}/accounts/{accountId}', kind: 'internal_error', rate: 1 },
      ],
    });
    const archived = await writing.queryAs(
      'acme',
      'mutation ($input: ArchiveAccountInput!) { archiveAccount(input: $input) { account { id } } }',
      {
        input: {
          customerId: 'cus_acme',
          accountId: 'acc_acme_missing',
          idempotencyKey: `failing-${Date.now()}`,
        },
      },
    );
    expect(archived.body.errors).toHaveLength(1);
    await stack.clearFaults();
    await stack.resetUpstreamCalls();
    expect((await writing.query(CUSTOMERS)).body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers': 1 });
  });
});

describe('the webhook route, junk from the upstream’s own address', () => {
  const stack = useStack({ env: { WEBHOOK_SECRETS: secret } });

  test('a signed delivery after 100 junk posts from the same address is accepted, once', async () => {
    const statuses: number[] = [];
    for (let index = 0; index < 100; index += 1) {
      const junk = await fetch(stack.facade.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      statuses.push(junk.status);
      await junk.body?.cancel();
    }
    // The address budget (answered 429 once refused more than 30 times) still turns unsigned posts away.
    expect(statuses.filter((status) => status === 401)).toHaveLength(31);
    expect(statuses.filter((status) => status === 429)).toHaveLength(69);

    const event = acmeAccountUpdated();
    const accepted = await postSignedEvent(stack.facade.webhookUrl, secret, event);
    expect(accepted).toEqual({
      status: 200,
      body: { received: true, eventId: event.id, duplicate: false },
    });
    const again = await postSignedEvent(stack.facade.webhookUrl, secret, event);
    expect(again).toEqual({ status: 200, body: { received: true, eventId: event.id, duplicate: true } });

    // A well-formed signature that does not match is verified, refused 401, and still counted.
    const forged = await postSignedEvent(
      stack.facade.webhookUrl,
      generateWebhookSecret(),
      acmeAccountUpdated(),
    );
    expect(forged.status).toBe(401);
  });
});

describe('`upstreamCalls` in X-GraphQL-Cost, with the response cache on', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true' } });
  const READ = '{ customer(id: "cus_acme") { id accounts(first: 5) { nodes { id } } } }';
  const costOf = async () => {
    const result = await stack.query(READ, undefined, { 'x-graphql-cost': 'true' });
    expect(result.body.errors).toBeUndefined();
    return (result.body as { extensions: { cost: { upstreamCalls: number } } }).extensions.cost.upstreamCalls;
  };

  test('matches the emulator’s count, for a cold answer and for an all-hit one (0)', async () => {
    const cold = await costOf();
    expect(cold).toBe((await stack.upstreamCalls()).total);
    expect(cold).toBeGreaterThan(0);
    await stack.resetUpstreamCalls();
    const warm = await costOf();
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(warm).toBe(0);
  });
});
