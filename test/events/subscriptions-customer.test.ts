/**
 * Subscriptions that name a customer: an unknown customer (or another customer, for a scoped
 * caller) answers NOT_FOUND at subscribe time, with exact upstream call counts; `customerChanged`
 * follows the customer itself, live and replayed; `events(customerId:, since:)` replays what the
 * upstream's reads still show before going live.
 */
import { describe, expect, test } from 'vitest';
import { tokenFor } from '../support/tokens.ts';
import { createRelatedParty } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

const CUSTOMER_READ = 'GET /v3/customers/{customerId}';

interface UpstreamCalls {
  total: number;
  byRoute: Record<string, number>;
}

async function upstreamCalls(): Promise<UpstreamCalls> {
  const calls = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as UpstreamCalls;
  return { total: calls.total, byRoute: calls.byRoute };
}

async function resetUpstreamCalls(): Promise<void> {
  await fetch(`${stack.emulator.url}/_emulator/requests`, { method: 'DELETE' });
}

const asAcme = async () => ({ Authorization: `Bearer ${await tokenFor('acme')}` });

/** Connects `client` (graphql-ws connects lazily) so its capability discovery is not counted later. */
async function connected<C extends { subscribe(query: string): { stop(): void; done: Promise<void> } }>(
  client: C,
): Promise<C> {
  const warmUp = client.subscribe(`subscription { events(types: ["none.ever"]) { eventId } }`);
  await stack.subscriptionsStarted(1);
  warmUp.stop();
  await warmUp.done;
  return client;
}

const codesOf = (errors: unknown[]) =>
  errors.map((error) => (error as { extensions?: { code?: string } }).extensions?.code);

const createParty = (customerId: string, lastName: string) =>
  createRelatedParty(stack.emulator, customerId, lastName);

/** Every subscription field that names a customer, for `customerId`. */
const SUBSCRIPTIONS_OF = (customerId: string) => [
  `subscription { customerChanged(customerId: "${customerId}") { customerId } }`,
  `subscription { accountChanged(customerId: "${customerId}") { accountId } }`,
  `subscription { capabilityChanged(customerId: "${customerId}") { capabilityId } }`,
  `subscription { relatedPartyChanged(customerId: "${customerId}") { relatedPartyId } }`,
  `subscription { documentChanged(customerId: "${customerId}") { documentId } }`,
  `subscription { transferChanged(customerId: "${customerId}") { transferId } }`,
  `subscription { ruleChanged(customerId: "${customerId}") { ruleId } }`,
  `subscription { events(customerId: "${customerId}") { eventId } }`,
];

describe('a subscription to a customer that does not exist', () => {
  test('answers NOT_FOUND on every field, after exactly one read of the customer', async () => {
    const operator = await connected(stack.connect());
    for (const query of SUBSCRIPTIONS_OF('cus_nope')) {
      await resetUpstreamCalls();
      const refused = operator.subscribe(query);
      await refused.done;
      // graphql-ws counts a refused operation as started too: keep the harness's count in step.
      await stack.subscriptionsStarted(1);

      expect(codesOf(refused.errors), query).toEqual(['NOT_FOUND']);
      expect(refused.data).toEqual([]);
      expect(await upstreamCalls(), query).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
    }
  });

  test('answers the same NOT_FOUND to a scoped caller for another customer, with no upstream call', async () => {
    const acme = await connected(stack.connect(await asAcme()));
    for (const query of SUBSCRIPTIONS_OF('cus_globex')) {
      await resetUpstreamCalls();
      const refused = acme.subscribe(query);
      await refused.done;
      await stack.subscriptionsStarted(1);

      expect(codesOf(refused.errors), query).toEqual(['NOT_FOUND']);
      expect(refused.data).toEqual([]);
      expect((await upstreamCalls()).total, query).toBe(0);
    }
  });

  test('a scoped caller’s own customer is read once and the subscription listens', async () => {
    const acme = await connected(stack.connect(await asAcme()));
    await resetUpstreamCalls();
    const own = acme.subscribe(`subscription { accountChanged(customerId: "cus_acme") { accountId } }`);
    await stack.subscriptionsStarted(1);

    expect(await upstreamCalls()).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
    expect(own.errors).toEqual([]);
    own.stop();
    await own.done;
  });
});

