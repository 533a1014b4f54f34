import {
  getNamedType,
  GraphQLScalarType,
  type GraphQLInputObjectType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isObjectType,
  isScalarType,
  isSpecifiedScalarType,
  isUnionType,
  type GraphQLNamedType,
  type GraphQLObjectType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import type { Resolvers } from '../../src/generated/graphql.ts';
import { createSchema, loadTypeDefs, mergeResolverMaps } from '../../src/graph/schema.ts';

/** The types the SDL itself declares (not federation's, not introspection's, not built-in scalars). */
function declaredTypes(): GraphQLNamedType[] {
  const federationOnly = new Set([
    '_Any',
    '_Entity',
    '_Service',
    'FieldSet',
    'link__Import',
    'link__Purpose',
  ]);
  const schema = createSchema();
  return Object.values(schema.getTypeMap()).filter(
    (type) =>
      !isIntrospectionType(type) &&
      !(isScalarType(type) && isSpecifiedScalarType(type)) &&
      !federationOnly.has(type.name) &&
      !type.name.startsWith('federation__') &&
      !type.name.startsWith('link__'),
  );
}

/** Every element of the SDL that lacks a description, as `Type`, `Type.field`, `Type.field(arg)`. */
function undescribed(): string[] {
  const missing: string[] = [];
  const check = (description: string | null | undefined, name: string) => {
    if (!description?.trim()) missing.push(name);
  };
  for (const type of declaredTypes()) {
    check(type.description, type.name);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        if (field.name.startsWith('_')) continue;
        check(field.description, `${type.name}.${field.name}`);
        for (const arg of field.args) check(arg.description, `${type.name}.${field.name}(${arg.name})`);
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields()))
        check(field.description, `${type.name}.${field.name}`);
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) check(value.description, `${type.name}.${value.name}`);
    } else if (isUnionType(type)) {
      // Unions have only their own description.
    }
  }
  return missing;
}

