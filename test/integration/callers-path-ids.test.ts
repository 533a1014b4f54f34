/**
 * No id a caller sends can change the shape of an upstream path, tried through a reverse proxy that
 * normalises paths (percent-decoding `%2F`, resolving dot segments) between the facade and the
 * emulator. Every argument that takes an id is found by walking the schema, so a new field or input
 * is tried here without anyone adding it; for each, hostile ids answer BAD_USER_INPUT at the
 * argument's input path and neither the proxy nor the emulator sees a request.
 */
import { randomUUID } from 'node:crypto';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isUnionType,
  Kind,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { createSchema } from '../../src/graph/schema.ts';
import { startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { startFacade, type GraphQLResult, type RunningFacade } from '../support/harness/facade.ts';
import { startNormalisingProxy, type NormalisingProxy } from '../support/normalising-proxy.ts';

/** Ids that change a path's shape as sent, or once a proxy decodes and normalises it. */
const HOSTILE_IDS = [
  '../../cus_globex/accounts/acc_globex_eth',
  '..',
  '.',
  '%2e%2e',
  'a/b',
  'a%2Fb',
  '..%2F..%2Fcus_globex',
  'cus_acme/..',
  'a\\b',
  'a;b',
  'a?b',
  'a#b',
] as const;

/**
 * Id-named `String` arguments that are no upstream id: the caller's own reference of a customer, a
 * text field of the request body (1 to 256 characters of text) that never enters a path.
 */
const NOT_UPSTREAM_IDS = new Set(['Mutation.createCustomer(input).externalId']);

/** One place where a caller's id enters an operation. */
interface IdArgument {
  /** `Type.field(argument).inner.path`, for the test's name. */
  coordinate: string;
  rootType: 'Query' | 'Mutation' | 'Subscription';
  field: GraphQLField<unknown, unknown>;
  /** The argument's input path: argument name, input field names, list index 0. */
  inputPath: (string | number)[];
}

const schema = createSchema();

/** Whether an input field or argument holds an id: typed `ID`, or a `String` named like one. */
function holdsId(name: string, type: GraphQLInputType): boolean {
  const named = getNamedType(type).name;
  return named === 'ID' || (named === 'String' && /^ids?$|Ids?$/.test(name));
}

/** Every id-holding argument path under `type` (input objects walked, lists at index 0). */
function idPathsOf(
  name: string,
  type: GraphQLInputType,
  path: (string | number)[],
  seen: ReadonlySet<string>,
): (string | number)[][] {
  if (isNonNullType(type)) return idPathsOf(name, type.ofType, path, seen);
  if (isListType(type)) return idPathsOf(name, type.ofType, [...path, 0], seen);
  if (holdsId(name, type)) return [path];
  if (!isInputObjectType(type) || seen.has(type.name)) return [];
  const inner = new Set([...seen, type.name]);
  return Object.values(type.getFields()).flatMap((field) =>
    idPathsOf(field.name, field.type, [...path, field.name], inner),
  );
}

/** The schema's id arguments, root field by root field. */
function idArgumentsOf(graph: GraphQLSchema): IdArgument[] {
  const roots = [graph.getQueryType(), graph.getMutationType(), graph.getSubscriptionType()];
  return roots.flatMap((root) =>
    root === null || root === undefined
      ? []
      : Object.values(root.getFields()).flatMap((field) =>
          field.args.flatMap((argument) =>
            idPathsOf(argument.name, argument.type, [argument.name], new Set()).map((inputPath) => ({
              coordinate: coordinateOf(root.name, field.name, inputPath),
              rootType: root.name as IdArgument['rootType'],
              field,
              inputPath,
            })),
          ),
        ),
  );
}

/** `Type.field(argument).inner.path`. */
function coordinateOf(typeName: string, fieldName: string, inputPath: readonly (string | number)[]): string {
  const [argument, ...inner] = inputPath;
  return `${typeName}.${fieldName}(${String(argument)})${inner.map((part) => `.${String(part)}`).join('')}`;
}

const ID_ARGUMENTS = idArgumentsOf(schema).filter((argument) => !NOT_UPSTREAM_IDS.has(argument.coordinate));

/** A valid value of a scalar that is not the id under test. */
function sampleLeaf(type: GraphQLInputType): unknown {
  const named = getNamedType(type);
  if (isEnumType(named)) return named.getValues()[0]!.name;
  switch (named.name) {
    case 'ID':
      return 'cus_acme';
    case 'String':
      return 'probe';
    case 'Int':
    case 'Float':
      return 1;
    case 'Boolean':
      return false;
    case 'DateTime':
      return '2026-01-01T00:00:00Z';
    case 'Decimal':
      return '1.00';
    default:
      throw new Error(`No sample value for the scalar ${named.name}; add one here.`);
  }
}

/**
 * A value of `type` that coerces, with `id` at `path` (relative to this value) and the required
 * fields filled with valid values.
 */
function valueWith(type: GraphQLInputType, path: readonly (string | number)[], id: string): unknown {
  if (isNonNullType(type)) return valueWith(type.ofType, path, id);
  if (path.length === 0) return id;
  if (isListType(type)) return [valueWith(type.ofType, path.slice(1), id)];
  if (!isInputObjectType(type)) throw new Error(`${type.toString()} has no field ${String(path[0])}.`);
  const value: Record<string, unknown> = {};
  for (const field of Object.values(type.getFields())) {
    if (field.name === path[0]) value[field.name] = valueWith(field.type, path.slice(1), id);
    else if (!type.isOneOf && isNonNullType(field.type) && field.defaultValue === undefined) {
      value[field.name] = requiredValue(field.type);
    }
  }
  return value;
}

/** A valid value of a required argument or input field that holds no id under test. */
function requiredValue(type: GraphQLInputType): unknown {
  const nullable = isNonNullType(type) ? type.ofType : type;
  if (isListType(nullable)) return [requiredValue(nullable.ofType)];
  if (isInputObjectType(nullable)) {
    const value: Record<string, unknown> = {};
    for (const field of Object.values(nullable.getFields())) {
      if (isNonNullType(field.type) && field.defaultValue === undefined)
        value[field.name] = requiredValue(field.type);
    }
    return value;
  }
  return sampleLeaf(nullable);
}

/** An operation calling the argument's field, the id at its input path, as a document and variables. */
function operationFor(
  argument: IdArgument,
  id: string,
): { document: string; variables: Record<string, unknown> } {
  const used = argument.field.args.filter(
    (candidate: GraphQLArgument) =>
      candidate.name === argument.inputPath[0] ||
      (isNonNullType(candidate.type) && candidate.defaultValue === undefined),
  );
  const variables = Object.fromEntries(
    used.map((candidate) => [
      candidate.name,
      candidate.name === argument.inputPath[0]
        ? valueWith(candidate.type, argument.inputPath.slice(1), id)
        : requiredValue(candidate.type),
    ]),
  );
  const declarations = used.map((candidate) => `$${candidate.name}: ${candidate.type.toString()}`).join(', ');
  const passed = used.map((candidate) => `${candidate.name}: $${candidate.name}`).join(', ');
  const selection = isLeafType(getNamedType(argument.field.type)) ? '' : ' { __typename }';
  const operation = argument.rootType.toLowerCase();
  return {
    document: `${operation} Probe(${declarations}) { ${argument.field.name}(${passed})${selection} }`,
    variables,
  };
}

/** The key field sets of every entity type (`@key(fields: "...")`) of the schema. */
function entityKeys(graph: GraphQLSchema): { type: GraphQLObjectType; fields: string[] }[] {
  const entity = graph.getType('_Entity');
  if (!entity || !isUnionType(entity)) return [];
  return entity.getTypes().flatMap((type) =>
    [type.astNode, ...type.extensionASTNodes].flatMap((node) =>
      (node?.directives ?? [])
        .filter((directive) => directive.name.value === 'key')
        .flatMap((directive) => {
          const fields = directive.arguments?.find((argument) => argument.name.value === 'fields')?.value;
          return fields?.kind === Kind.STRING
            ? [{ type, fields: fields.value.split(/\s+/).filter(Boolean) }]
            : [];
        }),
    ),
  );
}

/** A valid value of an entity's key field that is not under test. */
function keySample(field: string): string {
  return field === 'customerId' ? 'cus_acme' : 'acc_acme_eth';
}

const ENTITY_KEY_FIELDS = entityKeys(schema).flatMap(({ type, fields }) =>
  fields
    .filter((field) => isObjectType(type) && getNamedType(type.getFields()[field]!.type).name === 'ID')
    .map((field) => ({ type, fields, field })),
);

type ErrorJson = NonNullable<GraphQLResult['body']['errors']>[number];

function codesAndPaths(errors: readonly ErrorJson[] | undefined): { code: unknown; inputPath: unknown }[] {
  return (errors ?? []).map((error) => ({
    code: error.extensions?.code,
    inputPath: error.extensions?.inputPath,
  }));
}

let emulator: RunningEmulator;
let proxy: NormalisingProxy;
let facade: RunningFacade;

beforeAll(async () => {
  emulator = await startEmulator();
  proxy = await startNormalisingProxy(emulator.url);
  // No reconciler: its first run, RECONCILE_INTERVAL_SECONDS (60 s) after the start, asks the
  // upstream which environment the key selects (`GET /v3/capabilities`), and on a busy machine this
  // file is still running then, so that request would be counted against whichever test ran.
  facade = await startFacade(proxy.url, {
    env: { RATE_LIMIT_ENABLED: 'false', RECONCILE_INTERVAL_SECONDS: '0' },
  });
});

afterAll(async () => {
  await facade?.close();
  await proxy?.close();
  await emulator?.close();
});

beforeEach(async () => {
  await emulator.resetUpstreamCalls();
  proxy.reset();
});

/** The upstream probe a graphql-ws connection makes of its key before it is acknowledged. */
const CONNECTION_PROBE = '/v3/capabilities';

/**
 * Asserts that nothing reached the proxy or the emulator since the last reset; with
 * `connectionProbe`, nothing but the probe of a graphql-ws connection.
 */
async function expectNoUpstreamRequest({ connectionProbe = false } = {}): Promise<void> {
  const requests = proxy
    .requests()
    .filter((request) => !connectionProbe || request.received !== CONNECTION_PROBE);
  expect(requests).toEqual([]);
  const { byRoute } = await emulator.upstreamCalls();
  const routes = Object.keys(byRoute).filter(
    (route) => !connectionProbe || route !== `GET ${CONNECTION_PROBE}`,
  );
  expect(routes).toEqual([]);
}

describe('the proxy between the facade and the emulator', () => {
  test('serves another path than the one sent when an id is merely percent-encoded', async () => {
    // What the facade sent before ids were held to a plain form: acme's path, Globex's account.
    const response = await fetch(
      `${proxy.url}/v3/customers/cus_acme/accounts/..%2F..%2Fcus_globex%2Faccounts%2Facc_globex_eth`,
      { headers: { 'x-api-key': 'sk_sandbox_emulator' } },
    );

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ data: { id: 'acc_globex_eth' } });
    expect(proxy.requests()).toEqual([
      {
        method: 'GET',
        received: '/v3/customers/cus_acme/accounts/..%2F..%2Fcus_globex%2Faccounts%2Facc_globex_eth',
        forwarded: '/v3/customers/cus_globex/accounts/acc_globex_eth',
      },
    ]);
  });
});

