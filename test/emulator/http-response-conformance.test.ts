import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CONTRACT_URL } from '../../emulator/http/contract.ts';
import { LIVE_KEY, READ_ONLY_KEY, startEmulator } from './http-harness.ts';
import type { CallOptions, CallResult, EmulatorHarness } from './http-harness.ts';
import { eventually, startWebhookReceiver } from './domain-harness.ts';
import type { WebhookReceiver } from './domain-harness.ts';

/*
 * The emulator's responses against the contract the facade generates its types from. Requests are
 * validated by the emulator itself; this file closes the other direction: every operation is called
 * on the demo data and each body must match the schema the contract declares for that operation and
 * status, and must carry no member the contract does not declare (the facade would never see it).
 */

type Schema = Record<string, unknown>;
type ResponseObject = { $ref?: string; content?: Record<string, { schema?: Schema }> };
type OperationObject = { operationId: string; responses: Record<string, ResponseObject> };
type OpenApiDocument = {
  paths: Record<string, Record<string, OperationObject>>;
  components: { schemas: Record<string, Schema>; responses: Record<string, ResponseObject> };
};

const document = parse(readFileSync(CONTRACT_URL, 'utf8')) as OpenApiDocument;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

type Operation = { operationId: string; method: string; pathTemplate: string; matcher: RegExp };

const operations: Operation[] = Object.entries(document.paths).flatMap(([pathTemplate, item]) =>
  METHODS.filter((method) => item[method]).map((method) => ({
    operationId: item[method]!.operationId,
    method: method.toUpperCase(),
    pathTemplate,
    matcher: new RegExp(`^${pathTemplate.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  })),
);

/** The contract operation a request reaches: the test checks each call hits the case's operation. */
function operationOf(method: string, path: string): Operation {
  const pathOnly = path.split('?')[0]!;
  const found = operations.filter(
    (operation) => operation.method === method && operation.matcher.test(pathOnly),
  );
  // Two templates matching one path would make the case ambiguous; the contract has none today.
  if (found.length !== 1) throw new Error(`${found.length} contract operations match ${method} ${path}`);
  return found[0]!;
}

const CONTRACT_ID = 'https://contract.platform.test/v3/response-conformance.json';
const OPEN = '__open';

/**
 * Two flavours of every component schema: the declared one with each object closed to undeclared
 * members (`unevaluatedProperties: false`), and an open copy that `allOf` members refer to, because
 * a closed member of an `allOf` would reject the members its siblings add.
 */
function closeObjects(schema: unknown, insideAllOf = false): unknown {
  if (Array.isArray(schema)) return schema.map((item) => closeObjects(item, insideAllOf));
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, child] of Object.entries(schema as Schema)) {
    if (key === '$ref' && typeof child === 'string') {
      const name = child.replace('#/components/schemas/', '');
      out.$ref = `${CONTRACT_ID}#/$defs/${name}${insideAllOf ? OPEN : ''}`;
    } else if (key === 'allOf') {
      out.allOf = (child as unknown[]).map((member) => closeObjects(member, true));
    } else {
      out[key] = closeObjects(child);
    }
  }
  const declaresMembers = 'properties' in out || 'allOf' in out;
  if (declaresMembers && !insideAllOf && !('additionalProperties' in out)) out.unevaluatedProperties = false;
  return out;
}

function openCopy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(openCopy);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, child] of Object.entries(schema as Schema)) {
    out[key] =
      key === '$ref' && typeof child === 'string'
        ? child.replace('#/components/schemas/', `${CONTRACT_ID}#/$defs/`)
        : openCopy(child);
  }
  return out;
}

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormatsPlugin.default(ajv);
ajv.addSchema({
  $id: CONTRACT_ID,
  $defs: Object.fromEntries(
    Object.entries(document.components.schemas).flatMap(([name, schema]) => [
      [name, closeObjects(schema)],
      [`${name}${OPEN}`, openCopy(schema)],
    ]),
  ),
});

type DeclaredResponse = { mediaType: string; validate: ValidateFunction };
const compiled = new Map<string, DeclaredResponse>();

