/**
 * Hostile or broken requests: each gets a clear error, and the facade keeps serving afterwards.
 */
import { getIntrospectionQuery } from 'graphql';
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

const stack = useStack({ env: { QUERY_MAX_DEPTH: '12', QUERY_MAX_COST: '5000' } });

/** POSTs `body` as it is, not re-encoded, and returns the status and parsed answer. */
async function post(body: string): Promise<{
  status: number;
  body: { errors?: { message: string; extensions?: Record<string, unknown> }[] };
}> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await bearer('operator')) },
    body,
  });
  return { status: response.status, body: (await response.json()) as never };
}

/** `customer { accounts { nodes { customer { ... } } } }`, `rounds` times round the cycle. */
function cyclicQuery(rounds: number, first?: number): string {
  const args = first === undefined ? '' : `(first: ${first})`;
  return `{ customer(id: "cus_acme") ${`{ accounts${args} { nodes { customer `.repeat(rounds)}{ id }${' } } }'.repeat(rounds)} }`;
}

describe('query limits', () => {
  test('an operation nested deeper than the maximum is refused before any upstream call', async () => {
    await stack.resetUpstreamCalls();

    const result = await stack.query(cyclicQuery(30, 1));

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // Relay's `nodes` wrappers are not hops: three levels of each round count two.
    expect(result.body.errors?.[0]?.message).toBe(
      'The operation is nested 62 fields deep; the maximum is 12.',
    );
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an operation whose nested pages could multiply past the maximum cost is refused', async () => {
    await stack.resetUpstreamCalls();

    // Depth 11 is allowed, but 25 × 25 × 25 customers would be resolved.
    const result = await stack.query(cyclicQuery(3));

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      maxCost: 5000,
    });
    expect(result.body.errors?.[0]?.message).toMatch(
      /^The operation could resolve about \d+ fields; the maximum is 5000\./,
    );
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a fragment spread counts where it is used, and a fragment cycle is refused without looping', async () => {
    const within = await stack.query(
      '{ customer(id: "cus_acme") { ...Owner } } fragment Owner on Customer { accounts(first: 2) { nodes { customer { id } } } }',
    );
    expect(within.body).toEqual({
      data: {
        customer: {
          accounts: { nodes: [{ customer: { id: 'cus_acme' } }, { customer: { id: 'cus_acme' } }] },
        },
      },
    });

    const cyclic = await stack.query(
      '{ customer(id: "cus_acme") { ...A } } fragment A on Customer { accounts { nodes { customer { ...A } } } }',
    );
    expect(cyclic.status).toBe(400);
    expect(cyclic.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });

  test('the full introspection query (what Sandbox sends) is not limited by depth', async () => {
    const result = await stack.query(getIntrospectionQuery());

    expect(result.body.errors).toBeUndefined();
    expect(result.status).toBe(200);
  });
});

describe('malformed requests', () => {
  test.each([
    ['a query that is not a string', '{"query": 1}', 'GraphQL queries must be strings.'],
    [
      'variables that are not an object',
      '{"query": "{ apiStatus { reachable } }", "variables": [1]}',
      '`variables` in a POST body must be an object if provided.',
    ],
    ['a JSON string body', '"query"', 'The request body is not valid JSON.'],
  ])('%s is answered 400 with BAD_REQUEST', async (_name, body, message) => {
    const result = await post(body);

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]).toMatchObject({ message, extensions: { code: 'BAD_REQUEST' } });
  });

  test('a body over the 64 KiB size limit is answered 413', async () => {
    const result = await post(
      JSON.stringify({ query: '{ apiStatus { reachable } }', padding: 'x'.repeat(70_000) }),
    );

    expect(result.status).toBe(413);
    expect(result.body.errors?.[0]).toMatchObject({
      message: 'The request body is too large.',
      extensions: { code: 'BAD_REQUEST' },
    });
  });

  test('a document of sixty thousand open braces (under the body limit) is a parse error', async () => {
    const result = await post(JSON.stringify({ query: '{'.repeat(60_000) }));

    // A client accepting only application/json gets 200 with the error (GraphQL over HTTP).
    expect(result.status).toBe(200);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_PARSE_FAILED');
  });

  test('an id that tries to leave its path segment is refused at its argument, and nothing is sent', async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.query('{ customer(id: "../../v3/customers?limit=1") { id } }');

    expect(result.body.data).toEqual({ customer: null });
    expect(result.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', inputPath: ['id'] });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('_entities with representations of every wrong shape answers each at its index', async () => {
    const result = await stack.query(
      'query ($representations: [_Any!]!) { _entities(representations: $representations) { __typename } }',
      { representations: [1, 'x', {}, { __typename: 'Customer', id: 5 }, { __typename: 'Nope' }, []] },
    );

    expect(result.status).toBe(200);
    expect(result.body.data).toEqual({ _entities: [null, null, null, null, null, null] });
    expect(result.body.errors?.map((error) => [error.path, error.extensions?.code])).toEqual(
      [0, 1, 2, 3, 4, 5].map((index) => [['_entities', index], 'BAD_USER_INPUT']),
    );
  });

  test('after all of the above, the facade still answers', async () => {
    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });
});
