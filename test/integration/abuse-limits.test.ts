/**
 * Documents that would stall or flood the facade are refused before execution, before any
 * upstream call, with a clear error; the facade keeps answering ordinary queries.
 */
import { describe, expect, test } from 'vitest';
import { bearer } from '../support/tokens.ts';
import { useStack } from '../support/harness/stack.ts';
import {
  fragmentFanOut,
  introspectionAliases,
  nestedListArgument,
  nestedSelections,
} from '../support/hostile-documents.ts';

const stack = useStack();

/** POSTs `document` as a client accepting only application/json would. */
async function postAsJsonClient(document: string, variables?: Record<string, unknown>) {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      ...(await bearer('operator')),
    },
    body: JSON.stringify({ query: document, variables }),
  });
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    body: (await response.json()) as {
      data?: unknown;
      errors?: { message: string; extensions?: Record<string, unknown> }[];
    },
  };
}

describe('documents refused before any work', () => {
  test('a fan-out of 22 fragment levels, each spreading the next twice, is refused by its cost', async () => {
    const result = await stack.query(fragmentFanOut(22));

    expect(result.status).toBe(400);
    const facadeCost = result.body.errors?.find((error) => error.extensions?.maxCost === 5000);
    // 2^22 spreads of two fields, plus the customer itself: measured once per fragment, not per spread.
    expect(facadeCost).toMatchObject({
      message: `The operation could resolve about ${2 ** 22 * 2 + 1} fields; the maximum is 5000. Ask for smaller pages (\`first\`) or fewer nested lists.`,
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: 2 ** 22 * 2 + 1 },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a thousand aliases of __schema are refused by the token limit, sixteen by the alias limit', async () => {
    const bomb = await stack.query(introspectionAliases(1000));
    expect(bomb.status).toBe(400);
    expect(bomb.body.errors).toEqual([
      expect.objectContaining({
        message: 'Syntax Error: Document contains more that 1000 tokens. Parsing aborted.',
        extensions: { code: 'GRAPHQL_PARSE_FAILED' },
      }),
    ]);

    const sixteen = await stack.query(introspectionAliases(16));
    expect(sixteen.status).toBe(400);
    expect(sixteen.body.errors).toEqual([
      expect.objectContaining({
        message: 'Aliases limit of 15 exceeded, found 16.',
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
      }),
    ]);

    const fifteen = await stack.query(introspectionAliases(15));
    expect(fifteen.status).toBe(200);
    expect(Object.keys(fifteen.body.data ?? {})).toHaveLength(15);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('aliases of __type count as aliases too', async () => {
    const fields = Array.from({ length: 16 }, (_, index) => `t${index}: __type(name: "Customer") { name }`);
    const result = await stack.query(`{ ${fields.join(' ')} }`);

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.message).toBe('Aliases limit of 15 exceeded, found 16.');
  });

  test('a selection nested deeper than the limit is refused, Relay wrappers not counted as hops', async () => {
    const within = await stack.query(
      '{ customers(first: 1) { nodes { accounts(first: 1) { nodes { fees { breakdown { developer { fixed } } } } } } } }',
    );
    expect(within.body.errors).toBeUndefined();

    await stack.resetUpstreamCalls();
    const result = await stack.query(
      '{ customer(id: "cus_acme") { accounts(first: 1) { nodes { customer { accounts(first: 1) { nodes { customer { accounts(first: 1) { nodes { id } } } } } } } } } }',
    );

    expect(result.status).toBe(400);
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: 'The operation is nested 7 fields deep; the maximum is 6.',
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED', depth: 7, maxDepth: 6 },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('more directives than the limit are refused', async () => {
    const directives = ' @include(if: true)'.repeat(51);
    const result = await stack.query(`{ apiStatus${directives} { reachable } }`);

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]).toMatchObject({
      message: 'Directives limit of 50 exceeded, found 51.',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
  });

  test('pages asked for through variables are counted at their value', async () => {
    const document =
      'query ($first: Int) { customers(first: $first) { nodes { accounts(first: $first) { nodes { id status network type } } } } }';

    const small = await stack.query(document, { first: 2 });
    expect(small.status).toBe(200);
    expect(small.body.errors).toBeUndefined();

    await stack.resetUpstreamCalls();
    const large = await stack.query(document, { first: 100 });
    expect(large.status).toBe(400);
    expect(large.body.errors?.[0]).toMatchObject({
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: 100 + 1 + 100 * (1 + 100 * 5), maxCost: 5000 },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('documents the parser cannot or will not take', () => {
  test('a document nested ten thousand levels deep is a parse error, never a stack overflow', async () => {
    const result = await stack.query(nestedSelections(10_000));

    expect(result.status).toBe(400);
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: 'Syntax Error: Document contains more that 1000 tokens. Parsing aborted.',
        extensions: { code: 'GRAPHQL_PARSE_FAILED' },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('malformed strings in variables', () => {
  test('a lone surrogate in an ID variable is BAD_USER_INPUT, with no upstream call', async () => {
    const result = await stack.query('query ($id: ID!) { customer(id: $id) { id } }', { id: 'cus_\ud800' });

    expect(result.status).toBe(400);
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: 'Variable "$id" holds a lone UTF-16 surrogate; strings must be well-formed Unicode.',
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a control character in an ID variable is BAD_USER_INPUT', async () => {
    const result = await stack.query('query ($id: ID!) { customer(id: $id) { id } }', {
      id: 'cus_\u0000acme',
    });

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]).toMatchObject({
      message: 'Variable "$id" holds a control character, which no id contains.',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a control character escaped into an ID literal of the document is refused too', async () => {
    const result = await stack.query('{ customer(id: "cus_\\u0007acme") { id } }');

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]).toMatchObject({
      message: 'An ID argument holds a control character, which no id contains.',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a lone surrogate inside an input object names the field', async () => {
    const result = await stack.query(
      'mutation ($input: CreateCustomerInput!) { createCustomer(input: $input) { idempotencyKey } }',
      { input: { idempotencyKey: 'abuse-surrogate-1', type: 'individual', displayName: 'A\udc00' } },
    );

    expect(result.body.errors?.[0]).toMatchObject({
      message:
        'Variable "$input.displayName" holds a lone UTF-16 surrogate; strings must be well-formed Unicode.',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('GraphQL over HTTP status codes', () => {
  test('a client accepting only application/json gets 200 for parse, validation and variable errors', async () => {
    const parse = await postAsJsonClient('{ customer(');
    const validation = await postAsJsonClient('{ nope }');
    const variables = await postAsJsonClient('query ($id: ID!) { customer(id: $id) { id } }', {});

    for (const [result, code] of [
      [parse, 'GRAPHQL_PARSE_FAILED'],
      [validation, 'GRAPHQL_VALIDATION_FAILED'],
      [variables, 'BAD_USER_INPUT'],
    ] as const) {
      expect(result.status).toBe(200);
      expect(result.contentType).toBe('application/json; charset=utf-8');
      expect(result.body.data).toBeUndefined();
      expect(result.body.errors?.[0]?.extensions?.code).toBe(code);
    }
  });

  test('a client accepting application/graphql-response+json keeps the 400', async () => {
    const result = await stack.query('{ nope }');

    expect(result.status).toBe(400);
    expect(result.headers.get('content-type')).toBe('application/graphql-response+json; charset=utf-8');
  });

  test('a GET without a preflight header is still refused (CSRF prevention)', async () => {
    const response = await fetch(
      `${stack.graphqlUrl}?query=${encodeURIComponent('{ apiStatus { reachable } }')}`,
      { headers: await bearer('operator') },
    );

    expect(response.status).toBe(400);
    expect(await response.text()).toMatch(/CSRF/);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('after all of the above, the facade still answers', async () => {
    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });
});

describe('a parser with a raised token limit', () => {
  const raised = useStack({ env: { QUERY_MAX_TOKENS: '50000' } });

  test("a list argument nested beyond the parser's reach is GRAPHQL_PARSE_FAILED with a plain message", async () => {
    const result = await raised.query(nestedListArgument(20_000));

    expect(result.status).toBe(400);
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: 'Syntax Error: The document is nested too deeply to be parsed.',
        extensions: { code: 'GRAPHQL_PARSE_FAILED' },
      }),
    ]);
    expect((await raised.upstreamCalls()).total).toBe(0);
  });
});

describe('the upstream budget of one operation', () => {
  test('150 distinct representations make exactly 100 upstream calls (the default cap); the rest answer TOO_MANY_UPSTREAM_CALLS', async () => {
    const representations = Array.from({ length: 150 }, (_, index) => ({
      __typename: 'Customer',
      id: `cus_budget_${index}`,
    }));

    const result = await stack.query<{ _entities: unknown[] }>(
      'query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Customer { id } } }',
      { representations },
    );

    expect(result.status).toBe(200);
    const codes = (result.body.errors ?? []).map((error) => error.extensions?.code);
    expect(codes.filter((code) => code === 'NOT_FOUND')).toHaveLength(100);
    expect(codes.filter((code) => code === 'TOO_MANY_UPSTREAM_CALLS')).toHaveLength(50);
    expect(
      result.body.errors?.find((error) => error.extensions?.code === 'TOO_MANY_UPSTREAM_CALLS'),
    ).toMatchObject({
      extensions: { limit: 100 },
    });
    expect(await stack.upstreamCalls()).toEqual({
      total: 100,
      byRoute: { 'GET /v3/customers/{customerId}': 100 },
    });
  });
});

describe('malformed strings in entity representations', () => {
  test('a lone surrogate or a control character in a key field is BAD_USER_INPUT at its index, with no upstream call', async () => {
    const result = await stack.query(
      'query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Customer { id } } }',
      {
        representations: [
          { __typename: 'Customer', id: 'cus_\ud800' },
          { __typename: 'Customer', id: 'cus_\u0007' },
        ],
      },
    );

    expect(result.body.data).toEqual({ _entities: [null, null] });
    expect(result.body.errors?.map((error) => [error.path, error.extensions?.code])).toEqual([
      [['_entities', 0], 'BAD_USER_INPUT'],
      [['_entities', 1], 'BAD_USER_INPUT'],
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