describe('the schema', () => {
  it('builds as a federation subgraph with every domain file', () => {
    const schema = createSchema();
    for (const name of [
      'Customer',
      'Account',
      'RelatedParty',
      'Capability',
      'Institution',
      'CustomerDocument',
    ]) {
      expect(schema.getType(name), name).toBeDefined();
    }
    expect(schema.getQueryType()!.getFields()._entities).toBeDefined();
    expect(schema.getQueryType()!.getFields()._service).toBeDefined();
  });

  it('describes every type, field, argument, input field and enum value', () => {
    expect(undescribed()).toEqual([]);
  });

  it('names the Query fields and mutations clients rely on', () => {
    const schema = createSchema();
    const query = schema.getQueryType()!.getFields();
    for (const name of ['customer', 'customers', 'account', 'webhookEndpoints', 'apiStatus']) {
      expect(query[name], name).toBeDefined();
    }
    const mutation = schema.getMutationType()!.getFields();
    for (const name of [
      'createCustomer',
      'createRelatedParty',
      'archiveRelatedParty',
      'setAccountFees',
      'archiveAccount',
      'archiveCustomerDocument',
      'createWebhookEndpoint',
      'updateWebhookEndpoint',
      'archiveWebhookEndpoint',
      'createRule',
      'pauseRule',
      'resumeRule',
      'archiveRule',
      'sandboxTopUp',
      'sandboxSetCapabilityStatus',
    ]) {
      expect(mutation[name], name).toBeDefined();
      expect(
        mutation[name]!.args.map((arg) => arg.name),
        name,
      ).toEqual(['input']);
    }
  });

  it('gives the fields clients rely on exactly the signatures the contract names', () => {
    const schema = createSchema();
    const signature = (typeName: string, fieldName: string): string => {
      const field = (schema.getType(typeName) as GraphQLObjectType).getFields()[fieldName];
      if (!field) return `${typeName}.${fieldName} is missing`;
      const args = field.args.map((arg) => `${arg.name}: ${arg.type.toString()}`).join(', ');
      return `${fieldName}(${args}): ${field.type.toString()}`;
    };
    const page = 'first: Int, after: String, updatedSince: DateTime';
    expect(signature('Query', 'customer')).toBe('customer(id: ID!): Customer');
    expect(signature('Query', 'customers')).toBe(`customers(${page}): CustomerConnection!`);
    expect(signature('Query', 'account')).toBe('account(customerId: ID!, id: ID!): Account');
    expect(signature('Query', 'webhookEndpoints')).toBe(
      `webhookEndpoints(${page}): WebhookEndpointConnection!`,
    );
    expect(signature('Query', 'apiStatus')).toBe('apiStatus(): ApiStatus!');
    for (const [name, connection] of [
      ['accounts', 'AccountConnection'],
      ['relatedParties', 'RelatedPartyConnection'],
      ['capabilities', 'CapabilityConnection'],
      ['documents', 'CustomerDocumentConnection'],
      ['recipients', 'RecipientConnection'],
      ['tasks', 'TaskConnection'],
      ['quotes', 'QuoteConnection'],
      ['transfers', 'TransferConnection'],
      ['rules', 'RuleConnection'],
    ] as const) {
      expect(signature('Customer', name)).toBe(`${name}(${page}): ${connection}`);
    }
    expect(signature('Account', 'customerId')).toBe('customerId(): ID!');
    expect(signature('Account', 'balances')).toBe('balances(): [Balance!]!');
    expect(signature('Account', 'customer')).toBe('customer(): Customer');
    expect(signature('Rule', 'trigger')).toBe('trigger(): Account');
    expect(signature('PageInfo', 'hasNextPage')).toBe('hasNextPage(): Boolean!');
    expect(signature('PageInfo', 'endCursor')).toBe('endCursor(): String');
    for (const mutation of Object.values(schema.getMutationType()!.getFields())) {
      const payload = getNamedType(mutation.type) as GraphQLObjectType;
      const input = getNamedType(mutation.args[0]!.type) as GraphQLInputObjectType;
      // Nullable: a failing mutation nulls only its own payload, not the other mutations' answers.
      expect(mutation.type.toString(), mutation.name).toMatch(/^\w+Payload$/);
      expect(payload.getFields().idempotencyKey?.type.toString(), mutation.name).toBe('String!');
      expect(payload.getFields().replayed?.type.toString(), mutation.name).toBe('Boolean!');
      expect(input.getFields().idempotencyKey?.type.toString(), mutation.name).toBe('String!');
    }
  });

  it('makes every field backed by a nested upstream read nullable, so a failed read nulls only itself', () => {
    const schema = createSchema();
    const customer = schema.getType('Customer') as GraphQLObjectType;
    for (const name of ['accounts', 'relatedParties', 'capabilities', 'documents', 'rules']) {
      expect(customer.getFields()[name]!.type.toString(), name).not.toMatch(/!$/);
    }
    const account = schema.getType('Account') as GraphQLObjectType;
    expect(account.getFields().fees!.type.toString()).toBe('AccountFees');
    expect(account.getFields().customer!.type.toString()).toBe('Customer');
  });

  it('loads base.graphql first, so its @link heads the document', () => {
    const document = loadTypeDefs();
    expect(document.definitions[0]!.kind).toBe('SchemaExtension');
  });
});

describe('mergeResolverMaps', () => {
  it('merges the maps type by type and keeps scalars whole', () => {
    const scalar = new GraphQLScalarType({ name: 'DateTime' });
    const merged = mergeResolverMaps([
      { DateTime: scalar, Query: { apiStatus: () => null! } },
      { Query: { customer: () => null } },
    ] as Resolvers[]);

    expect(merged.DateTime).toBe(scalar);
    expect(Object.keys(merged.Query!)).toEqual(['apiStatus', 'customer']);
  });

  it('refuses two maps that define the same field', () => {
    expect(() =>
      mergeResolverMaps([
        { Query: { customer: () => null } },
        { Query: { customer: () => null } },
      ] as Resolvers[]),
    ).toThrow('Two resolver maps define Query.customer.');
  });
});
