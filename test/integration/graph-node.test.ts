/**
 * The Node interface: every record whose id is unique by prefix is read again by its `nodeId` through
 * `node(id:)` and `nodes(ids:)`, a customer's records under their customer, with the caller's scope
 * applied before any upstream call.
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

const NODE = /* GraphQL */ `
  query Node($id: ID!) {
    node(id: $id) {
      __typename
      nodeId
      ... on Customer {
        id
      }
      ... on Institution {
        id
      }
      ... on WebhookEndpoint {
        id
      }
      ... on Account {
        id
      }
      ... on RelatedParty {
        id
      }
      ... on Capability {
        id
      }
      ... on CustomerDocument {
        id
      }
      ... on Recipient {
        id
      }
      ... on Task {
        id
      }
      ... on Quote {
        id
      }
      ... on Transfer {
        id
      }
      ... on Rule {
        id
      }
    }
  }
`;

describe('node(id:)', () => {
  it.each([
    ['Customer', 'cus_acme', 'cus_acme', 'GET /v3/customers/{customerId}'],
    ['Institution', 'ins_lead_bank', 'ins_lead_bank', 'GET /v3/institutions/{institutionId}'],
    ['WebhookEndpoint', 'we_demo', 'we_demo', 'GET /v3/webhooks/{webhookId}'],
    [
      'Account',
      'cus_acme/acc_acme_eth',
      'acc_acme_eth',
      'GET /v3/customers/{customerId}/accounts/{accountId}',
    ],
    [
      'RelatedParty',
      'cus_acme/rp_acme_ceo',
      'rp_acme_ceo',
      'GET /v3/customers/{customerId}/related-parties/{relatedPartyId}',
    ],
    [
      'Capability',
      'cus_acme/cap_acme_ach',
      'cap_acme_ach',
      'GET /v3/customers/{customerId}/capabilities/{capabilityId}',
    ],
    [
      'CustomerDocument',
      'cus_acme/doc_acme_ownership',
      'doc_acme_ownership',
      'GET /v3/customers/{customerId}/documents/{documentId}',
    ],
    [
      'Recipient',
      'cus_acme/rcp_acme_supplier',
      'rcp_acme_supplier',
      'GET /v3/customers/{customerId}/recipients/{recipientId}',
    ],
    [
      'Task',
      'cus_acme/tsk_acme_ownership',
      'tsk_acme_ownership',
      'GET /v3/customers/{customerId}/tasks/{taskId}',
    ],
    ['Quote', 'cus_acme/quo_acme_open', 'quo_acme_open', 'GET /v3/customers/{customerId}/quotes/{quoteId}'],
    [
      'Transfer',
      'cus_acme/trf_acme_payout',
      'trf_acme_payout',
      'GET /v3/customers/{customerId}/transfers/{transferId}',
    ],
    ['Rule', 'cus_acme/rul_acme_sweep', 'rul_acme_sweep', 'GET /v3/customers/{customerId}/rules/{ruleId}'],
  ])('reads a %s by its node id %s with one upstream read', async (typename, nodeId, id, route) => {
    await stack.resetUpstreamCalls();
    const result = await stack.query(NODE, { id: nodeId });

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({ node: { __typename: typename, nodeId, id } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [route]: 1 });
  });

  it("answers a scoped caller's node of another customer's record NOT_FOUND, with no upstream call", async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.queryAs('globex', NODE, { id: 'cus_acme/acc_acme_eth' });

    expect(result.body.data).toEqual({ node: null });
    expect(result.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('refuses an id that names no readable record with BAD_USER_INPUT, with no upstream call', async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.query(NODE, { id: 'acc_acme_eth' });

    expect(result.body.data).toEqual({ node: null });
    expect(result.body.errors![0]).toMatchObject({
      message:
        '"acc_acme_eth" is not a node id: a customer\'s, an institution\'s or a webhook endpoint\'s own id, or "<customerId>/<id>" for a customer\'s record.',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('nodes(ids:)', () => {
  it('reads records in the order given, each through the loaders, a missing one null at its index', async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.query(`{
      nodes(ids: ["cus_acme/acc_acme_eth", "cus_acme", "cus_acme/acc_acme_nope", "cus_acme/acc_acme_eth"]) { __typename nodeId }
      customer(id: "cus_acme") { accounts(first: 1) { nodes { nodeId } } }
    }`);

    expect(result.body.data).toEqual({
      nodes: [
        { __typename: 'Account', nodeId: 'cus_acme/acc_acme_eth' },
        { __typename: 'Customer', nodeId: 'cus_acme' },
        null,
        { __typename: 'Account', nodeId: 'cus_acme/acc_acme_eth' },
      ],
      customer: { accounts: { nodes: [{ nodeId: 'cus_acme/acc_acme_eth' }] } },
    });
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({ path: ['nodes', 2], extensions: { code: 'NOT_FOUND' } });
    // The same account twice is one read; the customer read is shared with `customer(id:)`.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
      'GET /v3/customers/{customerId}/accounts': 1,
    });
  });
});

describe('nodes(ids:) limits', () => {
  it('reads 25 ids, one upstream read each, every missing one NOT_FOUND at its index', async () => {
    await stack.resetUpstreamCalls();
    const ids = Array.from({ length: 25 }, (_, index) => `cus_acme/acc_missing_${index}`);
    const result = await stack.query(`query ($ids: [ID!]!) { nodes(ids: $ids) { nodeId } }`, { ids });

    expect(result.body.errors).toHaveLength(25);
    expect(new Set(result.body.errors!.map((error) => error.extensions!.code))).toEqual(
      new Set(['NOT_FOUND']),
    );
    expect((await stack.upstreamCalls()).total).toBe(25);
  });

  it('refuses more than 25 ids with BAD_USER_INPUT, with no upstream call', async () => {
    await stack.resetUpstreamCalls();
    const ids = Array.from({ length: 26 }, (_, index) => `cus_acme/acc_missing_${index}`);
    const result = await stack.query(`query ($ids: [ID!]!) { nodes(ids: $ids) { nodeId } }`, { ids });

    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: '"ids" holds 26 ids; at most 25 are read at once.',
        extensions: expect.objectContaining({ code: 'BAD_USER_INPUT' }),
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