const CUSTOMER_CHANGED = `subscription ($customerId: ID!, $since: DateTime) {
  customerChanged(customerId: $customerId, since: $since) {
    eventId type occurredAt replayed customerId customer { id displayName }
  }
}`;

describe('customerChanged', () => {
  test('delivers the customer’s own changes live, read as it is now, to a scoped caller too', async () => {
    const operatorFeed = stack.connect().subscribe(CUSTOMER_CHANGED, { customerId: 'cus_acme' });
    const acmeFeed = stack.connect(await asAcme()).subscribe(CUSTOMER_CHANGED, { customerId: 'cus_acme' });
    const globexFeed = stack.connect().subscribe(CUSTOMER_CHANGED, { customerId: 'cus_globex' });
    await stack.subscriptionsStarted(3);

    // Creating a related party updates its customer upstream (`customer.updated`).
    await createParty('cus_acme', 'Live');
    await waitFor(() => operatorFeed.data.length >= 1 && acmeFeed.data.length >= 1, 'the customer change');

    for (const feed of [operatorFeed, acmeFeed]) {
      expect(feed.data).toEqual([
        {
          customerChanged: {
            eventId: expect.stringMatching(/^evt_/),
            type: 'customer.updated',
            occurredAt: expect.any(String),
            replayed: false,
            customerId: 'cus_acme',
            customer: { id: 'cus_acme', displayName: expect.any(String) },
          },
        },
      ]);
      expect(feed.errors).toEqual([]);
    }
    expect(globexFeed.data).toEqual([]);
    for (const feed of [operatorFeed, acmeFeed, globexFeed]) feed.stop();
  });

  test('with since replays the customer’s latest change from one read of it, then goes live', async () => {
    const before = new Date(Date.now() - 60_000).toISOString();
    await createParty('cus_globex', 'Before-Replay');

    const operator = await connected(stack.connect());
    await resetUpstreamCalls();
    const feed = operator.subscribe(CUSTOMER_CHANGED, { customerId: 'cus_globex', since: before });
    await stack.subscriptionsStarted(1);
    await waitFor(() => feed.data.length >= 1, 'the replayed change');
    // The subscribe-time read of the customer is the replay: one upstream call in all.
    expect(await upstreamCalls()).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
    const replayed = feed.data[0].customerChanged;
    expect(replayed).toEqual({
      eventId: `replay:cus_globex:${replayed.occurredAt}`,
      type: 'customer.updated',
      occurredAt: expect.any(String),
      replayed: true,
      customerId: 'cus_globex',
      customer: { id: 'cus_globex', displayName: expect.any(String) },
    });

    await createParty('cus_globex', 'After-Replay');
    await waitFor(() => feed.data.length >= 2, 'the live change');
    expect(feed.data[1].customerChanged).toMatchObject({ type: 'customer.updated', replayed: false });
    expect(Date.parse(feed.data[1].customerChanged.occurredAt)).toBeGreaterThan(
      Date.parse(replayed.occurredAt),
    );
    expect(feed.errors).toEqual([]);
    feed.stop();
  });

  test('with a since after the customer’s last change replays nothing', async () => {
    const customer = await stack.emulator.rest('GET', '/v3/customers/cus_acme');
    const justAfter = new Date(Date.parse(customer.body.data.updatedAt as string) + 1).toISOString();

    const operator = await connected(stack.connect());
    await resetUpstreamCalls();
    const feed = operator.subscribe(CUSTOMER_CHANGED, { customerId: 'cus_acme', since: justAfter });
    await stack.subscriptionsStarted(1);

    expect(await upstreamCalls()).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
    expect(feed.data).toEqual([]);
    expect(feed.errors).toEqual([]);
    feed.stop();
  });
});

const EVENTS_SINCE = `subscription ($customerId: ID, $since: DateTime, $types: [String!]) {
  events(customerId: $customerId, since: $since, types: $types) {
    eventId type replayed customerId resourceType resourceId
    resource { ... on RelatedParty { id } ... on Customer { id } }
  }
}`;