/** The schema the contract declares for `operation` answering `status`; throws when none is declared. */
function declaredResponse(operation: Operation, status: number): DeclaredResponse {
  const key = `${operation.operationId} ${status}`;
  const cached = compiled.get(key);
  if (cached) return cached;
  let response =
    document.paths[operation.pathTemplate]![operation.method.toLowerCase()]!.responses[String(status)];
  if (!response) throw new Error(`${operation.operationId} declares no ${status} response`);
  if (response.$ref) {
    response = document.components.responses[response.$ref.replace('#/components/responses/', '')];
  }
  const [mediaType, media] = Object.entries(response?.content ?? {})[0] ?? [];
  if (!mediaType || !media?.schema) throw new Error(`${key} declares no response body`);
  const declared = { mediaType, validate: ajv.compile(closeObjects(media.schema) as Schema) };
  compiled.set(key, declared);
  return declared;
}

/** One request of a case and the status it must answer. */
type ConformanceCall = { method: string; path: string; status: number } & Pick<
  CallOptions,
  'json' | 'key' | 'idempotencyKey'
>;

const get = (path: string, status = 200): ConformanceCall => ({ method: 'GET', path, status });
const write = (method: string, path: string, json: unknown, status = 200): ConformanceCall => ({
  method,
  path,
  status,
  ...(json === undefined ? {} : { json }),
});

const SINCE = 'updatedSince=2025-01-06T10:00:00.000Z';

/**
 * A success case per operation of the contract, on the demo data (restored before each case), so
 * every operation and every shape it can answer with (wallet, bank account, entity party, null
 * fees, statusReason set or null, ...) is checked at least once.
 */
