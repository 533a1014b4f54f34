/**
 * Two replicas sharing the run's real Redis: an event acknowledged by one drops the stale answers
 * of both, the receiving one before it acknowledges, the other when the event reaches it through
 * the pub/sub.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { adaPolygonAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { connectRedis } from '../support/harness/redis.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
const stack = useStack({ facades: 2, redis: true, env: { CACHE_ENABLED: 'true', WEBHOOK_SECRETS: secret } });
const ACCOUNT_ROUTE = 'GET /v3/customers/{customerId}/accounts/{accountId}';
const USDC_OF_ADA =
  '{ account(customerId: "cus_ada", id: "acc_ada_polygon") { balances { currency available } } }';

async function usdcOfAda(facade: RunningFacade): Promise<number> {
  const result = await facade.query<{ account: { balances: { currency: string; available: string }[] } }>(
    USDC_OF_ADA,
  );
  return Number(result.body.data!.account.balances.find((held) => held.currency === 'USDC')?.available ?? 0);
}

describe('the response cache of two replicas', () => {
  test('a change at the upstream, its webhook acknowledged by one replica, shows on both', async () => {
    const [receiving, other] = stack.facades as [RunningFacade, RunningFacade];
    const before = await usdcOfAda(receiving);
    expect(await usdcOfAda(other)).toBe(before);
    const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '3.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);
    // Held on both until the platform's event says otherwise.
    await stack.resetUpstreamCalls();
    expect(await usdcOfAda(receiving)).toBe(before);
    expect(await usdcOfAda(other)).toBe(before);
    expect((await stack.upstreamCalls()).total).toBe(0);

    const otherCache = other.app.responseCache!;
    const droppedBefore = otherCache.stats().invalidations;
    const event = adaPolygonAccountUpdated();
    expect((await postSignedEvent(receiving.webhookUrl, secret, event)).status).toBe(200);
    // The receiving replica: the first read after the acknowledgement asks the upstream.
    expect(await usdcOfAda(receiving)).toBe(before + 3);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [ACCOUNT_ROUTE]: 1 });

    // The other replica: once the event has reached it through Redis.
    await waitFor(
      () => otherCache.stats().invalidations > droppedBefore,
      'the event to reach the other replica',
    );
    expect(await usdcOfAda(other)).toBe(before + 3);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [ACCOUNT_ROUTE]: 2 });
  });
});

describe('writes through one replica', () => {
  test("drop the other replica's answers through Redis, with no event from the platform", async () => {
    const [writing, other] = stack.facades as [RunningFacade, RunningFacade];
    const parties = '{ customer(id: "cus_globex") { relatedParties(first: 100) { nodes { id } } } }';
    type Parties = { customer: { relatedParties: { nodes: unknown[] } } };
    const count = async (facade: RunningFacade) =>
      (await facade.query<Parties>(parties)).body.data!.customer.relatedParties.nodes.length;
    const before = await count(other);
    expect(await count(writing)).toBe(before);
    const otherCache = other.app.responseCache!;
    const droppedBefore = otherCache.stats().invalidations;

    const created = await writing.query(
      'mutation ($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id } } }',
      {
        input: {
          customerId: 'cus_globex',
          partyType: 'person',
          roles: ['DIRECTOR'],
          person: { firstName: 'Annie', lastName: 'Easley', residenceCountry: 'US' },
          idempotencyKey: `replica-write-${Date.now()}`,
        },
      },
    );
    expect(created.body.errors).toBeUndefined();
    await waitFor(
      () => otherCache.stats().invalidations > droppedBefore,
      'the write to reach the other replica',
    );
    await stack.resetUpstreamCalls();
    expect(await count(other)).toBe(before + 1);
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/related-parties': 1,
    });
  });
});

describe('a message on the write channel that no replica wrote', () => {
  test.each([
    ['not JSON', '{'],
    ['an unknown kind', JSON.stringify({ origin: 'x', stale: [{ kind: 'accounts-of-everyone' }] })],
    [
      'an unknown collection',
      JSON.stringify({ origin: 'x', stale: [{ kind: 'list', customerId: 'c', collection: 'keys' }] }),
    ],
  ])('%s is dropped with a warning, dropping nothing', async (_name, message) => {
    const facade = stack.facades[1]!;
    const cache = facade.app.responseCache!;
    const before = cache.stats().invalidations;
    const warnings = () =>
      facade.logs().filter((line) => line.includes('dropped a malformed cache invalidation'));
    const seen = warnings().length;
    const redis = connectRedis();
    try {
      await redis.publish(`${facade.config.events.redisKeyPrefix}cache:writes`, message);
    } finally {
      redis.disconnect();
    }
    await waitFor(() => warnings().length > seen, 'the warning');
    expect(cache.stats().invalidations).toBe(before);
  });
});

describe('a replica whose Redis is away at start', () => {
  const away = useStack({
    env: { CACHE_ENABLED: 'true', REDIS_URL: 'redis://127.0.0.1:9', RATE_LIMIT_ENABLED: 'false' },
  });

  test('starts and serves, its cache bounded by the maximum age, and says why in its log', async () => {
    const read = '{ customer(id: "cus_acme") { id } }';
    expect((await away.query(read)).body.errors).toBeUndefined();
    expect((await away.query(read)).body.errors).toBeUndefined();
    expect((await away.upstreamCalls()).total).toBe(1);
    expect(
      away.logs().some((line) => line.includes('the response cache waits for Redis to hear events')),
    ).toBe(true);
  });
});