describe('events with since', () => {
  test('replays the customer’s changes the lists still show, then goes live', async () => {
    const missed = await createParty('cus_globex', 'Missed');
    // The party's creation is the customer's latest change too, at the same instant; `since` is inclusive.
    const party = await stack.emulator.rest('GET', `/v3/customers/cus_globex/related-parties/${missed}`);
    const since = party.body.data.updatedAt as string;

    const operator = await connected(stack.connect());
    await resetUpstreamCalls();
    const feed = operator.subscribe(EVENTS_SINCE, { customerId: 'cus_globex', since });
    await stack.subscriptionsStarted(1);
    // The customer, then one page of each replayable list: accounts, capabilities, parties, transfers, rules.
    expect(await upstreamCalls()).toEqual({
      total: 6,
      byRoute: {
        [CUSTOMER_READ]: 1,
        'GET /v3/customers/{customerId}/accounts': 1,
        'GET /v3/customers/{customerId}/capabilities': 1,
        'GET /v3/customers/{customerId}/related-parties': 1,
        'GET /v3/customers/{customerId}/transfers': 1,
        'GET /v3/customers/{customerId}/rules': 1,
      },
    });
    await waitFor(() => feed.data.length >= 2, 'the replayed changes');
    const replayed = feed.data.slice(0, 2).map((data) => data.events);
    expect(replayed).toHaveLength(2);
    expect(replayed).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'related_party.created',
          replayed: true,
          customerId: 'cus_globex',
          resourceType: 'related_party',
          resourceId: missed,
          resource: { id: missed },
        }),
        expect.objectContaining({
          type: 'customer.updated',
          replayed: true,
          resourceType: 'customer',
          resourceId: 'cus_globex',
          resource: { id: 'cus_globex' },
        }),
      ]),
    );

    const live = await createParty('cus_globex', 'Live');
    await waitFor(
      () => feed.data.some((data) => data.events.resourceId === live),
      'the party created after subscribing',
    );
    expect(feed.data.find((data) => data.events.resourceId === live).events).toMatchObject({
      type: 'related_party.created',
      replayed: false,
    });
    expect(feed.errors).toEqual([]);
    feed.stop();
  });

  test('reads only the lists of the kinds asked for', async () => {
    const operator = await connected(stack.connect());
    await resetUpstreamCalls();
    const feed = operator.subscribe(EVENTS_SINCE, {
      customerId: 'cus_acme',
      since: new Date().toISOString(),
      types: ['rule.archived'],
    });
    await stack.subscriptionsStarted(1);

    expect(await upstreamCalls()).toEqual({
      total: 2,
      byRoute: { [CUSTOMER_READ]: 1, 'GET /v3/customers/{customerId}/rules': 1 },
    });
    expect(feed.errors).toEqual([]);
    feed.stop();
  });

  test('without customerId answers BAD_USER_INPUT with no upstream call', async () => {
    const operator = await connected(stack.connect());
    await resetUpstreamCalls();
    const refused = operator.subscribe(EVENTS_SINCE, { since: new Date().toISOString() });
    await refused.done;
    await stack.subscriptionsStarted(1);

    expect(codesOf(refused.errors)).toEqual(['BAD_USER_INPUT']);
    expect((await upstreamCalls()).total).toBe(0);
  });

  test('a scoped caller replays its own customer the same way', async () => {
    const since = new Date(Date.now() - 60_000).toISOString();
    const feed = stack.connect(await asAcme()).subscribe(EVENTS_SINCE, {
      customerId: 'cus_acme',
      since,
      types: ['customer.updated', 'customer.created'],
    });
    await stack.subscriptionsStarted(1);
    await waitFor(() => feed.data.length >= 1, 'the replayed customer change');

    expect(feed.data[0].events).toMatchObject({
      resourceType: 'customer',
      resourceId: 'cus_acme',
      replayed: true,
    });
    expect(feed.errors).toEqual([]);
    feed.stop();
  });
});
