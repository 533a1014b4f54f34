/**
 * Nested reads through the facade against the real emulator: what the answer holds, and exactly
 * which upstream requests it cost (the emulator counts them by route).
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

interface DashboardCustomer {
  id: string;
  accounts: { nodes: { id: string; fees: unknown }[] } | null;
  relatedParties: { nodes: unknown[] } | null;
  capabilities: { nodes: unknown[] } | null;
}

const DASHBOARD = /* GraphQL */ `
  query Dashboard($id: ID!) {
    customer(id: $id) {
      id
      type
      displayName
      accounts {
        nodes {
          id
          customerId
          type
          label
          balances {
            currency
            available
            pending
          }
          fees {
            accountId
            breakdown {
              developer {
                fixed
                bips
              }
            }
          }
        }
      }
      relatedParties {
        nodes {
          id
          displayName
          partyType
          roles
          hasOwnership
        }
      }
      capabilities {
        nodes {
          id
          method
          status
          applications {
            id
            status
            institution {
              id
              name
              bic
            }
          }
        }
      }
    }
  }
`;

describe('the customer dashboard query', () => {
  it('answers customer, accounts with balances and fees, related parties and capabilities with one request per list', async () => {
    const result = await stack.query<{ customer: DashboardCustomer }>(DASHBOARD, { id: 'cus_acme' });

    expect(result.status).toBe(200);
    expect(result.body.errors).toBeUndefined();
    const customer = result.body.data!.customer;
    expect(customer).toMatchObject({ id: 'cus_acme', type: 'business', displayName: 'Acme Robotics Ltd' });
    expect(customer.accounts!.nodes.map((account) => account.id)).toEqual([
      'acc_acme_eth',
      'acc_acme_polygon',
      'acc_acme_bank',
    ]);
    expect(customer.accounts!.nodes[0]).toEqual({
      id: 'acc_acme_eth',
      customerId: 'cus_acme',
      type: 'wallet',
      label: 'Acme treasury (Ethereum)',
      balances: [{ currency: 'USDC', available: '12500.00', pending: '0.00' }],
      fees: { accountId: 'acc_acme_eth', breakdown: { developer: { fixed: '0.50', bips: 25 } } },
    });
    // No developer fee configured: the breakdown says so with null.
    expect(customer.accounts!.nodes[1]!.fees).toEqual({
      accountId: 'acc_acme_polygon',
      breakdown: { developer: null },
    });
    expect(customer.relatedParties!.nodes).toEqual([
      {
        id: 'rp_acme_ceo',
        displayName: 'Grace Hopper',
        partyType: 'person',
        roles: ['CONTROL_PERSON', 'OFFICER'],
        hasOwnership: true,
      },
      {
        id: 'rp_acme_cfo',
        displayName: 'Katherine Johnson',
        partyType: 'person',
        roles: ['OFFICER', 'AUTHORIZED_SIGNER'],
        hasOwnership: false,
      },
      {
        id: 'rp_acme_holding',
        displayName: 'Acme Holdings plc',
        partyType: 'entity',
        roles: [],
        hasOwnership: true,
      },
    ]);
    expect(customer.capabilities!.nodes[1]).toEqual({
      id: 'cap_acme_wire',
      method: 'wire',
      status: 'pending',
      applications: [
        {
          id: 'app_acme_wire_lead',
          status: 'requested',
          institution: { id: 'ins_lead_bank', name: 'Lead Bank', bic: 'LEADUS44' },
        },
        {
          id: 'app_acme_wire_cross_river',
          status: 'requested',
          institution: { id: 'ins_cross_river', name: 'Cross River Bank', bic: 'CRBKUS33' },
        },
      ],
    });

    // Fees come from the account records, related parties from the list's summaries.
    expect(await stack.upstreamCalls()).toEqual({
      total: 4,
      byRoute: {
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/accounts': 1,
        'GET /v3/customers/{customerId}/related-parties': 1,
        'GET /v3/customers/{customerId}/capabilities': 1,
      },
    });
  });

  it('completes related-party summaries with one read per party only when a field the summary lacks is selected', async () => {
    const result = await stack.query<{ customer: { relatedParties: { nodes: Record<string, unknown>[] } } }>(
      `query {
        customer(id: "cus_acme") {
          relatedParties {
            nodes { id displayName title person { firstName lastName residenceCountry } entity { legalName } }
          }
        }
      }`,
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.relatedParties.nodes).toEqual([
      {
        id: 'rp_acme_ceo',
        displayName: 'Grace Hopper',
        title: 'Chief Executive Officer',
        person: { firstName: 'Grace', lastName: 'Hopper', residenceCountry: 'US' },
        entity: null,
      },
      {
        id: 'rp_acme_cfo',
        displayName: 'Katherine Johnson',
        title: 'Chief Financial Officer',
        person: { firstName: 'Katherine', lastName: 'Johnson', residenceCountry: 'US' },
        entity: null,
      },
      {
        id: 'rp_acme_holding',
        displayName: 'Acme Holdings plc',
        title: 'Parent company',
        person: null,
        entity: { legalName: 'Acme Holdings plc' },
      },
    ]);
    // Three fields of each party need the full record: still one read per party.
    expect(await stack.upstreamCalls()).toEqual({
      total: 5,
      byRoute: {
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/related-parties': 1,
        'GET /v3/customers/{customerId}/related-parties/{relatedPartyId}': 3,
      },
    });
  });

  it('reads each distinct institution once when an application selects a field its reference lacks', async () => {
    const result = await stack.query<{
      customer: { capabilities: { nodes: { applications: unknown[] }[] } };
    }>(
      `{ customer(id: "cus_acme") { capabilities { nodes { applications { institution { id country } } } } } }`,
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.capabilities.nodes.flatMap((node) => node.applications)).toEqual([
      { institution: { id: 'ins_lead_bank', country: 'US' } },
      { institution: { id: 'ins_lead_bank', country: 'US' } },
      { institution: { id: 'ins_cross_river', country: 'US' } },
    ]);
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/capabilities': 1,
      'GET /v3/institutions/{institutionId}': 2,
    });
  });
});

