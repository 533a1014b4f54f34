/**
 * The schema lint, run in CI with the rest of the suite: the rules of docs/schema-conventions.md
 * that can be checked mechanically, over the SDL of `schema/graph/` as the facade serves it. Each
 * rule lists every offender, so a failure names what to fix.
 */
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isNonNullType,
  isObjectType,
  isUnionType,
  Kind,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { createSchema, loadTypeDefs } from '../../src/graph/schema.ts';

const schema = createSchema();

/** The types defined or extended in schema/graph/ (not GraphQL's, federation's or link's own). */
const ownTypeNames = new Set(
  loadTypeDefs()
    .definitions.filter((definition) => 'name' in definition && definition.name !== undefined)
    .map((definition) => (definition as { name: { value: string } }).name.value),
);
const ownTypes: GraphQLNamedType[] = Object.values(schema.getTypeMap()).filter((type) =>
  ownTypeNames.has(type.name),
);
/** Root and federation fields the facade does not write (`_service`, `_entities`). */
const isFederationField = (name: string) => name.startsWith('_');

const PASCAL_CASE = /^[A-Z][A-Za-z0-9]*$/;
const CAMEL_CASE = /^[a-z][A-Za-z0-9]*$/;
const SCREAMING_SNAKE_CASE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

function objectFields(type: GraphQLNamedType): [string, GraphQLField<unknown, unknown>][] {
  if (!isObjectType(type) && !isInterfaceType(type)) return [];
  return Object.entries(type.getFields()).filter(([name]) => !isFederationField(name));
}