describe('every argument of the schema that takes an id', () => {
  test('is found by walking the schema', () => {
    const coordinates = ID_ARGUMENTS.map((argument) => argument.coordinate);
    // A few that must be among them, across the root types, nested inputs and lists.
    expect(coordinates).toEqual(
      expect.arrayContaining([
        'Query.account(customerId)',
        'Query.nodes(ids).0',
        'Mutation.setAccountFees(input).accountId',
        'Mutation.createRule(input).action.destination.destinationId',
        'Subscription.accountChanged(accountId)',
      ]),
    );
    expect(ID_ARGUMENTS.length).toBeGreaterThanOrEqual(65);
  });

  test('finds the entity keys too, so the representations below are probed at all', () => {
    const keys = ENTITY_KEY_FIELDS.map(({ type, field }) => `${type.name}.${field}`);
    expect(keys).toEqual(
      expect.arrayContaining(['Customer.id', 'Account.customerId', 'Account.id', 'Transfer.id']),
    );
  });

  test('are all on root fields, where this table reaches them', () => {
    // A field below the root taking an id would need an operation reaching it through a parent:
    // extend operationFor when one is added. Its arguments are checked like any other's.
    const roots = new Set(['Query', 'Mutation', 'Subscription']);
    const nested = Object.values(schema.getTypeMap())
      .filter((type) => isObjectType(type) && !roots.has(type.name) && !type.name.startsWith('__'))
      .flatMap((type) =>
        Object.values((type as GraphQLObjectType).getFields()).flatMap((field) =>
          field.args
            .filter(
              (argument) => idPathsOf(argument.name, argument.type, [argument.name], new Set()).length > 0,
            )
            .map((argument) => `${type.name}.${field.name}(${argument.name})`),
        ),
      );
    expect(nested).toEqual([]);
  });

  const httpArguments = ID_ARGUMENTS.filter((argument) => argument.rootType !== 'Subscription');
  test.each(httpArguments.map((argument) => [argument.coordinate, argument] as const))(
    '%s refuses hostile ids at its input path with no upstream request',
    async (_coordinate, argument) => {
      for (const id of HOSTILE_IDS) {
        const { document, variables } = operationFor(argument, id);
        const result = await facade.query(document, variables);

        expect({ id, errors: codesAndPaths(result.body.errors) }).toEqual({
          id,
          errors: [{ code: 'BAD_USER_INPUT', inputPath: argument.inputPath }],
        });
      }
      await expectNoUpstreamRequest();
    },
  );

  const subscriptionArguments = ID_ARGUMENTS.filter((argument) => argument.rootType === 'Subscription');
  test.each(subscriptionArguments.map((argument) => [argument.coordinate, argument] as const))(
    '%s refuses hostile ids at its input path with no upstream request',
    async (_coordinate, argument) => {
      const live = facade.connect();
      for (const id of HOSTILE_IDS) {
        const { document, variables } = operationFor(argument, id);
        const subscription = live.subscribe(document, variables);
        await subscription.done;

        expect({ id, data: subscription.data, errors: codesAndPaths(subscription.errors) }).toEqual({
          id,
          data: [],
          errors: [{ code: 'BAD_USER_INPUT', inputPath: argument.inputPath }],
        });
      }
      await live.dispose();
      await expectNoUpstreamRequest({ connectionProbe: true });
    },
  );

  test.each(ENTITY_KEY_FIELDS.map((key) => [`_entities ${key.type.name}.${key.field}`, key] as const))(
    '%s refuses hostile ids at the representation’s input path, the others still answered',
    async (_name, { type, fields, field }) => {
      for (const id of HOSTILE_IDS) {
        const hostile = Object.fromEntries(
          fields.map((name) => [name, name === field ? id : keySample(name)]),
        );
        const result = await facade.query(
          'query Probe($representations: [_Any!]!) { _entities(representations: $representations) { __typename } }',
          {
            representations: [
              { __typename: 'Customer', id: 'cus_acme' },
              { __typename: type.name, ...hostile },
            ],
          },
        );

        expect({ id, data: result.body.data, errors: codesAndPaths(result.body.errors) }).toEqual({
          id,
          data: { _entities: [{ __typename: 'Customer' }, null] },
          errors: [{ code: 'BAD_USER_INPUT', inputPath: ['representations', 1, field] }],
        });
      }
      // Only the valid representation was read.
      expect(proxy.requests().map((request) => request.forwarded)).toEqual(
        HOSTILE_IDS.map(() => '/v3/customers/cus_acme'),
      );
    },
  );
});

