/**
 * How the facade calls the upstream: retries and their budget, idempotency keys on mutations,
 * timeouts, request ids and credentials — observed through the emulator's request counter.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { READ_ONLY_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { useStack } from '../support/harness/stack.ts';

const CUSTOMER_ROUTE = 'GET /v3/customers/{customerId}';
const CREATE_PARTY_ROUTE = 'POST /v3/customers/{customerId}/related-parties';

const CREATE_RELATED_PARTY = /* GraphQL */ `
  mutation CreateRelatedParty($input: CreateRelatedPartyInput!) {
    createRelatedParty(input: $input) {
      idempotencyKey
      replayed
      relatedParty {
        id
        person {
          firstName
        }
      }
    }
  }
`;

interface CreatePayload {
  createRelatedParty: { idempotencyKey: string; replayed: boolean; relatedParty: { id: string } };
}

/** A new director's input; a fresh idempotency key unless one is given (a retry). */
function director(firstName: string, idempotencyKey: string = randomUUID()): Record<string, unknown> {
  return {
    customerId: 'cus_acme',
    partyType: 'person',
    roles: ['DIRECTOR'],
    person: { firstName, lastName: 'Liskov', residenceCountry: 'US' },
    idempotencyKey,
  };
}

describe('with the default retry policy', () => {
  const stack = useStack({ env: { AUTH_ALLOW_CALLER_API_KEY: 'true' } });
  /** Every response body and header block the facade sent in this file. */
  const responses: string[] = [];

  /** As the operator, or with a caller's own platform key when `headers` hold an `x-api-key`. */
  async function query<T>(
    document: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    const apiKey = headers?.['x-api-key'];
    const result =
      apiKey === undefined
        ? await stack.query<T>(document, variables, headers)
        : await stack.queryWithKey<T>(apiKey, document, variables);
    responses.push(JSON.stringify(result.body), JSON.stringify([...result.headers]));
    return result;
  }

  test('a read that fails twice with a retryable problem succeeds on the third call', async () => {
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'internal_error', rate: 1, times: 2 }] });

    const result = await query('{ customer(id: "cus_acme") { id displayName } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 3 });
  });

  test('a read whose connection is reset once is retried once', async () => {
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'reset', rate: 1, times: 1 }] });

    const result = await query('{ customer(id: "cus_acme") { id } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 2 });
  });

  test('a problem that is not retryable is never retried', async () => {
    const result = await query('{ customer(id: "cus_nobody") { id } }');

    expect(result.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 1 });
  });

  test('an unknown caller key is refused before any read, and never echoed', async () => {
    const result = await query('{ customer(id: "cus_acme") { id } }', {}, { 'x-api-key': 'sk_not_a_key' });

    expect(result.status).toBe(401);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });

  test('a mutation that fails with a retryable problem is retried with the same Idempotency-Key', async () => {
    await stack.setFaults({
      rules: [{ route: CREATE_PARTY_ROUTE, kind: 'internal_error', rate: 1, times: 1 }],
    });

    const created = await query<CreatePayload>(CREATE_RELATED_PARTY, { input: director('Barbara') });

    expect(created.body.errors).toBeUndefined();
    const payload = created.body.data!.createRelatedParty;
    expect(payload.replayed).toBe(false);
    expect(payload.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CREATE_PARTY_ROUTE]: 2 });

    // The key is the one the upstream stored: sending it again replays the original.
    const replay = await query<CreatePayload>(CREATE_RELATED_PARTY, {
      input: director('Barbara', payload.idempotencyKey),
    });
    expect(replay.body.data!.createRelatedParty).toEqual({ ...payload, replayed: true });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CREATE_PARTY_ROUTE]: 3 });
  });

  test('a mutation whose connection is reset is retried once and creates one record', async () => {
    await stack.setFaults({ rules: [{ route: CREATE_PARTY_ROUTE, kind: 'reset', rate: 1, times: 1 }] });
    const before = await countRelatedParties();

    const created = await query<CreatePayload>(CREATE_RELATED_PARTY, { input: director('Frances') });

    expect(created.body.errors).toBeUndefined();
    expect((await stack.upstreamCalls()).byRoute[CREATE_PARTY_ROUTE]).toBe(2);
    expect(await countRelatedParties()).toBe(before + 1);
  });

  test("a caller's own idempotency key is sent and returned", async () => {
    const idempotencyKey = `caller-key-${Date.now()}`;

    const created = await query<CreatePayload>(CREATE_RELATED_PARTY, {
      input: director('Radia', idempotencyKey),
    });
    const again = await query<CreatePayload>(CREATE_RELATED_PARTY, {
      input: director('Radia', idempotencyKey),
    });

    expect(created.body.data!.createRelatedParty).toMatchObject({ idempotencyKey, replayed: false });
    expect(again.body.data!.createRelatedParty).toMatchObject({
      idempotencyKey,
      replayed: true,
      relatedParty: { id: created.body.data!.createRelatedParty.relatedParty.id },
    });
  });

  test("the caller's X-API-Key is the key the upstream sees", async () => {
    // The read-only key may read but not write; the facade's own key may do both.
    const read = await query('{ customer(id: "cus_acme") { id } }', {}, { 'x-api-key': READ_ONLY_KEY });
    const write = await query(
      CREATE_RELATED_PARTY,
      { input: director('Hedy') },
      { 'x-api-key': READ_ONLY_KEY },
    );
    const ownKeyWrite = await query(CREATE_RELATED_PARTY, { input: director('Hedy') });

    expect(read.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
    expect(write.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(ownKeyWrite.body.errors).toBeUndefined();
  });

  test('every upstream call of one operation carries the X-Request-Id the client sent', async () => {
    await query(
      '{ customer(id: "cus_acme") { id } institutions { nodes { id } } }',
      {},
      { 'x-request-id': 'dashboard-7' },
    );

    const log = (await (await fetch(`${stack.emulatorUrl}/_emulator/requests`)).json()) as {
      requests: { requestId: string }[];
    };
    expect(log.requests.length).toBeGreaterThanOrEqual(2);
    expect(new Set(log.requests.map((request) => request.requestId))).toEqual(new Set(['dashboard-7']));
  });

  test('an unusable X-Request-Id is replaced by a generated one', async () => {
    const result = await query('{ customer(id: "cus_acme") { id } }', {}, { 'x-request-id': 'has spaces' });

    expect(result.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
  });

  test('no API key ever appears in a response or a log line', async () => {
    await query('{ customer(id: "cus_acme") { id } }', {}, { 'x-api-key': 'sk_caller_secret_1234' });
    await query(CREATE_RELATED_PARTY, { input: director(' bad') });
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'internal_error', rate: 1 }] });
    await query('{ customer(id: "cus_acme") { id } }');

    const everything = [...responses, ...stack.logs()].join('\n');
    expect(responses.length).toBeGreaterThan(10);
    expect(stack.logs().length).toBeGreaterThan(10);
    for (const key of [SANDBOX_KEY, READ_ONLY_KEY, 'sk_caller_secret_1234', 'sk_not_a_key']) {
      expect(everything).not.toContain(key);
    }
  });

  async function countRelatedParties(): Promise<number> {
    const result = await stack.query<{ customer: { relatedParties: { nodes: unknown[] } } }>(
      '{ customer(id: "cus_acme") { relatedParties(first: 100) { nodes { id } } } }',
    );
    return result.body.data!.customer.relatedParties.nodes.length;
  }
});