describe('schema lint', () => {
  it('names types in PascalCase, fields, arguments and input fields in camelCase, enum values in SCREAMING_SNAKE_CASE', () => {
    const offenders: string[] = [];
    for (const type of ownTypes) {
      if (!PASCAL_CASE.test(type.name)) offenders.push(`type ${type.name}`);
      for (const [name, field] of objectFields(type)) {
        if (!CAMEL_CASE.test(name)) offenders.push(`${type.name}.${name}`);
        for (const argument of field.args) {
          if (!CAMEL_CASE.test(argument.name)) offenders.push(`${type.name}.${name}(${argument.name})`);
        }
      }
      if (isInputObjectType(type)) {
        for (const name of Object.keys(type.getFields())) {
          if (!CAMEL_CASE.test(name)) offenders.push(`${type.name}.${name}`);
        }
      }
      if (isEnumType(type)) {
        for (const value of type.getValues()) {
          if (!SCREAMING_SNAKE_CASE.test(value.name)) offenders.push(`${type.name}.${value.name}`);
        }
      }
    }
    expect(offenders).toEqual([]);
  });

  it('describes every type, field, argument, input field and enum value', () => {
    const undescribed: string[] = [];
    const described = (text: string | null | undefined) => typeof text === 'string' && text.trim() !== '';
    for (const type of ownTypes) {
      if (!described(type.description)) undescribed.push(`type ${type.name}`);
      for (const [name, field] of objectFields(type)) {
        if (!described(field.description)) undescribed.push(`${type.name}.${name}`);
        for (const argument of field.args) {
          if (!described(argument.description)) undescribed.push(`${type.name}.${name}(${argument.name})`);
        }
      }
      if (isInputObjectType(type)) {
        for (const [name, field] of Object.entries(type.getFields())) {
          if (!described(field.description)) undescribed.push(`${type.name}.${name}`);
        }
      }
      if (isEnumType(type)) {
        for (const value of type.getValues()) {
          if (!described(value.description)) undescribed.push(`${type.name}.${value.name}`);
        }
      }
    }
    expect(undescribed).toEqual([]);
  });

  it('gives a field name one type and nullability across the members of a union or the implementations of an interface', () => {
    // A selection of both members (`... on A { x } ... on B { x }`) fails validation when `x`
    // differs: "conflicting types". `_Entity` is included: a gateway selects across entities.
    const groups: { name: string; members: readonly GraphQLObjectType[] }[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (isUnionType(type)) groups.push({ name: type.name, members: type.getTypes() });
      if (isInterfaceType(type)) {
        groups.push({ name: type.name, members: schema.getImplementations(type).objects });
      }
    }
    expect(groups.map((group) => group.name)).toContain('_Entity');

    // Known differences across `_Entity` (and `Node`, which the same records implement), kept on purpose: each is a different thing under one name
    // (a quote's priced `target` amount and a transfer's target account), or a record whose upstream
    // read may lack the field (an institution's timestamps), or a value the upstream always sends on
    // one type and not on the other. A gateway selects each entity with its own fragment, so none
    // reaches a client as a conflict; a new one fails this test.
    const accepted = new Set([
      'Account.createdAt: DateTime! vs Institution.createdAt: DateTime',
      'Account.updatedAt: DateTime! vs Institution.updatedAt: DateTime',
      'Rule.description: String vs Task.description: String!',
      'Quote.target: Money! vs Transfer.target: FundsTarget!',
    ]);
    const conflicts: string[] = [];
    for (const group of groups) {
      const seen = new Map<string, { type: string; on: string }>();
      for (const member of group.members) {
        for (const [name, field] of objectFields(member)) {
          const type = field.type.toString();
          const earlier = seen.get(name);
          if (!earlier) seen.set(name, { type, on: member.name });
          else if (earlier.type !== type) {
            conflicts.push(
              `${group.name}: ${earlier.on}.${name}: ${earlier.type} vs ${member.name}.${name}: ${type}`,
            );
          }
        }
      }
    }
    const unaccepted = conflicts.filter(
      (conflict) => !(/^(?:_Entity|Node): /.test(conflict) && accepted.has(conflict.replace(/^\w+: /, ''))),
    );
    expect(unaccepted).toEqual([]);
    // `displayName` in particular is one type everywhere it appears.
    const displayNames = new Set(
      Object.values(schema.getTypeMap()).flatMap((type) =>
        objectFields(type)
          .filter(([name]) => name === 'displayName')
          .map(([, field]) => field.type.toString()),
      ),
    );
    expect([...displayNames]).toEqual(['String']);
  });

  it('shapes every connection as Relay does: edges with cursor and node, nodes, pageInfo', () => {
    const misshapen: string[] = [];
    const expectField = (type: GraphQLObjectType, name: string, expected: string) => {
      const actual = type.getFields()[name]?.type.toString();
      if (actual !== expected)
        misshapen.push(`${type.name}.${name}: ${actual ?? 'missing'}, expected ${expected}`);
    };
    const connections = ownTypes.filter(
      (type): type is GraphQLObjectType => isObjectType(type) && type.name.endsWith('Connection'),
    );
    expect(connections.length).toBeGreaterThan(10);
    for (const connection of connections) {
      const node = connection.name.slice(0, -'Connection'.length);
      const edge = schema.getType(`${node}Edge`);
      if (!isObjectType(edge)) {
        misshapen.push(`${node}Edge: missing`);
        continue;
      }
      expectField(connection, 'edges', `[${node}Edge!]!`);
      expectField(connection, 'nodes', `[${node}!]!`);
      expectField(connection, 'pageInfo', 'PageInfo!');
      expectField(edge, 'cursor', 'String!');
      expectField(edge, 'node', `${node}!`);
    }
    const pageInfo = schema.getType('PageInfo') as GraphQLObjectType;
    expectField(pageInfo, 'hasNextPage', 'Boolean!');
    expectField(pageInfo, 'hasPreviousPage', 'Boolean!');
    expectField(pageInfo, 'startCursor', 'String');
    expectField(pageInfo, 'endCursor', 'String');
    // Every field returning a connection pages forward with `first` and `after`.
    for (const type of ownTypes) {
      for (const [name, field] of objectFields(type)) {
        if (!getNamedType(field.type).name.endsWith('Connection')) continue;
        const args = field.args.map((argument) => `${argument.name}: ${argument.type.toString()}`);
        if (!args.includes('first: Int') || !args.includes('after: String')) {
          misshapen.push(`${type.name}.${name}(${args.join(', ')})`);
        }
      }
    }
    expect(misshapen).toEqual([]);
  });

  it('gives every mutation one `input: <Name>Input!` argument and a nullable payload', () => {
    const offenders: string[] = [];
    for (const [name, field] of Object.entries(schema.getMutationType()!.getFields())) {
      const [input, ...others] = field.args;
      const expectedInput = `${name[0]!.toUpperCase()}${name.slice(1)}Input!`;
      if (input?.name !== 'input' || others.length > 0) offenders.push(`${name}: arguments`);
      // Shared inputs (RuleTransitionInput) are allowed when named for what they share.
      else if (input.type.toString() !== expectedInput && !input.type.toString().endsWith('Input!')) {
        offenders.push(`${name}: ${input.type.toString()}`);
      }
      if (isNonNullType(field.type) || !getNamedType(field.type).name.endsWith('Payload')) {
        offenders.push(`${name}: ${field.type.toString()}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('lints the SDL it is given, not a copy: every own definition is a type of the served schema', () => {
    const kinds = new Set(loadTypeDefs().definitions.map((definition) => definition.kind));
    expect(kinds.has(Kind.OBJECT_TYPE_DEFINITION)).toBe(true);
    expect(ownTypes.length).toBe([...ownTypeNames].filter((name) => schema.getType(name)).length);
  });
});
