/**
 * The response cache against a real emulator and a real facade: hits cost no upstream call, and
 * every event kind, delivered through the webhook route with a valid signature, drops exactly what
 * its row of `STALE_BY_EVENT_KIND` names, so the next read asks the upstream for those and no more.
 */
import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { SUBSCRIBED_EVENT_KINDS } from '../../src/events/receiving/event-kinds.ts';
import {
  acmeAccountUpdated,
  adaPolygonAccountUpdated,
  postSignedEvent,
  upstreamEvent,
} from '../support/harness/events.ts';
import { useStack } from '../support/harness/stack.ts';

const secret = generateWebhookSecret();
const stack = useStack({
  env: { CACHE_ENABLED: 'true', WEBHOOK_SECRETS: secret, QUERY_MAX_COST: '100000' },
});

/** Every record and list of acme the table can name, and the list of customers, in one operation. */
const EVERYTHING_OF_ACME = `{
  customers(first: 100) { nodes { id } }
  customer(id: "cus_acme") {
    id updatedAt
    accounts { nodes { id } } relatedParties { nodes { id } } capabilities { nodes { id } }
    documents { nodes { id } } quotes { nodes { id } } transfers { nodes { id } } rules { nodes { id } }
  }
  account(customerId: "cus_acme", id: "acc_acme_eth") { id }
  capability(customerId: "cus_acme", id: "cap_acme_ach") { id }
  relatedParty(customerId: "cus_acme", id: "rp_acme_ceo") { id }
  customerDocument(customerId: "cus_acme", id: "doc_acme_incorporation") { id }
  rule(customerId: "cus_acme", id: "rul_acme_sweep") { id }
  transfer(customerId: "cus_acme", id: "trf_acme_payout") { id }
  quote(customerId: "cus_acme", id: "quo_acme_open") { id }
}`;

const CUSTOMER = 'GET /v3/customers/{customerId}';
const CUSTOMERS = 'GET /v3/customers';
const route = (collection: string, id?: string) =>
  `GET /v3/customers/{customerId}/${collection}${id === undefined ? '' : `/{${id}}`}`;

/** Per resource: what an event about it names, and the reads the next operation must send again. */
const CUSTOMER_ROW = { resourceType: 'customer', resourceId: 'cus_acme', sentAgain: [CUSTOMER, CUSTOMERS] };
const ACCOUNT_ROW = {
  resourceType: 'account',
  resourceId: 'acc_acme_eth',
  sentAgain: [route('accounts', 'accountId'), route('accounts')],
};
const CAPABILITY_ROW = {
  resourceType: 'capability',
  resourceId: 'cap_acme_ach',
  sentAgain: [route('capabilities', 'capabilityId'), route('capabilities')],
};
const RELATED_PARTY_ROW = {
  resourceType: 'related_party',
  resourceId: 'rp_acme_ceo',
  sentAgain: [route('related-parties', 'relatedPartyId'), route('related-parties'), CUSTOMER, CUSTOMERS],
};
const DOCUMENT_ROW = {
  resourceType: 'document',
  resourceId: 'doc_acme_incorporation',
  sentAgain: [route('documents', 'documentId'), route('documents')],
};
const RULE_ROW = {
  resourceType: 'rule',
  resourceId: 'rul_acme_sweep',
  sentAgain: [route('rules', 'ruleId'), route('rules')],
};
const TRANSFER_ROW = {
  resourceType: 'transfer',
  resourceId: 'trf_acme_payout',
  sentAgain: [
    route('transfers', 'transferId'),
    route('transfers'),
    route('accounts', 'accountId'),
    route('accounts'),
    route('quotes', 'quoteId'),
    route('quotes'),
  ],
};

/** Per event kind: the resource it is about, and the reads the next operation must send again. */
const ROWS: Record<
  (typeof SUBSCRIBED_EVENT_KINDS)[number],
  { resourceType: string; resourceId: string; sentAgain: string[] }
> = {
  'customer.created': CUSTOMER_ROW,
  'customer.updated': CUSTOMER_ROW,
  'account.created': ACCOUNT_ROW,
  'account.updated': ACCOUNT_ROW,
  'capability.created': CAPABILITY_ROW,
  'capability.status_changed': CAPABILITY_ROW,
  'related_party.created': RELATED_PARTY_ROW,
  'related_party.archived': RELATED_PARTY_ROW,
  'document.archived': DOCUMENT_ROW,
  'rule.created': RULE_ROW,
  'rule.updated': RULE_ROW,
  'rule.archived': RULE_ROW,
  'transfer.created': TRANSFER_ROW,
  'transfer.completed': TRANSFER_ROW,
};