describe('with a retry budget of one retry per operation', () => {
  const stack = useStack({ env: { UPSTREAM_RETRY_BUDGET: '1' } });

  test('all reads of one operation share the budget', async () => {
    await stack.resetUpstreamCalls();
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'internal_error', rate: 1 }] });

    const result = await stack.query(
      '{ a: customer(id: "cus_acme") { id } b: customer(id: "cus_ada") { id } }',
    );

    expect(result.body.errors?.map((error) => error.extensions?.code)).toEqual([
      'INTERNAL_SERVER_ERROR',
      'INTERNAL_SERVER_ERROR',
    ]);
    // Two first attempts and the single retry the budget allows.
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 3 });
  });

  test('the budget is per operation: the next operation has its own', async () => {
    await stack.clearFaults();
    await stack.resetUpstreamCalls();
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'internal_error', rate: 1, times: 1 }] });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 2 });
  });
});

describe('with a short headers timeout', () => {
  const stack = useStack({
    env: { UPSTREAM_HEADERS_TIMEOUT_MS: '300', UPSTREAM_RETRY_MAX_ATTEMPTS: '2' },
  });

  test('an upstream that never answers becomes UPSTREAM_UNAVAILABLE after the attempts allowed', async () => {
    await stack.resetUpstreamCalls();
    await stack.setFaults({ rules: [{ route: CUSTOMER_ROUTE, kind: 'stall', rate: 1 }] });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      reason: 'headers_timeout',
      requestId: expect.any(String),
    });
    expect(result.body.errors?.[0]?.message).toBe('The upstream API did not answer in time.');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 2 });
  });
});

describe('with at most three upstream calls per operation', () => {
  const stack = useStack({ env: { UPSTREAM_MAX_CALLS_PER_OPERATION: '3' } });

  test('reads past the budget are not sent; their fields are null with TOO_MANY_UPSTREAM_CALLS', async () => {
    const result = await stack.query<Record<string, { id: string } | null>>(
      `{
        a: customer(id: "cus_acme") { id }
        b: customer(id: "cus_ada") { id }
        c: customer(id: "cus_globex") { id }
        d: customer(id: "cus_missing_1") { id }
        e: customer(id: "cus_missing_2") { id }
      }`,
    );

    // The loader sends one read per distinct id in order; the first three spend the budget.
    expect(result.body.data).toEqual({
      a: { id: 'cus_acme' },
      b: { id: 'cus_ada' },
      c: { id: 'cus_globex' },
      d: null,
      e: null,
    });
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        path: ['d'],
        extensions: { code: 'TOO_MANY_UPSTREAM_CALLS', limit: 3 },
      }),
      expect.objectContaining({
        path: ['e'],
        extensions: { code: 'TOO_MANY_UPSTREAM_CALLS', limit: 3 },
      }),
    ]);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 3 });
  });

  test('the budget is per operation: the next operation has its own', async () => {
    const result = await stack.query(
      '{ a: customer(id: "cus_acme") { id } b: customer(id: "cus_ada") { id } }',
    );

    expect(result.body).toEqual({ data: { a: { id: 'cus_acme' }, b: { id: 'cus_ada' } } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 2 });
  });
});
