/**
 * Every problem code of the spec, triggered through the real emulator and read back through the
 * facade's GraphQL endpoint: the code, the message, the whole problem, pointers turned into paths.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { READ_ONLY_KEY } from '../support/harness/emulator.ts';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { useStack } from '../support/harness/stack.ts';

const CREATE_RELATED_PARTY = /* GraphQL */ `
  mutation CreateRelatedParty($input: CreateRelatedPartyInput!) {
    createRelatedParty(input: $input) {
      idempotencyKey
      replayed
      relatedParty {
        id
      }
    }
  }
`;

const ARCHIVE_RELATED_PARTY = /* GraphQL */ `
  mutation ArchiveRelatedParty($input: ArchiveRelatedPartyInput!) {
    archiveRelatedParty(input: $input) {
      relatedParty {
        id
      }
    }
  }
`;

const FORCE_CAPABILITY_STATUS = /* GraphQL */ `
  mutation Force($input: SandboxSetCapabilityStatusInput!) {
    sandboxSetCapabilityStatus(input: $input) {
      capability {
        id
        status
      }
    }
  }
`;

/** A new director's input, with a fresh idempotency key. */
function director(firstName = 'Grace', customerId = 'cus_acme'): Record<string, unknown> {
  return {
    customerId,
    partyType: 'person',
    roles: ['DIRECTOR'],
    person: { firstName, lastName: 'Hopper', residenceCountry: 'US' },
    idempotencyKey: randomUUID(),
  };
}

/** The one error of a response, asserting there is exactly one. */
function onlyError(result: GraphQLResult): NonNullable<GraphQLResult['body']['errors']>[number] {
  expect(result.body.errors, JSON.stringify(result.body)).toHaveLength(1);
  return result.body.errors![0]!;
}

// Server-side callers may bring their own platform key here.
const stack = useStack({ env: { AUTH_ALLOW_CALLER_API_KEY: 'true' } });