describe('the attacks that read and changed Globex through a normalising proxy, as acme', () => {
  const attacks: [string, string, (string | number)[]][] = [
    [
      "Globex's account balance",
      '{ account(customerId: "cus_acme", id: "../../cus_globex/accounts/acc_globex_eth") { id balances { available } } }',
      ['id'],
    ],
    [
      "Globex's related party",
      '{ relatedParty(customerId: "cus_acme", id: "../../cus_globex/related-parties/rp_globex_director") { id } }',
      ['id'],
    ],
    [
      "Globex's document",
      '{ customerDocument(customerId: "cus_acme", id: "../../cus_globex/documents/doc_globex_registration") { id fileName } }',
      ['id'],
    ],
    ['Globex through an institution', '{ institution(id: "../customers/cus_globex") { id name } }', ['id']],
    [
      'Globex through an encoded institution',
      '{ institution(id: "..%2Fcustomers%2Fcus_globex") { id } }',
      ['id'],
    ],
    ['the institutions list through a dot segment', '{ institution(id: "..") { id } }', ['id']],
    [
      'a submission through dot segments',
      '{ taskSubmission(customerId: "cus_acme", taskId: "..", id: "..") { id } }',
      ['taskId'],
    ],
    [
      "Globex's account as an entity",
      '{ _entities(representations: [{ __typename: "Account", customerId: "cus_acme", id: "../../cus_globex/accounts/acc_globex_eth" }]) { ... on Account { id } } }',
      ['representations', 0, 'id'],
    ],
    ["Globex's account as a node", '{ node(id: "cus_acme/..%2F..%2Fcus_globex") { nodeId } }', ['id']],
  ];

  test.each(attacks)('%s is refused before any request', async (_name, document, inputPath) => {
    const result = await facade.queryAs('acme', document);

    expect(codesAndPaths(result.body.errors)).toEqual([{ code: 'BAD_USER_INPUT', inputPath }]);
    // The error repeats the refused id; the data holds nothing of Globex.
    expect(JSON.stringify(result.body.data)).not.toMatch(/globex|Globex/);
    await expectNoUpstreamRequest();
  });

  test("setAccountFees does not change Globex's fees", async () => {
    const before = await emulator.rest('GET', '/v3/customers/cus_globex/accounts/acc_globex_eth/fees');
    await emulator.resetUpstreamCalls();

    const result = await facade.queryAs(
      'acme',
      `mutation ($input: SetAccountFeesInput!) { setAccountFees(input: $input) { fees { accountId } } }`,
      {
        input: {
          customerId: 'cus_acme',
          accountId: '../../cus_globex/accounts/acc_globex_eth',
          breakdown: { developer: { fixed: '9.99', bips: 9000 } },
          idempotencyKey: randomUUID(),
        },
      },
    );

    expect(codesAndPaths(result.body.errors)).toEqual([
      { code: 'BAD_USER_INPUT', inputPath: ['input', 'accountId'] },
    ]);
    await expectNoUpstreamRequest();
    expect(await emulator.rest('GET', '/v3/customers/cus_globex/accounts/acc_globex_eth/fees')).toEqual(
      before,
    );
  });

  test("archiveCustomerDocument does not archive Globex's document", async () => {
    const result = await facade.queryAs(
      'acme',
      `mutation ($input: ArchiveCustomerDocumentInput!) { archiveCustomerDocument(input: $input) { __typename } }`,
      {
        input: {
          customerId: 'cus_acme',
          documentId: '../../cus_globex/documents/doc_globex_registration',
          idempotencyKey: randomUUID(),
        },
      },
    );

    expect(codesAndPaths(result.body.errors)).toEqual([
      { code: 'BAD_USER_INPUT', inputPath: ['input', 'documentId'] },
    ]);
    expect(result.body.errors?.[0]?.extensions?.idempotencyKey).toEqual(expect.any(String));
    await expectNoUpstreamRequest();
    const globexDocument = await emulator.rest(
      'GET',
      '/v3/customers/cus_globex/documents/doc_globex_registration',
    );
    expect(globexDocument).toMatchObject({ status: 200, body: { data: { status: 'active' } } });
  });
});