const SUCCESS_CASES: Record<string, ConformanceCall[]> = {
  listCustomers: [get('/v3/customers?limit=2'), get(`/v3/customers?${SINCE}`)],
  createCustomer: [
    write(
      'POST',
      '/v3/customers',
      {
        type: 'business',
        externalId: 'conformance-co',
        displayName: 'Conformance Co',
        email: 'ops@conformance.test',
      },
      201,
    ),
    write('POST', '/v3/customers', { type: 'individual', externalId: 'conformance-person' }, 201),
  ],
  getCustomer: [get('/v3/customers/cus_acme'), get('/v3/customers/cus_ada')],
  listRelatedParties: [
    get('/v3/customers/cus_acme/related-parties?limit=2'),
    get(`/v3/customers/cus_acme/related-parties?${SINCE}`),
    get('/v3/customers/cus_ada/related-parties'),
  ],
  createRelatedParty: [
    write(
      'POST',
      '/v3/customers/cus_globex/related-parties',
      {
        partyType: 'person',
        roles: ['officer'],
        title: 'Chief Operating Officer',
        person: { firstName: 'Mary', lastName: 'Jackson', residenceCountry: 'US' },
      },
      201,
    ),
    write(
      'POST',
      '/v3/customers/cus_globex/related-parties',
      {
        partyType: 'entity',
        hasOwnership: true,
        entity: { legalName: 'Globex Holdings AG', registrationCountry: 'CH' },
      },
      201,
    ),
  ],
  getRelatedParty: [
    get('/v3/customers/cus_acme/related-parties/rp_acme_ceo'),
    get('/v3/customers/cus_acme/related-parties/rp_acme_holding'),
  ],
  archiveRelatedParty: [write('DELETE', '/v3/customers/cus_acme/related-parties/rp_acme_cfo', undefined)],
  listAccounts: [
    get('/v3/customers/cus_acme/accounts?limit=2'),
    get('/v3/customers/cus_globex/accounts'),
    get(`/v3/customers/cus_ada/accounts?${SINCE}`),
  ],
  createAccount: [
    write(
      'POST',
      '/v3/customers/cus_ada/accounts',
      { type: 'wallet', origin: 'issued', network: 'ethereum', currency: 'USDC', label: 'Travel (Ethereum)' },
      201,
    ),
    write(
      'POST',
      '/v3/customers/cus_ada/accounts',
      {
        type: 'wallet',
        origin: 'external',
        network: 'solana',
        currency: 'USDC',
        label: 'Paper wallet',
        address: '4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T',
      },
      201,
    ),
  ],
  getAccount: [
    get('/v3/customers/cus_acme/accounts/acc_acme_eth'),
    get('/v3/customers/cus_acme/accounts/acc_acme_bank'),
    get('/v3/customers/cus_ada/accounts/acc_ada_external'),
  ],
  archiveAccount: [write('DELETE', '/v3/customers/cus_ada/accounts/acc_ada_external', undefined)],
  getAccountFees: [
    get('/v3/customers/cus_acme/accounts/acc_acme_eth/fees'),
    get('/v3/customers/cus_acme/accounts/acc_acme_polygon/fees'),
  ],
  replaceAccountFees: [
    write('PUT', '/v3/customers/cus_acme/accounts/acc_acme_polygon/fees', {
      breakdown: { developer: { fixed: '1.25', bips: 15 } },
    }),
    write('PUT', '/v3/customers/cus_acme/accounts/acc_acme_eth/fees', { breakdown: { developer: null } }),
  ],
  discoverCapabilities: [get('/v3/capabilities'), { ...get('/v3/capabilities'), key: LIVE_KEY }],
  listCapabilities: [
    get('/v3/customers/cus_acme/capabilities?limit=2'),
    get(`/v3/customers/cus_globex/capabilities?${SINCE}`),
  ],
  createCapability: [
    write('POST', '/v3/customers/cus_ada/capabilities', { method: 'wire', accountType: 'pooled' }, 201),
  ],
  getCapability: [
    get('/v3/customers/cus_acme/capabilities/cap_acme_wire'),
    get('/v3/customers/cus_globex/capabilities/cap_globex_ach'),
  ],
  listDocuments: [
    get('/v3/customers/cus_acme/documents?limit=1'),
    get(`/v3/customers/cus_ada/documents?${SINCE}`),
  ],
  getDocument: [get('/v3/customers/cus_acme/documents/doc_acme_incorporation')],
  archiveDocument: [write('DELETE', '/v3/customers/cus_acme/documents/doc_acme_ownership', undefined)],
  listRecipients: [
    get('/v3/customers/cus_acme/recipients?limit=1'),
    get(`/v3/customers/cus_ada/recipients?${SINCE}`),
  ],
  getRecipient: [get('/v3/customers/cus_acme/recipients/rcp_acme_supplier')],
  listTasks: [get('/v3/customers/cus_acme/tasks?limit=1'), get(`/v3/customers/cus_ada/tasks?${SINCE}`)],
  getTask: [
    get('/v3/customers/cus_acme/tasks/tsk_acme_ownership'),
    get('/v3/customers/cus_ada/tasks/tsk_ada_identity'),
  ],
  listTaskSubmissions: [
    get('/v3/customers/cus_acme/tasks/tsk_acme_ownership/submissions?limit=1'),
    get(`/v3/customers/cus_ada/tasks/tsk_ada_identity/submissions?${SINCE}`),
  ],
  getTaskSubmission: [
    get('/v3/customers/cus_acme/tasks/tsk_acme_ownership/submissions/tsb_acme_ownership_1'),
    get('/v3/customers/cus_ada/tasks/tsk_ada_identity/submissions/tsb_ada_identity_1'),
  ],
  listQuotes: [get('/v3/customers/cus_acme/quotes?limit=1'), get(`/v3/customers/cus_globex/quotes?${SINCE}`)],
  getQuote: [
    get('/v3/customers/cus_acme/quotes/quo_acme_open'),
    get('/v3/customers/cus_acme/quotes/quo_acme_executed'),
    get('/v3/customers/cus_globex/quotes/quo_globex_expired'),
  ],
  executeQuote: [write('POST', '/v3/customers/cus_acme/quotes/quo_acme_open/execute', undefined, 201)],
  listTransfers: [
    get('/v3/customers/cus_acme/transfers?limit=1'),
    get(`/v3/customers/cus_acme/transfers?${SINCE}`),
  ],
  getTransfer: [get('/v3/customers/cus_acme/transfers/trf_acme_payout')],
  listRules: [get('/v3/customers/cus_acme/rules?limit=1'), get(`/v3/customers/cus_acme/rules?${SINCE}`)],
  createRule: [
    write(
      'POST',
      '/v3/customers/cus_ada/rules',
      {
        description: 'Sweep everyday funds into savings',
        trigger: { accountId: 'acc_ada_sol' },
        action: { account: { accountId: 'acc_ada_polygon' } },
      },
      201,
    ),
    write(
      'POST',
      '/v3/customers/cus_globex/rules',
      {
        trigger: { accountId: 'acc_globex_eth' },
        action: {
          destination: { recipientId: 'rcp_globex_partner', destinationId: 'dst_globex_partner_eth' },
        },
      },
      201,
    ),
  ],
  getRule: [get('/v3/customers/cus_acme/rules/rul_acme_sweep')],
  updateRuleStatus: [
    write('PATCH', '/v3/customers/cus_acme/rules/rul_acme_sweep', { status: 'paused' }),
    write('PATCH', '/v3/customers/cus_acme/rules/rul_acme_sweep', { status: 'active' }),
  ],
  archiveRule: [write('DELETE', '/v3/customers/cus_acme/rules/rul_acme_sweep', undefined)],
  listInstitutions: [get('/v3/institutions?limit=2'), get(`/v3/institutions?${SINCE}`)],
  getInstitution: [get('/v3/institutions/ins_lead_bank')],
  listWebhookEndpoints: [get('/v3/webhooks?limit=1'), get(`/v3/webhooks?${SINCE}`)],
  createWebhookEndpoint: [
    write(
      'POST',
      '/v3/webhooks',
      { url: 'http://127.0.0.1:9/conformance', events: ['account.updated', 'transfer.completed'] },
      201,
    ),
  ],
  getWebhookEndpoint: [get('/v3/webhooks/we_demo')],
  updateWebhookEndpoint: [
    write('PATCH', '/v3/webhooks/we_demo', {
      status: 'disabled',
      description: null,
      events: ['customer.created'],
    }),
  ],
  archiveWebhookEndpoint: [write('DELETE', '/v3/webhooks/we_demo', undefined)],
  sandboxTopUp: [
    write('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', { amount: '25.50', currency: 'USDC' }),
  ],
  sandboxSetCapabilityStatus: [
    write('POST', '/v3/sandbox/customers/cus_acme/capabilities/cap_acme_wire/status', { status: 'ready' }),
    write('POST', '/v3/sandbox/customers/cus_globex/capabilities/cap_globex_ach/status', {
      status: 'rejected',
    }),
  ],
};