describe('upstream problems become GraphQL errors', () => {
  test('validation_error becomes BAD_USER_INPUT with every field pointer given its input path', async () => {
    const result = await stack.query(CREATE_RELATED_PARTY, {
      input: {
        idempotencyKey: 'runtime-errors-1',
        ...director(),
        person: { firstName: ' Grace', lastName: 'Hopper', residenceCountry: 'usa' },
      },
    });

    const error = onlyError(result);
    expect(error.path).toEqual(['createRelatedParty']);
    expect(error.extensions?.code).toBe('BAD_USER_INPUT');
    const problem = error.extensions?.problem as Record<string, unknown>;
    expect(error.message).toBe(problem.detail);
    expect(problem).toMatchObject({
      type: 'https://docs.platform.test/v3/errors/validation-error',
      title: expect.any(String),
      status: 400,
      code: 'validation_error',
      correlationId: expect.any(String),
    });
    expect(problem.errors).toEqual([
      {
        pointer: '/person/firstName',
        code: 'invalid_characters',
        message: expect.any(String),
        path: ['input', 'person', 'firstName'],
      },
      {
        pointer: '/person/residenceCountry',
        code: 'invalid_format',
        message: expect.any(String),
        path: ['input', 'person', 'residenceCountry'],
      },
    ]);
  });

  test('a bad query parameter maps to the GraphQL argument that supplied it', async () => {
    const result = await stack.query('{ customers(first: 2, after: "not-a-cursor") { nodes { id } } }');

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('BAD_USER_INPUT');
    const problem = error.extensions?.problem as { errors: Record<string, unknown>[] };
    expect(problem.errors).toContainEqual(expect.objectContaining({ parameter: 'cursor', path: ['after'] }));
  });

  test('an unknown caller X-API-Key is refused at the door, checked once with capability discovery', async () => {
    const result = await stack.queryWithKey('sk_unknown_caller', '{ customer(id: "cus_acme") { id } }');

    expect(result.status).toBe(401);
    expect(result.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    expect(onlyError(result).extensions?.code).toBe('UNAUTHENTICATED');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });

  test('a read-only caller key making a mutation is answered FORBIDDEN', async () => {
    const result = await stack.queryWithKey(READ_ONLY_KEY, CREATE_RELATED_PARTY, { input: director() });

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('FORBIDDEN');
    expect(error.extensions?.problem).toMatchObject({ status: 403, code: 'forbidden', retryable: false });
  });

  test('not_found becomes NOT_FOUND', async () => {
    const result = await stack.query(ARCHIVE_RELATED_PARTY, {
      input: { idempotencyKey: 'runtime-errors-2', customerId: 'cus_acme', relatedPartyId: 'rp_missing' },
    });

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('NOT_FOUND');
    expect(error.extensions?.problem).toMatchObject({ status: 404, code: 'not_found' });
  });

  test('customer_not_found becomes NOT_FOUND', async () => {
    const result = await stack.query(CREATE_RELATED_PARTY, { input: director('Grace', 'cus_missing') });

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('NOT_FOUND');
    expect(error.extensions?.problem).toMatchObject({ status: 404, code: 'customer_not_found' });
  });

  test('conflict becomes CONFLICT and keeps its statusReason', async () => {
    const result = await stack.query(CREATE_RELATED_PARTY, { input: director('Grace', 'cus_ada') });

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('CONFLICT');
    expect(error.extensions?.problem).toMatchObject({
      status: 409,
      code: 'conflict',
      retryable: false,
      statusReason: { code: 'individual_customer', message: expect.any(String), actor: 'DEVELOPER' },
    });
  });

  test('reusing an idempotency key with another input is IDEMPOTENCY_CONFLICT', async () => {
    const idempotencyKey = `conflict-${Date.now()}`;
    const first = await stack.query(CREATE_RELATED_PARTY, { input: { ...director('Ada'), idempotencyKey } });
    expect(first.body.errors).toBeUndefined();

    const second = await stack.query(CREATE_RELATED_PARTY, {
      input: { ...director('Alan'), idempotencyKey },
    });

    const error = onlyError(second);
    expect(error.extensions?.code).toBe('IDEMPOTENCY_CONFLICT');
    expect(error.extensions?.problem).toMatchObject({
      status: 409,
      code: 'idempotency_conflict',
      retryable: false,
    });
  });

  test('a key still in progress is retried, then answered IDEMPOTENCY_REQUEST_IN_PROGRESS', async () => {
    const input = { ...director('Edsger'), idempotencyKey: `in-progress-${Date.now()}` };
    // Every request waits 3 s inside the emulator after claiming its key; the in-progress answer
    // comes before that wait, so the second caller sees the first one's claim.
    await stack.setFaults({ latency: { fixedMs: 3_000, jitterMs: 0 } });
    const first = stack.query(CREATE_RELATED_PARTY, { input });
    await waitFor(async () => (await stack.upstreamCalls()).total >= 1);

    const second = await stack.query(CREATE_RELATED_PARTY, { input });

    const error = onlyError(second);
    expect(error.extensions?.code).toBe('IDEMPOTENCY_REQUEST_IN_PROGRESS');
    expect(error.extensions?.problem).toMatchObject({
      status: 409,
      code: 'idempotency_request_in_progress',
      title: 'Idempotency Request In Progress',
      retryable: true,
    });
    const firstResult = await first;
    expect(firstResult.body.errors).toBeUndefined();
    // One call of the first mutation, three attempts (the first and two retries) of the second.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/related-parties': 4,
    });
  });

  test('invalid_capability becomes UNPROCESSABLE and keeps the capabilities that qualify', async () => {
    const result = await stack.query(FORCE_CAPABILITY_STATUS, {
      input: {
        idempotencyKey: 'runtime-errors-3',
        customerId: 'cus_acme',
        capabilityId: 'cap_acme_sepa',
        status: 'ready',
      },
    });

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('UNPROCESSABLE');
    const problem = error.extensions?.problem as { status: number; code: string; capabilities?: string[] };
    expect(problem).toMatchObject({ status: 422, code: 'invalid_capability' });
    expect(problem.capabilities).toEqual(expect.arrayContaining(['cap_acme_ach']));
  });

  test('internal_error on every attempt becomes INTERNAL_SERVER_ERROR after exactly three reads', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'internal_error', rate: 1 }],
    });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
    expect(error.extensions?.problem).toMatchObject({ status: 500, code: 'internal_error', retryable: true });
    expect(error.message).toBe('Injected fault: the request failed inside the service. Retry it.');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 3 });
  });

  test('request_failed (502) becomes UPSTREAM_UNAVAILABLE after exactly three reads', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'request_failed', rate: 1 }],
    });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    const error = onlyError(result);
    expect(error.extensions?.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(error.extensions?.problem).toMatchObject({ status: 502, code: 'request_failed', retryable: true });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 3 });
  });

  test('a connection reset on every attempt becomes UPSTREAM_UNAVAILABLE without a problem', async () => {
    await stack.setFaults({ rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'reset', rate: 1 }] });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    const error = onlyError(result);
    expect(error.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', reason: 'connection_reset' });
    expect(error.extensions?.problem).toBeUndefined();
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 3 });
  });

  test("every problem's correlationId is the X-Request-Id the client sent", async () => {
    const result = await stack.query(
      CREATE_RELATED_PARTY,
      { input: director('Grace', 'cus_missing') },
      { 'x-request-id': 'client-req-42' },
    );

    expect(onlyError(result).extensions?.problem).toMatchObject({ correlationId: 'client-req-42' });
    expect(result.headers.get('x-request-id')).toBe('client-req-42');
  });

  test('a failing nested field is null with its error at its path while the rest answers', async () => {
    await stack.setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}/capabilities', kind: 'internal_error', rate: 1 }],
    });

    const result = await stack.query(
      '{ customer(id: "cus_acme") { id capabilities { nodes { id } } relatedParties { nodes { id } } } }',
    );

    const error = onlyError(result);
    expect(error.path).toEqual(['customer', 'capabilities']);
    expect(error.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
    const customer = (result.body.data as { customer: Record<string, unknown> }).customer;
    expect(customer.id).toBe('cus_acme');
    expect(customer.capabilities).toBeNull();
    expect((customer.relatedParties as { nodes: unknown[] }).nodes.length).toBeGreaterThan(0);
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('Condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
