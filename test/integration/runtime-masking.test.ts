/**
 * Errors the facade did not anticipate are masked for the client and logged for the operator;
 * deliberate GraphQL errors pass through; stack traces appear only in development. A small
 * fixture schema provides resolvers that fail on purpose, over the real upstream.
 */
import { makeExecutableSchema } from '@graphql-tools/schema';
import { GraphQLError } from 'graphql';
import { describe, expect, test } from 'vitest';
import type { GraphContext } from '../../src/graph/context.ts';
import { getCustomer } from '../../src/upstream/customers.ts';
import { useStack } from '../support/harness/stack.ts';

function createFailingSchema() {
  return makeExecutableSchema<GraphContext>({
    typeDefs: /* GraphQL */ `
      type Query {
        crash: String
        deliberate: String
        missingCustomer: String
        fine: String
      }
    `,
    resolvers: {
      Query: {
        crash: () => {
          throw new TypeError('Cannot read properties of undefined (reading "ledger") at db://internal-host');
        },
        deliberate: () => {
          throw new GraphQLError('Pick a smaller page.', { extensions: { code: 'PAGE_TOO_LARGE' } });
        },
        missingCustomer: async (_parent, _args, context) =>
          (await getCustomer(context.upstream, 'cus_missing')).id,
        fine: () => 'ok',
      },
    },
  });
}

const QUERY = '{ crash deliberate missingCustomer fine }';

interface ErrorEntry {
  message: string;
  path?: (string | number)[];
  extensions?: Record<string, unknown>;
}

function errorAt(errors: ErrorEntry[] | undefined, field: string): ErrorEntry {
  const error = errors?.find((entry) => entry.path?.[0] === field);
  expect(error, `no error at ${field}`).toBeDefined();
  return error!;
}

describe('outside development', () => {
  const stack = useStack({ app: { schema: createFailingSchema() } });

  test('an unexpected error is masked, the rest of the query answers', async () => {
    const result = await stack.query(QUERY, {}, { 'x-request-id': 'mask-1' });

    expect(result.body.data).toEqual({ crash: null, deliberate: null, missingCustomer: null, fine: 'ok' });
    expect(errorAt(result.body.errors, 'crash')).toEqual({
      message: 'Unexpected error.',
      locations: [{ line: 1, column: 3 }],
      path: ['crash'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    expect(JSON.stringify(result.body)).not.toContain('internal-host');
  });

  test('a deliberate GraphQLError keeps its message and code', async () => {
    const result = await stack.query(QUERY);

    expect(errorAt(result.body.errors, 'deliberate')).toMatchObject({
      message: 'Pick a smaller page.',
      extensions: { code: 'PAGE_TOO_LARGE' },
    });
  });

  test('an upstream problem thrown from any resolver is mapped, not masked', async () => {
    const result = await stack.query(QUERY);

    expect(errorAt(result.body.errors, 'missingCustomer').extensions).toMatchObject({
      code: 'NOT_FOUND',
      problem: { status: 404, code: 'not_found' },
    });
  });

  test('no error carries a stack trace', async () => {
    const result = await stack.query(QUERY);

    expect(JSON.stringify(result.body)).not.toContain('stacktrace');
  });

  test('the masked error is logged with its real cause and the request id', async () => {
    await stack.query(QUERY, {}, { 'x-request-id': 'mask-2' });

    const logged = stack
      .logs()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((entry) => entry.msg === 'unexpected error' && entry.requestId === 'mask-2');
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      level: 'error',
      path: ['crash'],
      error: { name: 'TypeError', message: expect.stringContaining('internal-host') },
    });
  });
});

describe('in development', () => {
  const stack = useStack({ env: { NODE_ENV: 'development' }, app: { schema: createFailingSchema() } });

  test('errors carry their stack trace, the message stays masked', async () => {
    const result = await stack.query(QUERY);

    const crash = errorAt(result.body.errors, 'crash');
    expect(crash.message).toBe('Unexpected error.');
    expect(crash.extensions?.stacktrace).toEqual(
      expect.arrayContaining([expect.stringContaining('TypeError')]),
    );
  });
});