/** Problem responses: each must match the Problem schema its operation declares for the status. */
const ERROR_CASES: Record<
  string,
  ConformanceCall & { code: string; setup?: ConformanceCall[]; members?: string[] }
> = {
  'an account a pending transfer touches (409 with blockingResources)': {
    setup: [write('POST', '/v3/customers/cus_acme/quotes/quo_acme_open/execute', undefined, 201)],
    ...write('DELETE', '/v3/customers/cus_acme/accounts/acc_acme_bank', undefined, 409),
    code: 'conflict',
    members: ['statusReason', 'blockingResources'],
  },
  'an Idempotency-Key reused with another body (409 idempotency_conflict)': {
    setup: [
      {
        ...write('POST', '/v3/customers', { type: 'individual', externalId: 'first-body' }, 201),
        idempotencyKey: 'conformance-reused-key',
      },
    ],
    ...write('POST', '/v3/customers', { type: 'individual', externalId: 'second-body' }, 409),
    idempotencyKey: 'conformance-reused-key',
    code: 'idempotency_conflict',
  },
  'a missing API key (401)': { ...get('/v3/customers/cus_acme', 401), key: null, code: 'unauthorized' },
  'a read-only key writing (403)': {
    ...write('POST', '/v3/customers', { type: 'individual', externalId: 'read-only' }, 403),
    key: READ_ONLY_KEY,
    code: 'forbidden',
  },
  'a live key on the sandbox (403)': {
    ...write('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', { amount: '1', currency: 'USDC' }, 403),
    key: LIVE_KEY,
    code: 'forbidden',
  },
  'an unknown customer (404)': { ...get('/v3/customers/cus_unknown', 404), code: 'not_found' },
  'a document of an unknown customer (404 customer_not_found)': {
    ...write('DELETE', '/v3/customers/cus_unknown/documents/doc_acme_ownership', undefined, 404),
    code: 'customer_not_found',
  },
  'invalid body fields (400 with pointers)': {
    ...write('POST', '/v3/customers', { type: 'robot', externalId: ' padded', extra: 1 }, 400),
    code: 'validation_error',
    members: ['errors'],
  },
  'an invalid query parameter (400 with parameter)': {
    ...get('/v3/customers?limit=0', 400),
    code: 'validation_error',
    members: ['errors'],
  },
  'a state conflict (409 with statusReason)': {
    ...write(
      'POST',
      '/v3/customers/cus_acme/rules',
      { trigger: { accountId: 'acc_acme_polygon' }, action: { account: { accountId: 'acc_acme_bank' } } },
      409,
    ),
    code: 'conflict',
    members: ['statusReason'],
  },
  'an executed quote (409 quote_already_executed)': {
    ...write('POST', '/v3/customers/cus_acme/quotes/quo_acme_executed/execute', undefined, 409),
    code: 'quote_already_executed',
    members: ['transferId'],
  },
  'a capability with no application (422 invalid_capability)': {
    ...write(
      'POST',
      '/v3/sandbox/customers/cus_acme/capabilities/cap_acme_sepa/status',
      { status: 'ready' },
      422,
    ),
    code: 'invalid_capability',
    members: ['capabilities'],
  },
};