describe('ordinary ids through the same proxy', () => {
  test("still read acme's records, one request each, forwarded as sent", async () => {
    const result = await facade.queryAs<{
      account: { id: string };
      relatedParty: { id: string };
      customerDocument: { id: string };
      institution: { id: string };
      node: { nodeId: string };
      _entities: { id: string }[];
    }>(
      'acme',
      `{
        account(customerId: "cus_acme", id: "acc_acme_eth") { id }
        relatedParty(customerId: "cus_acme", id: "rp_acme_ceo") { id }
        customerDocument(customerId: "cus_acme", id: "doc_acme_incorporation") { id }
        institution(id: "ins_lead_bank") { id }
        node(id: "cus_acme/rcp_acme_supplier") { nodeId }
        _entities(representations: [{ __typename: "Rule", customerId: "cus_acme", id: "rul_acme_sweep" }]) { ... on Rule { id } }
      }`,
    );

    expect(result.body).toEqual({
      data: {
        account: { id: 'acc_acme_eth' },
        relatedParty: { id: 'rp_acme_ceo' },
        customerDocument: { id: 'doc_acme_incorporation' },
        institution: { id: 'ins_lead_bank' },
        node: { nodeId: 'cus_acme/rcp_acme_supplier' },
        _entities: [{ id: 'rul_acme_sweep' }],
      },
    });
    const requests = proxy.requests();
    expect(requests.every((request) => request.forwarded === request.received)).toBe(true);
    expect(requests.map((request) => request.received).sort()).toEqual([
      '/v3/customers/cus_acme/accounts/acc_acme_eth',
      '/v3/customers/cus_acme/documents/doc_acme_incorporation',
      '/v3/customers/cus_acme/recipients/rcp_acme_supplier',
      '/v3/customers/cus_acme/related-parties/rp_acme_ceo',
      '/v3/customers/cus_acme/rules/rul_acme_sweep',
      '/v3/institutions/ins_lead_bank',
    ]);
  });

  test('beside a hostile node id, the others are still read, each error at its own index', async () => {
    const result = await facade.queryAs('acme', 'query ($ids: [ID!]!) { nodes(ids: $ids) { nodeId } }', {
      ids: ['cus_acme/acc_acme_eth', 'cus_acme/..%2F..%2Fcus_globex', 'ins_lead_bank', 'cus_acme/acc_..'],
    });

    expect(result.body.data).toEqual({
      nodes: [{ nodeId: 'cus_acme/acc_acme_eth' }, null, { nodeId: 'ins_lead_bank' }, null],
    });
    expect(
      result.body.errors?.map((error) => [error.path, error.extensions?.code, error.extensions?.inputPath]),
    ).toEqual([
      [['nodes', 1], 'BAD_USER_INPUT', ['ids', 1]],
      [['nodes', 3], 'BAD_USER_INPUT', ['ids', 3]],
    ]);
    expect(
      proxy
        .requests()
        .map((request) => request.received)
        .sort(),
    ).toEqual(['/v3/customers/cus_acme/accounts/acc_acme_eth', '/v3/institutions/ins_lead_bank']);
  });

  test("still change acme's own account fees", async () => {
    const result = await facade.queryAs(
      'acme',
      `mutation ($input: SetAccountFeesInput!) { setAccountFees(input: $input) { fees { accountId } } }`,
      {
        input: {
          customerId: 'cus_acme',
          accountId: 'acc_acme_polygon',
          breakdown: { developer: { fixed: '0.50', bips: 25 } },
          idempotencyKey: randomUUID(),
        },
      },
    );

    expect(result.body).toEqual({ data: { setAccountFees: { fees: { accountId: 'acc_acme_polygon' } } } });
    expect(proxy.requests().map((request) => `${request.method} ${request.forwarded ?? ''}`)).toContain(
      'PUT /v3/customers/cus_acme/accounts/acc_acme_polygon/fees',
    );
  });
});
