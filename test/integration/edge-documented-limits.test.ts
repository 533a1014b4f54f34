/**
 * The examples docs/security.md gives for the one cost measure (QUERY_MAX_COST), as tests: what it
 * says passes passes, with the cost it says, and what it says is refused is refused.
 */
import { describe, expect, test } from 'vitest';
import { parse } from 'graphql';
import { measureOperation } from '../../src/graph/query-limits.ts';
import { createSchema } from '../../src/graph/schema.ts';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();
const schema = createSchema();

/** The facade's cost of `document` (its only operation), with `variables`. */
function costOf(document: string, variables: Record<string, unknown> = {}): number {
  const parsed = parse(document);
  const operation = parsed.definitions.find((definition) => definition.kind === 'OperationDefinition');
  if (operation?.kind !== 'OperationDefinition') throw new Error('no operation');
  return measureOperation(schema, new Map(), operation, variables).cost;
}

const PAGED_FEES =
  '{ customers(first: 10) { nodes { id accounts(first: 10) { nodes { id fees { breakdown { developer { fixed bips } } } } } } } }';
const UNPAGED_FEES =
  '{ customers { nodes { id accounts { nodes { id fees { breakdown { developer { fixed bips } } } } } } } }';

describe('docs/security.md, "Documents": the one cost measure', () => {
  test('a paged list of customers with each account’s fees costs 731 and is answered', async () => {
    expect(costOf(PAGED_FEES)).toBe(731);
    const answer = await stack.query(PAGED_FEES);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    expect(answer.body.data).toMatchObject({ customers: { nodes: expect.any(Array) } });
  });

  test('the same list without `first` counts the default pages (25) and is answered, dearer', async () => {
    const cost = costOf(UNPAGED_FEES);
    expect(cost).toBeGreaterThan(costOf(PAGED_FEES));
    expect(cost).toBeLessThanOrEqual(5000);
    const answer = await stack.query(UNPAGED_FEES);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
  });

  test('pages of 100 customers with 100 accounts each are refused by the cost, whatever a second model says', async () => {
    const big = '{ customers(first: 100) { nodes { id accounts(first: 100) { nodes { id } } } } }';
    const answer = await stack.query(big);
    expect(answer.status).toBe(400);
    expect(answer.body.errors).toEqual([
      expect.objectContaining({
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: costOf(big), maxCost: 5000 },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('the cost counts a `first` given by a variable at its value, once the variables are known', async () => {
    const byVariable =
      'query($n: Int) { customers(first: $n) { nodes { id accounts(first: $n) { nodes { id } } } } }';
    expect(costOf(byVariable, { n: 10 })).toBe(
      costOf('{ customers(first: 10) { nodes { id accounts(first: 10) { nodes { id } } } } }'),
    );
    expect((await stack.query(byVariable, { n: 10 })).status).toBe(200);
    const refused = await stack.query(byVariable, { n: 100 });
    expect(refused.status).toBe(400);
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      maxCost: 5000,
    });
  });
});