async function readEverything(): Promise<void> {
  const result = await stack.query(EVERYTHING_OF_ACME);
  expect(result.body.errors).toBeUndefined();
}

describe('the response cache', () => {
  test('a repeated operation is answered without an upstream call, and still as no-store', async () => {
    const first = await stack.query(EVERYTHING_OF_ACME);
    expect(first.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(16);
    await stack.resetUpstreamCalls();
    const heldHits = stack.app.responseCache!.stats().hits;

    // The same operation: its whole answer is held, so not even the response cache is asked.
    const again = await stack.query(EVERYTHING_OF_ACME);
    expect(again.headers.get('cache-control')).toBe('no-store');
    expect(JSON.stringify(again.body)).toBe(JSON.stringify(first.body));
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(stack.app.responseCache!.stats().hits).toBe(heldHits);

    // Another operation over the same reads executes, and every read is a held answer.
    const reshaped = await stack.query(EVERYTHING_OF_ACME.replace('id updatedAt', 'updatedAt id'));
    expect(reshaped.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(stack.app.responseCache!.stats().hits).toBeGreaterThanOrEqual(heldHits + 16);
  });

  test.each(Object.entries(ROWS))(
    '%s, through the webhook route, drops exactly its row',
    async (type, row) => {
      await readEverything();
      await stack.resetUpstreamCalls();
      const event = upstreamEvent({ type, environment: 'sandbox', customerId: 'cus_acme', ...row });
      expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);

      await readEverything();
      const calls = await stack.upstreamCalls();
      const expected = Object.fromEntries(row.sentAgain.map((sent) => [sent, 1]));
      expect(calls.byRoute).toEqual(expected);
      expect(calls.total).toBe(row.sentAgain.length);
    },
  );

  test('every subscribed event kind has a row here', () => {
    expect(Object.keys(ROWS).sort()).toEqual([...SUBSCRIBED_EVENT_KINDS].sort());
  });

  test('a forged webhook drops nothing', async () => {
    await readEverything();
    await stack.resetUpstreamCalls();
    const event = acmeAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, generateWebhookSecret(), event)).status).toBe(401);
    await readEverything();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an event of a kind the facade does not know drops everything of its customer', async () => {
    await readEverything();
    await stack.resetUpstreamCalls();
    const event = upstreamEvent({
      type: 'payout_method.added',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'payout_method',
      resourceId: 'pm_1',
    });
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    await readEverything();
    expect((await stack.upstreamCalls()).total).toBe(16);
  });

  test('a change made at the upstream shows on the first read after its webhook is acknowledged', async () => {
    const balance = async () => {
      const result = await stack.query<{ account: { balances: { currency: string; available: string }[] } }>(
        '{ account(customerId: "cus_ada", id: "acc_ada_polygon") { balances { currency available } } }',
      );
      return result.body.data!.account.balances.find((held) => held.currency === 'USDC')?.available ?? '0';
    };
    const before = await balance();
    const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '5.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);
    // No webhook yet: the answer held is the one served.
    expect(await balance()).toBe(before);

    await stack.resetUpstreamCalls();
    const event = adaPolygonAccountUpdated();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, event)).status).toBe(200);
    expect(Number(await balance())).toBe(Number(before) + 5);
    expect((await stack.upstreamCalls()).total).toBe(1);
  });

  test('Cache-Control: no-cache reads the operation through, and the fresh answer is kept', async () => {
    await readEverything();
    await stack.resetUpstreamCalls();
    const through = await stack.query(EVERYTHING_OF_ACME, undefined, { 'cache-control': 'no-cache' });
    expect(through.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).total).toBe(16);
    await stack.resetUpstreamCalls();
    await readEverything();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('the metrics count hits, misses, invalidations and bytes held', async () => {
    await readEverything();
    const text = await (await fetch(stack.metricsUrl)).text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    const stats = stack.app.responseCache!.stats();
    expect(value('facade_upstream_cache_hits_total')).toBe(stats.hits);
    expect(value('facade_upstream_cache_misses_total')).toBe(stats.misses);
    expect(value('facade_upstream_cache_invalidations_total')).toBe(stats.invalidations);
    expect(value('facade_upstream_cache_invalidations_total')).toBeGreaterThan(0);
    expect(value('facade_upstream_cache_evictions_total')).toBe(0);
    expect(value('facade_upstream_cache_bytes')).toBe(stats.bytes);
    expect(value('facade_upstream_cache_bytes')).toBeGreaterThan(0);
  });
});