let emulator: EmulatorHarness;
let receiver: WebhookReceiver;

beforeAll(async () => {
  emulator = await startEmulator({ webhookRetryBaseMs: 50, webhookMaxAttempts: 2 });
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await emulator.close();
  await receiver.close();
});

async function resetDemoData(): Promise<void> {
  const reset = await emulator.call('POST', '/_emulator/reset', { key: null, json: { data: 'demo' } });
  expect(reset.status).toBeLessThan(300);
}

/** Sends `call`, checks its status, and returns the contract's verdict on the body. */
async function callAndValidate(call: ConformanceCall): Promise<{ operation: Operation; result: CallResult }> {
  const operation = operationOf(call.method, call.path);
  const result = await emulator.call(call.method, call.path, {
    ...(call.json === undefined ? {} : { json: call.json }),
    ...(call.key === undefined ? {} : { key: call.key }),
    ...(call.idempotencyKey === undefined ? {} : { idempotencyKey: call.idempotencyKey }),
  });
  expect(result.status, `${call.method} ${call.path}: ${result.text}`).toBe(call.status);
  const declared = declaredResponse(operation, result.status);
  expect(result.headers.get('content-type') ?? '').toContain(declared.mediaType);
  const conforms = declared.validate(result.body);
  expect(
    conforms ? [] : declared.validate.errors,
    `${call.method} ${call.path} answered a body the contract does not declare`,
  ).toEqual([]);
  return { operation, result };
}

