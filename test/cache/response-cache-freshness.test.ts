/**
 * What keeps the response cache's answers fresh beyond the events: writes through the facade, the
 * reads in flight when an invalidation arrives, the maximum age, the byte cap, and the
 * subscribe-time customer check of many subscribers sharing one read.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
const ACCOUNT_ROUTE = 'GET /v3/customers/{customerId}/accounts/{accountId}';

const USDC_OF_ADA =
  '{ account(customerId: "cus_ada", id: "acc_ada_polygon") { balances { currency available } } }';
/** A record none of the other tests reads, so it is not held when its test starts. */
const GLOBEX_ACCOUNT = '{ account(customerId: "cus_globex", id: "acc_globex_eth") { id } }';
type Balances = { account: { balances: { currency: string; available: string }[] } };

describe('with the cache on', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true', WEBHOOK_SECRETS: secret } });

  const usdcOfAda = async (): Promise<number> => {
    const result = await stack.query<Balances>(USDC_OF_ADA);
    return Number(
      result.body.data!.account.balances.find((held) => held.currency === 'USDC')?.available ?? 0,
    );
  };

  test('a write through the facade drops what it changes: the next read shows it', async () => {
    const before = await usdcOfAda();
    const topUp = await stack.query(
      'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }',
      {
        input: {
          accountId: 'acc_ada_polygon',
          amount: '7.00',
          currency: 'USDC',
          idempotencyKey: `cache-top-up-${Date.now()}`,
        },
      },
    );
    expect(topUp.body.errors, JSON.stringify(topUp.body.errors)).toBeUndefined();
    await stack.resetUpstreamCalls();
    expect(await usdcOfAda()).toBe(before + 7);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [ACCOUNT_ROUTE]: 1 });
  });

  test("a write naming its customer drops that customer's answers and no other's", async () => {
    const parties = '{ customer(id: "cus_acme") { relatedParties(first: 100) { nodes { id } } } }';
    const globex = '{ customer(id: "cus_globex") { id displayName } }';
    type Parties = { customer: { relatedParties: { nodes: unknown[] } } };
    const before = (await stack.query<Parties>(parties)).body.data!.customer.relatedParties.nodes.length;
    await stack.query(globex);
    const created = await stack.query(
      'mutation ($input: CreateRelatedPartyInput!) { createRelatedParty(input: $input) { relatedParty { id } } }',
      {
        input: {
          customerId: 'cus_acme',
          partyType: 'person',
          roles: ['DIRECTOR'],
          person: { firstName: 'Mary', lastName: 'Jackson', residenceCountry: 'US' },
          idempotencyKey: `cache-party-${Date.now()}`,
        },
      },
    );
    expect(created.body.errors, JSON.stringify(created.body.errors)).toBeUndefined();
    await stack.resetUpstreamCalls();

    const after = (await stack.query<Parties>(parties)).body.data!.customer.relatedParties.nodes.length;
    expect(after).toBe(before + 1);
    await stack.query(globex);
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/related-parties': 1,
    });
  });

  test('a read in flight when its invalidation arrives does not keep its answer', async () => {
    // The upstream answers slowly, so the read is still in flight when the webhook is acknowledged.
    await stack.setFaults({ latency: { fixedMs: 400, jitterMs: 0 } });
    const inFlight = stack.query(GLOBEX_ACCOUNT);
    let arrived = 0;
    await waitFor(
      () => arrived === 1,
      'the read to reach the upstream',
      10_000,
      async () => {
        arrived = (await stack.upstreamCalls()).byRoute[ACCOUNT_ROUTE] ?? 0;
      },
    );
    const event = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_globex',
      resourceType: 'account',
      resourceId: 'acc_globex_eth',
    });
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    expect((await inFlight).body.errors).toBeUndefined();
    await stack.clearFaults();
    await stack.resetUpstreamCalls();

    await stack.query(GLOBEX_ACCOUNT);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [ACCOUNT_ROUTE]: 1 });
    // And that answer is kept: no invalidation named it while it was in flight.
    await stack.query(GLOBEX_ACCOUNT);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [ACCOUNT_ROUTE]: 1 });
  });

  test('subscribers checking one customer at once share one read of it', async () => {
    const subscribers = 60;
    const clients = [stack.connect(), stack.connect(), stack.connect()];
    const subscriptions = Array.from({ length: subscribers }, (_, index) =>
      clients[index % clients.length]!.subscribe(
        'subscription { customerChanged(customerId: "cus_ada") { eventId } }',
      ),
    );
    await stack.subscriptionsStarted(subscribers);
    // Every one of them is running: none was refused or ended before the count was read.
    expect(subscriptions.filter((received) => received.completed || received.errors.length > 0)).toEqual([]);
    expect((await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}']).toBe(1);
    for (const client of clients) await client.dispose();
  });
});

describe('with a maximum age of one second', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true', CACHE_MAX_AGE_SECONDS: '1' } });

  test('an answer no event dropped is read again once it reaches the maximum age', async () => {
    const read = () => stack.query('{ customer(id: "cus_acme") { id } }');
    await read();
    await stack.resetUpstreamCalls();
    let calls = 0;
    await waitFor(
      () => calls === 1,
      'the answer to expire',
      10_000,
      async () => {
        await read();
        calls = (await stack.upstreamCalls()).total;
      },
    );
    expect(stack.app.responseCache!.stats().expirations).toBeGreaterThanOrEqual(1);
  });
});

describe('with a cap of 4 KiB', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true', CACHE_MAX_BYTES: '4096' } });

  test('the least recently used answers leave first, and the bytes held stay under the cap', async () => {
    const records = [
      '{ customer(id: "cus_acme") { id } }',
      '{ customer(id: "cus_globex") { id } }',
      '{ customer(id: "cus_ada") { id } }',
      '{ capability(customerId: "cus_acme", id: "cap_acme_ach") { id } }',
      '{ relatedParty(customerId: "cus_acme", id: "rp_acme_ceo") { id } }',
      '{ rule(customerId: "cus_acme", id: "rul_acme_sweep") { id } }',
      '{ transfer(customerId: "cus_acme", id: "trf_acme_payout") { id } }',
      '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id } }',
    ];
    for (const record of records) expect((await stack.query(record)).body.errors).toBeUndefined();
    const stats = stack.app.responseCache!.stats();
    expect(stats.evictions).toBeGreaterThan(0);
    expect(stats.bytes).toBeLessThanOrEqual(4096);

    await stack.resetUpstreamCalls();
    await stack.query(records.at(-1)!);
    expect((await stack.upstreamCalls()).total).toBe(0);
    await stack.query(records[0]!);
    expect((await stack.upstreamCalls()).total).toBe(1);
  });
});

describe('with the cache off', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'false' } });

  test('every operation asks the upstream, and there is no cache to count', async () => {
    await stack.query('{ customer(id: "cus_acme") { id } }');
    await stack.query('{ customer(id: "cus_acme") { id } }');
    expect((await stack.upstreamCalls()).total).toBe(2);
    expect(stack.app.responseCache).toBeUndefined();
  });
});
