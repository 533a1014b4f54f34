/** `selectedFields`: a field's selection read as graphql-js will execute it, before it runs. */
import { Kind, parse, type FieldNode, type FragmentDefinitionNode, type GraphQLObjectType } from 'graphql';
import { describe, expect, test } from 'vitest';
import { createSchema } from '../../src/graph/schema.ts';
import { selectedFields } from '../../src/graph/selection.ts';

const schema = createSchema();
const customerType = schema.getType('Customer') as GraphQLObjectType;

/** The fields `document`'s first root field selects of a Customer, with their arguments. */
function customerSelection(document: string, variableValues: Record<string, unknown> = {}) {
  const parsed = parse(document);
  const fragments: Record<string, FragmentDefinitionNode> = {};
  let root: FieldNode | undefined;
  for (const definition of parsed.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
    if (definition.kind === Kind.OPERATION_DEFINITION)
      root = definition.selectionSet.selections[0] as FieldNode;
  }
  return selectedFields({ schema, fragments, variableValues }, [root!], customerType, () => true).map(
    (field) => ({ name: field.name, args: field.args, nodes: field.nodes.length }),
  );
}

describe('selectedFields', () => {
  test('merges a field asked twice under one response key, and keeps aliases apart', () => {
    expect(
      customerSelection(
        `{ customer(id: "c") { id accounts { nodes { id } } accounts { nodes { label } } a: accounts(first: 2) { nodes { id } } } }`,
      ),
    ).toEqual([
      { name: 'id', args: {}, nodes: 1 },
      { name: 'accounts', args: {}, nodes: 2 },
      { name: 'accounts', args: { first: 2 }, nodes: 1 },
    ]);
  });

  test('follows inline and named fragments whose condition applies, through the entity union too', () => {
    expect(
      customerSelection(`
        { customer(id: "c") { ... on Customer { ...More } ... on _Entity { ... on Customer { rules { nodes { id } } } } } }
        fragment More on Customer { tasks(first: 1) { nodes { id } } ...More }
      `),
    ).toEqual([
      { name: 'tasks', args: { first: 1 }, nodes: 1 },
      { name: 'rules', args: {}, nodes: 1 },
    ]);
  });

  test('evaluates @skip and @include with the variables, and coerces arguments from them', () => {
    expect(
      customerSelection(
        `query ($no: Boolean!, $size: Int) {
          customer(id: "c") {
            id @skip(if: true)
            quotes @include(if: $no) { nodes { id } }
            transfers(first: $size) @skip(if: $no) { nodes { id } }
          }
        }`,
        { no: false, size: 5 },
      ),
    ).toEqual([{ name: 'transfers', args: { first: 5 }, nodes: 1 }]);
  });
});
