import { Kind, parse, type FragmentDefinitionNode, type OperationDefinitionNode } from 'graphql';
import { describe, expect, test } from 'vitest';
import { measureOperation } from '../../src/graph/query-limits.ts';
import { createSchema } from '../../src/graph/schema.ts';
import { fragmentFanOut } from '../support/hostile-documents.ts';

const schema = createSchema();

function measure(document: string, variables?: Record<string, unknown>) {
  const parsed = parse(document);
  const fragments = new Map<string, FragmentDefinitionNode>();
  let operation: OperationDefinitionNode | undefined;
  for (const definition of parsed.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    if (definition.kind === Kind.OPERATION_DEFINITION) operation = definition;
  }
  return measureOperation(schema, fragments, operation!, variables);
}

describe('measureOperation', () => {
  test('measures each fragment once: 60 levels of doubling spreads give 2^61 + 1 without expanding them', () => {
    // Expanded, this would be 2^60 spreads; measured once per fragment it is 61 steps.
    expect(measure(fragmentFanOut(60))).toEqual({ cost: 2 ** 61 + 1, depth: 2 });
  });

  test('counts a connection once per item of its page, with the variable known or at its smallest', () => {
    const document = 'query ($n: Int) { customers(first: $n) { nodes { id displayName } } }';

    expect(measure(document, { n: 10 })).toEqual({ cost: 1 + 10 * 3, depth: 2 });
    expect(measure(document, {})).toEqual({ cost: 1 + 25 * 3, depth: 2 });
    expect(measure(document, undefined)).toEqual({ cost: 1 + 1 * 3, depth: 2 });
  });

  test("counts hops, not Relay's wrappers: customer → accounts → edges → node → customer → id is 4 deep", () => {
    expect(
      measure('{ customer(id: "c") { accounts(first: 1) { edges { node { customer { id } } } } } }'),
    ).toEqual({
      cost: 1 + 1 + 1 + 1 + 1 + 1,
      depth: 4,
    });
  });

  test("counts a plain list at its @listSize: an account's balances are assumed to be 5", () => {
    expect(measure('{ account(customerId: "c", id: "a") { balances { currency available } } }')).toEqual({
      cost: 1 + 1 + 5 * 2,
      depth: 3,
    });
  });

  test('counts _entities once per representation', () => {
    const document =
      'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Customer { id displayName } } }';

    expect(measure(document, { r: [{}, {}, {}] }).cost).toBe(1 + 3 * 2);
  });

  test('does not loop on a fragment cycle (graphql-js reports it)', () => {
    expect(
      measure(
        '{ customer(id: "c") { ...A } } fragment A on Customer { accounts { nodes { customer { ...A } } } }',
      ),
    ).toEqual({ cost: 1 + 1 + 25 * 2, depth: 3 });
  });
});