describe('emulator responses conform to the contract', () => {
  test('every operationId has a conformance case, and every case names an operation', () => {
    const ids = operations.map((operation) => operation.operationId).sort();
    expect(Object.keys(SUCCESS_CASES).sort()).toEqual(ids);
  });

  test('the check itself rejects a missing required member, a wrong type and an undeclared member', () => {
    const { validate } = declaredResponse(
      operationOf('GET', '/v3/customers/cus_acme/accounts/acc_acme_eth'),
      200,
    );
    const account = {
      id: 'acc_x',
      customerId: 'cus_x',
      type: 'wallet',
      network: 'ethereum',
      origin: 'issued',
      status: 'ready',
      openTaskIds: [],
      currency: 'USDC',
      label: 'X',
      isDefault: false,
      details: { network: 'ethereum', address: '0x1' },
      fees: { breakdown: { developer: null } },
      balances: [{ currency: 'USDC', available: '1.00', pending: '0.00' }],
      createdAt: '2025-01-06T09:00:00.000Z',
      updatedAt: '2025-01-06T09:00:00.000Z',
      archivedAt: null,
    };
    expect(validate({ data: account })).toBe(true);
    const { archivedAt: _archivedAt, ...withoutArchivedAt } = account;
    expect(validate({ data: withoutArchivedAt })).toBe(false);
    expect(
      validate({ data: { ...account, balances: [{ currency: 'USDC', available: 1, pending: '0' }] } }),
    ).toBe(false);
    expect(validate({ data: { ...account, details: { ...account.details, memo: 'x' } } })).toBe(false);
    expect(validate({ data: account, meta: {} })).toBe(false);
  });

  test.each(operations.map((operation) => operation.operationId).filter((id) => SUCCESS_CASES[id]))(
    '%s answers the body its contract declares',
    async (operationId) => {
      await resetDemoData();
      for (const call of SUCCESS_CASES[operationId]!) {
        const { operation } = await callAndValidate(call);
        expect(operation.operationId, `${call.method} ${call.path}`).toBe(operationId);
      }
    },
  );

  test('list cases page through a list: nextCursor is a string until the last page', async () => {
    await resetDemoData();
    let path = '/v3/customers/cus_acme/accounts?limit=1';
    const seen: string[] = [];
    for (;;) {
      const { result } = await callAndValidate(get(path));
      seen.push(...result.body.data.map((account: { id: string }) => account.id));
      if (!result.body.hasMore) {
        expect(result.body.nextCursor).toBeNull();
        break;
      }
      path = `/v3/customers/cus_acme/accounts?limit=1&cursor=${encodeURIComponent(result.body.nextCursor)}`;
    }
    expect(seen).toHaveLength(3);
  });

  test.each(Object.entries(ERROR_CASES))('%s answers a declared Problem', async (_name, call) => {
    await resetDemoData();
    for (const step of call.setup ?? []) await callAndValidate(step);
    const { result } = await callAndValidate(call);
    expect(result.body.code).toBe(call.code);
    expect(result.body.status).toBe(call.status);
    for (const member of call.members ?? []) expect(result.body).toHaveProperty(member);
  });

  test('a replayed response is the same conforming body, marked Idempotency-Replayed', async () => {
    await resetDemoData();
    const create = {
      ...write('POST', '/v3/customers', { type: 'individual', externalId: 'replayed' }, 201),
      idempotencyKey: 'conformance-replay-key',
    };
    const first = await callAndValidate(create);
    const replay = await callAndValidate(create);
    expect(replay.result.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.result.body).toEqual(first.result.body);
  });

  test('every webhook event kind is delivered as the contract declares, with the record a read returns', async () => {
    await resetDemoData();
    const eventTypes = (document.components.schemas.WebhookEventType as { enum: string[] }).enum;
    await callAndValidate(write('POST', '/v3/webhooks', { url: receiver.url, events: eventTypes }, 201));
    const changes = [
      SUCCESS_CASES.createCustomer![0]!,
      SUCCESS_CASES.createRelatedParty![0]!,
      SUCCESS_CASES.archiveRelatedParty![0]!,
      SUCCESS_CASES.createAccount![0]!,
      SUCCESS_CASES.createCapability![0]!,
      SUCCESS_CASES.sandboxSetCapabilityStatus![0]!,
      SUCCESS_CASES.archiveDocument![0]!,
      SUCCESS_CASES.createRule![0]!,
      // Funds on the watched wallet: rul_acme_sweep creates a transfer that completes after a delay.
      write('POST', '/v3/sandbox/accounts/acc_acme_polygon/topup', { amount: '5.00', currency: 'USDC' }),
      SUCCESS_CASES.updateRuleStatus![0]!,
      SUCCESS_CASES.archiveRule![0]!,
    ];
    for (const change of changes) await callAndValidate(change);
    await eventually(() => {
      const received = new Set(receiver.events.map((event) => event.type));
      expect(eventTypes.filter((type) => !received.has(type))).toEqual([]);
    });

    const eventValidate = ajv.compile(closeObjects({ $ref: '#/components/schemas/WebhookEvent' }) as Schema);
    const recordSchemas: Record<string, string> = {
      customer: 'Customer',
      account: 'Account',
      capability: 'Capability',
      related_party: 'RelatedParty',
      document: 'CustomerDocument',
      rule: 'Rule',
      transfer: 'Transfer',
    };
    for (const event of receiver.events) {
      expect(eventValidate(event) ? [] : eventValidate.errors, `${event.type} event`).toEqual([]);
      const schemaName = recordSchemas[event.data.resourceType];
      expect(schemaName, `resourceType ${event.data.resourceType}`).toBeDefined();
      const recordValidate = ajv.getSchema(`${CONTRACT_ID}#/$defs/${schemaName}`)!;
      expect(recordValidate(event.data.object) ? [] : recordValidate.errors, `${event.type} object`).toEqual(
        [],
      );
    }
  });

  test('a validation error points at each invalid body field', async () => {
    const { result } = await callAndValidate(ERROR_CASES['invalid body fields (400 with pointers)']!);
    const pointers = result.body.errors.map((error: { pointer: string }) => error.pointer).sort();
    expect(pointers).toEqual(['/externalId', '/extra', '/type']);
  });
});
