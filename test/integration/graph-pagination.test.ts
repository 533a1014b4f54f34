/**
 * Relay connections over the upstream's cursor pages, the `first` limit, `updatedSince`, and the
 * scalars' input validation, through real HTTP against the emulator.
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

interface CustomerPage {
  customers: {
    edges: { cursor: string; node: { id: string } }[];
    nodes: { id: string }[];
    pageInfo: {
      hasNextPage: boolean;
      hasPreviousPage: boolean;
      startCursor: string | null;
      endCursor: string | null;
    };
  };
}

const CUSTOMERS = /* GraphQL */ `
  query Customers($first: Int, $after: String) {
    customers(first: $first, after: $after) {
      edges {
        cursor
        node {
          id
        }
      }
      nodes {
        id
      }
      pageInfo {
        hasNextPage
        hasPreviousPage
        startCursor
        endCursor
      }
    }
  }
`;

describe('pagination', () => {
  it('pages through a list with first and after until hasNextPage is false', async () => {
    const first = await stack.query<CustomerPage>(CUSTOMERS, { first: 2 });

    expect(first.body.errors).toBeUndefined();
    const page1 = first.body.data!.customers;
    expect(page1.nodes.map((node) => node.id)).toEqual(['cus_acme', 'cus_ada']);
    expect(page1.pageInfo.hasNextPage).toBe(true);
    expect(page1.pageInfo.endCursor).toEqual(expect.any(String));
    // The upstream issues one cursor per page: the last edge carries it, the first a facade cursor.
    expect(page1.edges.map((edge) => edge.cursor)).toEqual([
      expect.stringMatching(/^fc1\./),
      page1.pageInfo.endCursor,
    ]);

    const second = await stack.query<CustomerPage>(CUSTOMERS, { first: 2, after: page1.pageInfo.endCursor });

    expect(second.body.errors).toBeUndefined();
    const page2 = second.body.data!.customers;
    expect(page2.nodes.map((node) => node.id)).toEqual(['cus_globex']);
    expect(page2.edges).toEqual([{ cursor: expect.stringMatching(/^fc1\./), node: { id: 'cus_globex' } }]);
    expect(page2.pageInfo).toEqual({
      hasNextPage: false,
      hasPreviousPage: true,
      startCursor: page2.edges[0]!.cursor,
      endCursor: null,
    });
    expect(await stack.upstreamCalls()).toEqual({ total: 2, byRoute: { 'GET /v3/customers': 2 } });

    // Any edge's cursor resumes after its item: after the first edge of page 1, in one upstream read.
    await stack.resetUpstreamCalls();
    const fromFirstEdge = await stack.query<CustomerPage>(CUSTOMERS, {
      first: 2,
      after: page1.edges[0]!.cursor,
    });
    expect(fromFirstEdge.body.errors).toBeUndefined();
    expect(fromFirstEdge.body.data!.customers.nodes.map((node) => node.id)).toEqual([
      'cus_ada',
      'cus_globex',
    ]);
    expect(fromFirstEdge.body.data!.customers.pageInfo).toMatchObject({
      hasNextPage: false,
      hasPreviousPage: true,
    });
    expect(await stack.upstreamCalls()).toEqual({ total: 1, byRoute: { 'GET /v3/customers': 1 } });
  });

  it('pages through a nested list of one customer', async () => {
    const query = `query Accounts($after: String) {
      customer(id: "cus_acme") { accounts(first: 2, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } }
    }`;
    type Answer = {
      customer: {
        accounts: { nodes: { id: string }[]; pageInfo: { hasNextPage: boolean; endCursor: string } };
      };
    };

    const first = await stack.query<Answer>(query);
    const accounts = first.body.data!.customer.accounts;
    expect(accounts.nodes.map((node) => node.id)).toEqual(['acc_acme_eth', 'acc_acme_polygon']);
    expect(accounts.pageInfo.hasNextPage).toBe(true);

    const second = await stack.query<Answer>(query, { after: accounts.pageInfo.endCursor });
    expect(second.body.data!.customer.accounts).toEqual({
      nodes: [{ id: 'acc_acme_bank' }],
      pageInfo: { hasNextPage: false, endCursor: null },
    });
  });

  it('refuses first over the documented maximum of 100 with BAD_USER_INPUT, before any upstream call', async () => {
    const result = await stack.query(CUSTOMERS, { first: 101 });

    expect(result.body.data).toBeNull();
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({
      message: '"first" must be between 1 and 100; got 101.',
      path: ['customers'],
      extensions: { code: 'BAD_USER_INPUT', argumentName: 'first', maximum: 100 },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('refuses first below 1 on a nested list, nulling only that list', async () => {
    const result = await stack.query(
      `{ customer(id: "cus_ada") { id accounts(first: 0) { nodes { id } } } }`,
    );

    expect(result.body.data).toEqual({ customer: { id: 'cus_ada', accounts: null } });
    expect(result.body.errors![0]).toMatchObject({
      path: ['customer', 'accounts'],
      extensions: { code: 'BAD_USER_INPUT', argumentName: 'first' },
    });
  });

  it('passes a cursor through opaquely: one the upstream does not know is its validation error', async () => {
    const result = await stack.query(CUSTOMERS, { first: 2, after: 'not-a-cursor' });

    expect(result.body.data).toBeNull();
    expect(result.body.errors![0]).toMatchObject({
      path: ['customers'],
      extensions: { code: 'BAD_USER_INPUT', problem: { status: 400, code: 'validation_error' } },
    });
  });
});

describe('updatedSince', () => {
  it('returns only the records updated at or after the instant', async () => {
    // The demo data's CFO was updated at 10:41, the CEO a minute earlier, the holding a minute later.
    const result = await stack.query<{ customer: { relatedParties: { nodes: { id: string }[] } } }>(
      `query Since($since: DateTime!) {
        customer(id: "cus_acme") { relatedParties(updatedSince: $since) { nodes { id } } }
      }`,
      { since: '2025-01-06T10:41:00Z' },
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.relatedParties.nodes.map((node) => node.id)).toEqual([
      'rp_acme_cfo',
      'rp_acme_holding',
    ]);
  });

  it('refuses a DateTime variable that is not RFC 3339 with BAD_USER_INPUT and no upstream call', async () => {
    const result = await stack.query(
      `query Since($since: DateTime!) { customers(updatedSince: $since) { nodes { id } } }`,
      { since: '2025-02-30T10:00:00Z' },
    );

    expect(result.status).toBe(400);
    expect(result.body.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(result.body.errors![0]!.message).toContain('DateTime must be an RFC 3339 date-time');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('refuses a DateTime literal without a time zone offset as a validation error', async () => {
    const result = await stack.query(`{ customers(updatedSince: "2025-01-06T10:00:00") { nodes { id } } }`);

    expect(result.status).toBe(400);
    expect(result.body.errors![0]!.extensions!.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(result.body.errors![0]!.message).toContain('DateTime must be an RFC 3339 date-time');
  });
});

describe('Decimal input', () => {
  it('refuses a number where a decimal string is expected, so no float ever reaches the upstream', async () => {
    const result = await stack.query(
      `mutation TopUp($amount: Decimal!) {
        sandboxTopUp(input: { idempotencyKey: "graph-pagination-1", accountId: "acc_acme_eth", amount: $amount, currency: "USDC" }) { replayed }
      }`,
      { amount: 10.5 },
    );

    expect(result.status).toBe(400);
    expect(result.body.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(result.body.errors![0]!.message).toContain(
      'Decimal must be a string such as "12.50", not a number',
    );
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
