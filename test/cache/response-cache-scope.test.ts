/**
 * The response cache sits below the access check: for every customer-scoped field, a scoped
 * caller's answer with the cache holding the resource (read by the operator a moment before) is
 * the answer it gets with nothing held. Another customer's caller is refused either way, with no
 * upstream call; the customer's own caller gets the same data either way.
 */
import { describe, expect, test } from 'vitest';
import type { TestCallerName } from '../support/tokens.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import type { GraphQLResult } from '../support/harness/facade.ts';

const stack: Stack = useStack({ env: { CACHE_ENABLED: 'true', QUERY_MAX_COST: '100000' } });

/** Every customer-scoped way into acme's data, one operation each. */
const FIELDS: Record<string, string> = {
  customer: '{ customer(id: "cus_acme") { id displayName updatedAt } }',
  'customer lists': `{ customer(id: "cus_acme") {
    accounts { nodes { id } } relatedParties { nodes { id } } capabilities { nodes { id } }
    documents { nodes { id } } recipients { nodes { id } } tasks { nodes { id } } quotes { nodes { id } }
    transfers { nodes { id } } rules { nodes { id } }
  } }`,
  account: '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id balances { available } } }',
  'account fees':
    '{ account(customerId: "cus_acme", id: "acc_acme_eth") { fees { breakdown { developer { bips } } } } }',
  capability: '{ capability(customerId: "cus_acme", id: "cap_acme_ach") { id status } }',
  relatedParty: '{ relatedParty(customerId: "cus_acme", id: "rp_acme_ceo") { id } }',
  customerDocument: '{ customerDocument(customerId: "cus_acme", id: "doc_acme_incorporation") { id } }',
  recipient: '{ recipient(customerId: "cus_acme", id: "rcp_acme_supplier") { id } }',
  task: '{ task(customerId: "cus_acme", id: "tsk_acme_ownership") { id } }',
  taskSubmission:
    '{ taskSubmission(customerId: "cus_acme", taskId: "tsk_acme_ownership", id: "tsb_acme_ownership_1") { id } }',
  quote: '{ quote(customerId: "cus_acme", id: "quo_acme_open") { id } }',
  transfer: '{ transfer(customerId: "cus_acme", id: "trf_acme_payout") { id } }',
  rule: '{ rule(customerId: "cus_acme", id: "rul_acme_sweep") { id } }',
  _entities: `{ _entities(representations: [
    { __typename: "Customer", id: "cus_acme" },
    { __typename: "Account", customerId: "cus_acme", id: "acc_acme_eth" },
    { __typename: "RelatedParty", customerId: "cus_acme", id: "rp_acme_ceo" }
  ]) { ... on Customer { id } ... on Account { id } ... on RelatedParty { id } } }`,
};

/** What a caller can tell of an answer: its data and its errors' paths, codes and messages. */
function seen(result: GraphQLResult): unknown {
  return {
    status: result.status,
    data: result.body.data,
    errors: result.body.errors?.map(({ path, message, extensions }) => ({
      path,
      message,
      code: extensions?.code,
    })),
  };
}

async function answerOf(caller: TestCallerName, document: string): Promise<GraphQLResult> {
  return stack.queryAs(caller, document);
}

describe('a scoped caller and the cache', () => {
  test.each(Object.entries(FIELDS))('%s: a hit answers what the miss answers', async (_field, document) => {
    const cache = stack.app.responseCache!;
    for (const caller of ['globex', 'acme'] as const) {
      cache.invalidate([{ kind: 'everything' }]);
      await stack.resetUpstreamCalls();
      const miss = await answerOf(caller, document);
      const missCalls = (await stack.upstreamCalls()).total;

      // The operator reads it all: everything the document reads is held now.
      const warm = await stack.query(document);
      expect(warm.body.errors).toBeUndefined();
      expect(cache.stats().entries).toBeGreaterThan(0);

      await stack.resetUpstreamCalls();
      const hit = await answerOf(caller, document);
      expect(seen(hit)).toEqual(seen(miss));
      expect((await stack.upstreamCalls()).total).toBe(0);
      if (caller === 'globex') {
        // Refused by its scope before any upstream request, held answer or not.
        expect(missCalls).toBe(0);
        expect(miss.body.errors?.length).toBeGreaterThan(0);
      } else {
        expect(miss.body.errors).toBeUndefined();
      }
    }
  });

  test('node and nodes: a hit answers what the miss answers', async () => {
    const ids = await stack.query<{ account: { nodeId: string }; customer: { nodeId: string } }>(
      '{ account(customerId: "cus_acme", id: "acc_acme_eth") { nodeId } customer(id: "cus_acme") { nodeId } }',
    );
    const { account, customer } = ids.body.data!;
    const document = `{ node(id: "${account.nodeId}") { nodeId } nodes(ids: ["${customer.nodeId}", "${account.nodeId}"]) { nodeId } }`;
    const cache = stack.app.responseCache!;
    cache.invalidate([{ kind: 'everything' }]);
    const miss = await answerOf('globex', document);
    expect(miss.body.errors?.length).toBeGreaterThan(0);
    const warm = await stack.query(document);
    expect(warm.body.errors, JSON.stringify(warm.body.errors)).toBeUndefined();
    await stack.resetUpstreamCalls();
    const hit = await answerOf('globex', document);
    expect(seen(hit)).toEqual(seen(miss));
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
