/**
 * Look-ahead: a record read by a key it is given starts, at the same time, the reads its selected
 * child fields can make from that key alone. What is read (exactly, by route), what is read while
 * the record itself has not answered yet, and what a missing record costs.
 */
import { describe, expect, it } from 'vitest';
import { type Stack, useStack } from '../support/harness/stack.ts';

const DASHBOARD = /* GraphQL */ `
  query Dashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      accounts {
        nodes {
          id
          balances {
            currency
            available
          }
          fees {
            breakdown {
              developer {
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
        }
      }
      capabilities {
        nodes {
          id
          applications {
            institution {
              name
            }
          }
        }
      }
    }
  }
`;

interface LoggedRequest {
  route: string;
  status: number | null;
}

/** The emulator's log of `/v3` requests, oldest first (the harness only exposes the counts). */
async function loggedRequests(stack: Stack): Promise<LoggedRequest[]> {
  const response = await fetch(`${stack.emulatorUrl}/_emulator/requests`);
  return ((await response.json()) as { requests: LoggedRequest[] }).requests;
}

/** Polls the emulator's log until `done` holds for it; the test's own timeout bounds the wait. */
async function waitForRequests(
  stack: Stack,
  done: (requests: LoggedRequest[]) => boolean,
): Promise<LoggedRequest[]> {
  for (;;) {
    const requests = await loggedRequests(stack);
    if (done(requests)) return requests;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('reads started from a key', () => {
  const stack = useStack();

  it('costs the dashboard the same 4 upstream calls, one per list', async () => {
    const result = await stack.query<{ customer: { accounts: { nodes: unknown[] } } }>(DASHBOARD, {
      id: 'cus_acme',
    });

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.accounts.nodes).toHaveLength(3);
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

  it('answers a missing customer with null and NOT_FOUND, having made only the reads it started', async () => {
    const result = await stack.query(DASHBOARD, { id: 'cus_nobody' });

    expect(result.status).toBe(200);
    expect(result.body.data).toEqual({ customer: null });
    // The lists' own failures stay inside the operation: one error, the customer's.
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({
      path: ['customer'],
      extensions: { code: 'NOT_FOUND', problem: { status: 404 } },
    });
    expect(await stack.upstreamCalls()).toEqual({
      total: 4,
      byRoute: {
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/accounts': 1,
        'GET /v3/customers/{customerId}/related-parties': 1,
        'GET /v3/customers/{customerId}/capabilities': 1,
      },
    });
    expect(stack.logs().filter((line) => line.includes('"unexpected error"'))).toEqual([]);
  });

  it('leaves out fields that @skip and @include drop, through fragments', async () => {
    const result = await stack.query(
      `query ($withAccounts: Boolean!, $withParties: Boolean!) {
        customer(id: "cus_acme") {
          id
          accounts @include(if: $withAccounts) { nodes { id } }
          ...Lists
        }
      }
      fragment Lists on Customer {
        relatedParties @skip(if: true) { nodes { id } }
        ... @include(if: $withParties) { capabilities { nodes { id } } }
        ... on Customer { documents { nodes { id } } }
      }`,
      { withAccounts: false, withParties: false },
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({
      customer: { id: 'cus_acme', documents: { nodes: expect.any(Array) } },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/documents': 1,
    });
  });

  it('starts each list with the arguments its field resolves, so the field finds that very read', async () => {
    const result = await stack.query<{
      customer: { first: { nodes: unknown[] }; two: { nodes: unknown[] }; again: { nodes: unknown[] } };
    }>(
      `query ($id: ID!, $size: Int) {
        customer(id: $id) {
          first: accounts(first: 1) { nodes { id } }
          two: accounts(first: $size) { nodes { id } }
          again: accounts(first: 2) { nodes { label } }
        }
      }`,
      { id: 'cus_acme', size: 2 },
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.first.nodes).toHaveLength(1);
    expect(result.body.data!.customer.two.nodes).toHaveLength(2);
    // Two distinct pages (first 1, first 2), each read once.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts': 2,
    });
  });

  it('starts nothing for a list whose arguments its field will refuse', async () => {
    const result = await stack.query(
      `{ customer(id: "cus_acme") { id accounts(first: 101) { nodes { id } } } }`,
    );

    expect(result.body.data).toEqual({ customer: { id: 'cus_acme', accounts: null } });
    expect(result.body.errors).toMatchObject([
      { path: ['customer', 'accounts'], extensions: { code: 'BAD_USER_INPUT' } },
    ]);
    expect(await stack.upstreamCalls()).toEqual({
      total: 1,
      byRoute: { 'GET /v3/customers/{customerId}': 1 },
    });
  });

  it('looks ahead through a record read by a key its parent holds, and for entity representations', async () => {
    const result = await stack.query<{ _entities: unknown[] }>(
      `query ($representations: [_Any!]!) {
        _entities(representations: $representations) {
          ... on Customer { accounts { nodes { id } } }
          ... on Account { id customer { id relatedParties { nodes { id } } } }
        }
      }`,
      { representations: [{ __typename: 'Account', customerId: 'cus_ada', id: 'acc_ada_sol' }] },
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!._entities).toEqual([
      { id: 'acc_ada_sol', customer: { id: 'cus_ada', relatedParties: { nodes: expect.any(Array) } } },
    ]);
    // The `... on Customer` fragment does not apply to an Account: no accounts list.
    expect(await stack.upstreamCalls()).toEqual({
      total: 3,
      byRoute: {
        'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/related-parties': 1,
      },
    });
  });
});

describe('reads started before the record answers', () => {
  // A stalled read is given up after this long and retried, so each test ends on its own.
  const stack = useStack({ env: { UPSTREAM_HEADERS_TIMEOUT_MS: '1500' } });

  it('sends the dashboard lists while the customer read has not answered', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'stall', rate: 1, times: 1 }],
    });

    const answer = stack.query<{ customer: { id: string } }>(DASHBOARD, { id: 'cus_acme' });
    const whileStalled = await waitForRequests(stack, (requests) => requests.length >= 4);

    // All four reads reached the upstream, and the customer's is still the stalled one.
    expect(whileStalled.map((request) => request.route).sort()).toEqual([
      'GET /v3/customers/{customerId}',
      'GET /v3/customers/{customerId}/accounts',
      'GET /v3/customers/{customerId}/capabilities',
      'GET /v3/customers/{customerId}/related-parties',
    ]);
    expect(
      whileStalled.find((request) => request.route === 'GET /v3/customers/{customerId}')!.status,
    ).toBeNull();

    const result = await answer;
    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.customer.id).toBe('cus_acme');
    // The stalled read was retried; the lists were not read again.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 2,
      'GET /v3/customers/{customerId}/accounts': 1,
      'GET /v3/customers/{customerId}/related-parties': 1,
      'GET /v3/customers/{customerId}/capabilities': 1,
    });
  });

  it("sends an account's customer and its lists while the account read has not answered", async () => {
    await stack.setFaults({
      rules: [
        { route: 'GET /v3/customers/{customerId}/accounts/{accountId}', kind: 'stall', rate: 1, times: 1 },
      ],
    });

    const answer = stack.query<{ account: { customer: { id: string } } }>(
      `{ account(customerId: "cus_ada", id: "acc_ada_sol") { id customer { id capabilities { nodes { id } } } } }`,
    );
    const whileStalled = await waitForRequests(stack, (requests) => requests.length >= 3);

    expect(whileStalled.map((request) => request.route).sort()).toEqual([
      'GET /v3/customers/{customerId}',
      'GET /v3/customers/{customerId}/accounts/{accountId}',
      'GET /v3/customers/{customerId}/capabilities',
    ]);
    const result = await answer;
    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.account.customer.id).toBe('cus_ada');
  });

  it('answers a list whose early read failed with that failure, without reading it again', async () => {
    // The capabilities read fails (after its retries) long before the stalled customer read answers.
    await stack.setFaults({
      rules: [
        { route: 'GET /v3/customers/{customerId}', kind: 'stall', rate: 1, times: 1 },
        { route: 'GET /v3/customers/{customerId}/capabilities', kind: 'internal_error', rate: 1 },
      ],
    });

    const result = await stack.query<{ customer: { capabilities: unknown } }>(DASHBOARD, { id: 'cus_acme' });

    expect(result.body.data!.customer.capabilities).toBeNull();
    expect(result.body.errors).toMatchObject([
      { path: ['customer', 'capabilities'], extensions: { code: 'INTERNAL_SERVER_ERROR' } },
    ]);
    // One read of the list and its retries, as when the field made the read itself.
    expect((await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}/capabilities']).toBe(
      stack.config.upstream.retry.maxAttempts,
    );
  });
});
