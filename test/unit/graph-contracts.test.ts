/**
 * The contract filter (src/graph/contracts.ts): what a contract's tags remove, and how what is left
 * is made whole again (fields of removed types, required arguments and input fields, empty and
 * unreachable types), on small SDLs of every kind of element; then the repository's own contracts:
 * each builds a valid subgraph schema, `partner` hides exactly the internal parts, and
 * `schema/contracts.json` is read strictly.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildASTSchema, isEnumType, parse, print, type GraphQLNamedType, type GraphQLSchema } from 'graphql';
import { describe, expect, test } from 'vitest';
import {
  contractTypeDefs,
  readContracts,
  readContractsConfig,
  tagsIn,
  type Contract,
} from '../../src/graph/contracts.ts';
import { createSchema, loadTypeDefs } from '../../src/graph/schema.ts';

const TAG =
  'directive @tag(name: String!) repeatable on FIELD_DEFINITION | OBJECT | INTERFACE | UNION | ARGUMENT_DEFINITION | SCALAR | ENUM | ENUM_VALUE | INPUT_OBJECT | INPUT_FIELD_DEFINITION';

function filtered(sdl: string, contract: Partial<Pick<Contract, 'exclude' | 'include'>>): GraphQLSchema {
  const document = contractTypeDefs(parse(`${TAG}\n${sdl}`), { exclude: [], include: [], ...contract });
  // Printed and parsed again: what `_service` serves and composition reads must be valid SDL.
  return buildASTSchema(parse(print(document)));
}

function fieldsOf(schema: GraphQLSchema, type: string): string[] | undefined {
  const named = schema.getType(type) as (GraphQLNamedType & { getFields?: () => object }) | undefined;
  return named?.getFields === undefined ? undefined : Object.keys(named.getFields());
}

describe('what a contract excludes', () => {
  const sdl = `
    type Query {
      account(id: ID!, "Internal only." audit: Boolean @tag(name: "internal")): Account
      fees: Fees @tag(name: "internal")
      tools: Tools
      search(filter: Filter): [Account!]!
      debug(key: DebugKey!): String
    }
    extend type Query { secret: String @tag(name: "internal") }
    type Mutation { archive(input: ArchiveInput!): Account @tag(name: "internal") }
    type Account { id: ID! status: Status! fees: Fees }
    type Fees { bips: Int! }
    type Tools @tag(name: "internal") { reset: Boolean }
    enum Status { OPEN CLOSED FROZEN @tag(name: "internal") }
    input Filter { status: Status  reason: String @tag(name: "internal") }
    input ArchiveInput { id: ID! }
    input DebugKey @tag(name: "internal") { key: String! }
    type Orphan { id: ID! }
  `;
  const schema = filtered(sdl, { exclude: ['internal'] });

  test('a tagged field, argument, enum value and input field is gone; the rest stays', () => {
    expect(fieldsOf(schema, 'Query')).toEqual(['account', 'search']);
    const account = schema.getQueryType()?.getFields()['account'];
    expect(account?.args.map((arg) => arg.name)).toEqual(['id']);
    const status = schema.getType('Status');
    expect(isEnumType(status) ? status.getValues().map((value) => value.name) : undefined).toEqual([
      'OPEN',
      'CLOSED',
    ]);
    expect(fieldsOf(schema, 'Filter')).toEqual(['status']);
  });

  test('a tagged type goes with every field of it, and a field requiring it goes too', () => {
    expect(schema.getType('Tools')).toBeUndefined();
    // `debug` requires a `DebugKey`, which is gone: the field cannot be called, so it is gone.
    expect(fieldsOf(schema, 'Query')).not.toContain('debug');
    expect(schema.getType('DebugKey')).toBeUndefined();
  });

  test('what nothing reaches any more is gone: a root type left empty, its inputs, orphans', () => {
    expect(schema.getMutationType()).toBeUndefined();
    expect(schema.getType('ArchiveInput')).toBeUndefined();
    expect(schema.getType('Orphan')).toBeUndefined();
    // Still reached through `Account.fees`.
    expect(fieldsOf(schema, 'Fees')).toEqual(['bips']);
  });

  test('an extension left empty is dropped, so the SDL prints and parses', () => {
    expect(
      print(contractTypeDefs(parse(`${TAG}\n${sdl}`), { exclude: ['internal'], include: [] })),
    ).not.toMatch(/extend type Query\s*\n/);
  });

  test('an input type whose required field is gone goes, with the fields that take it', () => {
    const broken = filtered(
      `type Query { find(by: By): String  other: String }
       input By { key: Key! }
       scalar Key @tag(name: "internal")`,
      { exclude: ['internal'] },
    );
    expect(broken.getType('By')).toBeUndefined();
    expect(fieldsOf(broken, 'Query')).toEqual(['find', 'other']);
    expect(broken.getQueryType()?.getFields()['find']?.args).toEqual([]);
  });

  test('entities stay (a gateway reaches them through `_entities`), interfaces keep their implementations', () => {
    const kept = filtered(
      `directive @key(fields: String!) repeatable on OBJECT
       type Query { node(id: ID!): Node }
       interface Node { id: ID! }
       type Hook implements Node @tag(name: "internal") { id: ID! }
       type Card implements Node { id: ID! }
       type Entity @key(fields: "id") { id: ID! }`,
      { exclude: ['internal'] },
    );
    expect(kept.getType('Hook')).toBeUndefined();
    expect(kept.getType('Card')).toBeDefined();
    expect(kept.getType('Entity')).toBeDefined();
  });

  test('no tag to exclude: the document is the same object', () => {
    const document = parse(`${TAG}\n${sdl}`);
    expect(contractTypeDefs(document, { exclude: [], include: [] })).toBe(document);
  });
});

describe('what a contract includes', () => {
  test('only fields carrying an included tag, or of a type carrying one; exclusion wins', () => {
    const schema = filtered(
      `type Query { account: Account @tag(name: "public")  admin: String  both: String @tag(name: "public") @tag(name: "internal") }
       type Account @tag(name: "public") { id: ID!  audit: String @tag(name: "internal") }`,
      { include: ['public'], exclude: ['internal'] },
    );
    expect(fieldsOf(schema, 'Query')).toEqual(['account']);
    expect(fieldsOf(schema, 'Account')).toEqual(['id']);
  });
});

describe('the repository’s contracts', () => {
  const contracts = readContracts();
  const typeDefs = loadTypeDefs();

  test.each(contracts.map((contract) => [contract.name, contract] as const))(
    '%s builds a valid subgraph schema',
    (_name, contract) => {
      expect(() => createSchema(contractTypeDefs(typeDefs, contract))).not.toThrow();
    },
  );

  test('partner hides exactly what is tagged internal, and what only that reached', () => {
    const partner = createSchema(
      contractTypeDefs(
        typeDefs,
        contracts.find(({ name }) => name === 'partner')!,
      ),
    );
    const whole = createSchema(typeDefs);
    const hidden = Object.keys(whole.getTypeMap()).filter((name) => partner.getType(name) === undefined);
    expect(hidden).toContain('WebhookEndpoint');
    expect(hidden).toContain('AccountFees');
    expect(hidden).toContain('PlatformEvent');
    expect(hidden).not.toContain('Account');
    expect(fieldsOf(partner, 'Account')).not.toContain('fees');
    expect(fieldsOf(partner, 'Mutation')).toEqual(
      fieldsOf(whole, 'Mutation')!.filter(
        (name) =>
          ![
            'setAccountFees',
            'createCustomer',
            'sandboxSetCapabilityStatus',
            'createWebhookEndpoint',
            'updateWebhookEndpoint',
            'archiveWebhookEndpoint',
          ].includes(name),
      ),
    );
    expect(tagsIn(typeDefs)).toEqual(new Set(['internal']));
  });
});

describe('schema/contracts.json is read strictly', () => {
  const write = (content: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'contracts-')), 'contracts.json');
    writeFileSync(file, content);
    return file;
  };

  test.each([
    ['not JSON', '{', /cannot be read as JSON/],
    ['no list', '{}', /must hold \{ "contracts"/],
    ['a bad name', '{"contracts":[{"name":"Partner!","description":"x"}]}', /"name" must be/],
    [
      'a name twice',
      '{"contracts":[{"name":"a","description":"x"},{"name":"a","description":"y"}]}',
      /listed twice/,
    ],
    ['no description', '{"contracts":[{"name":"a"}]}', /"description"/],
    [
      'a tag that is no name',
      '{"contracts":[{"name":"a","description":"x","exclude":[1]}]}',
      /list of tag names/,
    ],
  ])('%s is refused', (_case, content, message) => {
    expect(() => readContracts(write(content))).toThrow(message);
  });

  test('CONTRACT_DEFAULT must name a listed contract', () => {
    const problems: string[] = [];
    const config = readContractsConfig({ CONTRACT_DEFAULT: 'nobody' }, (name, problem) =>
      problems.push(`${name}: ${problem}`),
    );
    expect(config.defaultContract).toBe('nobody');
    expect(problems).toEqual([
      'CONTRACT_DEFAULT: names no contract of schema/contracts.json (partner, internal)',
    ]);
  });
});