describe('batching across parents', () => {
  it('reads 3 customers with 3 accounts each and their fees in 4 upstream requests', async () => {
    const result = await stack.query<{
      customers: { nodes: { id: string; accounts: { nodes: { id: string; fees: unknown }[] } }[] };
    }>(`{
      customers(first: 3) {
        nodes { id accounts { nodes { id fees { breakdown { developer { fixed bips } } } } } }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    const customers = result.body.data!.customers.nodes;
    expect(customers.map((customer) => customer.id)).toEqual(['cus_acme', 'cus_ada', 'cus_globex']);
    for (const customer of customers) expect(customer.accounts!.nodes).toHaveLength(3);
    expect(customers[2]!.accounts.nodes[2]).toEqual({
      id: 'acc_globex_bank',
      fees: { breakdown: { developer: { fixed: '2.50', bips: 0 } } },
    });
    expect(await stack.upstreamCalls()).toEqual({
      total: 4,
      byRoute: { 'GET /v3/customers': 1, 'GET /v3/customers/{customerId}/accounts': 3 },
    });
  });

  it('never repeats an upstream request within one operation, and reuses listed records for reads by id', async () => {
    const result = await stack.query(`{
      a: customer(id: "cus_ada") { id accounts { nodes { id } } }
      b: customer(id: "cus_ada") { displayName accounts { nodes { label } } }
      account(customerId: "cus_ada", id: "acc_ada_sol") { id customer { id } }
      rule(customerId: "cus_acme", id: "rul_acme_sweep") {
        triggerAccountId
        trigger { id label }
        action { accountId account { id } destination { recipientId } }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toMatchObject({
      a: { id: 'cus_ada' },
      b: { displayName: 'Ada Lovelace' },
      account: { id: 'acc_ada_sol', customer: { id: 'cus_ada' } },
      rule: {
        triggerAccountId: 'acc_acme_polygon',
        trigger: { id: 'acc_acme_polygon', label: 'Acme collections (Polygon)' },
        action: { accountId: 'acc_acme_eth', account: { id: 'acc_acme_eth' }, destination: null },
      },
    });
    // `account(acc_ada_sol)` ran in parallel with the list, so it is one read of its own; the
    // rule's two accounts are two parallel reads, and the customer is read once for three uses.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts': 1,
      'GET /v3/customers/{customerId}/accounts/{accountId}': 3,
      'GET /v3/customers/{customerId}/rules/{ruleId}': 1,
    });
  });
});

describe('partial data', () => {
  it('nulls only the nested field whose upstream read fails, with its error at its path', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}/capabilities', kind: 'internal_error', rate: 1 }],
    });

    const result = await stack.query<{ customer: DashboardCustomer }>(DASHBOARD, { id: 'cus_acme' });

    expect(result.status).toBe(200);
    const customer = result.body.data!.customer;
    expect(customer.id).toBe('cus_acme');
    expect(customer.accounts!.nodes).toHaveLength(3);
    expect(customer.relatedParties!.nodes).toHaveLength(3);
    expect(customer.capabilities).toBeNull();
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({
      path: ['customer', 'capabilities'],
      extensions: { code: 'INTERNAL_SERVER_ERROR', problem: { status: 500, code: 'internal_error' } },
    });
  });

  it('answers an unknown customer with null and a NOT_FOUND error', async () => {
    const result = await stack.query(`{ customer(id: "cus_nobody") { id } }`);

    expect(result.body.data).toEqual({ customer: null });
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({
      path: ['customer'],
      extensions: { code: 'NOT_FOUND', problem: { status: 404 } },
    });
  });
});

describe('apiStatus', () => {
  it('reports a reachable upstream, a valid key and its environment', async () => {
    const result = await stack.query(`{ apiStatus { reachable keyValid environment problemCode } }`);

    expect(result.body).toEqual({
      data: { apiStatus: { reachable: true, keyValid: true, environment: 'sandbox', problemCode: null } },
    });
  });
});

describe('apiStatus with a platform key the upstream refuses', () => {
  const refused = useStack({ env: { UPSTREAM_API_KEY: 'sk_sandbox_unknown' } });

  it('reports the key as refused, reachable, without an error', async () => {
    const result = await refused.query(`{ apiStatus { reachable keyValid environment problemCode } }`);

    expect(result.body).toEqual({
      data: {
        apiStatus: { reachable: true, keyValid: false, environment: null, problemCode: 'unauthorized' },
      },
    });
  });
});
