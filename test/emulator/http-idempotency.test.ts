import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator({
    data: 'empty',
    apiKeys: [
      { key: 'sk_sandbox_team_a', id: 'team-a', environment: 'sandbox', scope: 'read_write' },
      { key: 'sk_sandbox_team_b', id: 'team-b', environment: 'sandbox', scope: 'read_write' },
    ],
  });
});
afterAll(() => emulator.close());
beforeEach(async () => {
  await emulator.call('DELETE', '/_emulator/faults');
});

const KEY_A = 'sk_sandbox_team_a';
const KEY_B = 'sk_sandbox_team_b';

function createCustomer(externalId: string, idempotencyKey: string, key = KEY_A) {
  return emulator.call('POST', '/v3/customers', {
    key,
    idempotencyKey,
    json: { type: 'individual', externalId },
  });
}

async function customerCount(key = KEY_A): Promise<number> {
  const response = await emulator.call('GET', '/v3/customers?limit=100', { key });
  return response.body.data.length;
}

describe('idempotency', () => {
  test('the same key, method, path and body replays the original response with Idempotency-Replayed', async () => {
    const first = await createCustomer('replay-1', 'key-replay-1');
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    const before = await customerCount();

    const second = await createCustomer('replay-1', 'key-replay-1');
    expect(second.status).toBe(201);
    expect(second.headers.get('idempotency-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect(second.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(await customerCount()).toBe(before);
  });

  test('the same key with another body is 409 idempotency_conflict', async () => {
    expect((await createCustomer('conflict-1', 'key-conflict-1')).status).toBe(201);
    const response = await createCustomer('conflict-2', 'key-conflict-1');
    expect(response.status).toBe(409);
    expect(response.body).toMatchObject({
      code: 'idempotency_conflict',
      type: 'https://docs.platform.test/v3/errors/idempotency-conflict',
      retryable: false,
    });
  });

  test('the same key on another path is 409 idempotency_conflict', async () => {
    const customer = (await createCustomer('conflict-path', 'key-conflict-path-setup')).body.data.id;
    const first = await emulator.call('DELETE', `/v3/customers/${customer}/documents/doc_one`, {
      key: KEY_A,
      idempotencyKey: 'key-conflict-path',
    });
    expect(first.status).toBe(404);
    const response = await emulator.call('DELETE', `/v3/customers/${customer}/documents/doc_two`, {
      key: KEY_A,
      idempotencyKey: 'key-conflict-path',
    });
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('idempotency_conflict');
  });

  test('keys are scoped to the API key that sent them', async () => {
    expect((await createCustomer('scoped-a', 'shared-key', KEY_A)).status).toBe(201);
    const other = await createCustomer('scoped-b', 'shared-key', KEY_B);
    expect(other.status).toBe(201);
    expect(other.headers.get('idempotency-replayed')).toBeNull();
    expect(other.body.data.externalId).toBe('scoped-b');
  });

  test('a second request while the first still runs is 409 idempotency_request_in_progress, retryable', async () => {
    // Latency holds the first request inside the operation while the second arrives.
    await emulator.call('PUT', '/_emulator/faults', { json: { latency: { fixedMs: 2000 } } });
    const [one, two] = await Promise.all([
      createCustomer('in-progress', 'key-in-progress'),
      createCustomer('in-progress', 'key-in-progress'),
    ]);
    await emulator.call('DELETE', '/_emulator/faults');

    const statuses = [one.status, two.status].sort();
    expect(statuses).toEqual([201, 409]);
    const rejected = one.status === 409 ? one : two;
    const created = one.status === 201 ? one : two;
    expect(rejected.body).toMatchObject({
      code: 'idempotency_request_in_progress',
      title: 'Idempotency Request In Progress',
      detail: 'A request with this Idempotency-Key is still in progress.',
      retryable: true,
    });

    // Once the first finishes, the identical retry replays its result.
    const retry = await createCustomer('in-progress', 'key-in-progress');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
    expect(retry.body.data.id).toBe(created.body.data.id);
  });

  test('a 5xx releases the key, so the identical retry runs the operation', async () => {
    await emulator.call('PUT', '/_emulator/faults', {
      json: { rules: [{ route: 'POST /v3/customers', kind: 'internal_error', times: 1 }] },
    });
    const failed = await createCustomer('after-5xx', 'key-after-5xx');
    expect(failed.status).toBe(500);
    expect(failed.body).toMatchObject({ code: 'internal_error', retryable: true });

    const retry = await createCustomer('after-5xx', 'key-after-5xx');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotency-replayed')).toBeNull();
  });

  test('a 4xx of the operation is stored and replayed, with the replaying request as correlationId', async () => {
    const path = '/v3/customers/cus_missing/related-parties';
    const json = {
      partyType: 'person',
      roles: ['director'],
      person: { firstName: 'A', lastName: 'B', residenceCountry: 'GB' },
    };
    const first = await emulator.call('POST', path, { key: KEY_A, idempotencyKey: 'key-4xx', json });
    expect(first.status).toBe(404);
    expect(first.body.code).toBe('customer_not_found');

    const second = await emulator.call('POST', path, {
      key: KEY_A,
      idempotencyKey: 'key-4xx',
      json,
      headers: { 'X-Request-Id': 'replay-trace' },
    });
    expect(second.status).toBe(404);
    expect(second.headers.get('idempotency-replayed')).toBe('true');
    expect(second.body).toEqual({ ...first.body, correlationId: 'replay-trace' });
  });

  test('a request rejected by validation does not use up its key', async () => {
    const invalid = await emulator.call('POST', '/v3/customers', {
      key: KEY_A,
      idempotencyKey: 'key-after-400',
      json: { type: 'individual' },
    });
    expect(invalid.status).toBe(400);
    expect((await createCustomer('after-400', 'key-after-400')).status).toBe(201);
  });
});

describe('idempotency retention', () => {
  test('a key is forgotten after idempotencyRetentionMs', async () => {
    const shortLived = await startEmulator({ data: 'empty', idempotencyRetentionMs: 50 });
    try {
      const first = await shortLived.call('POST', '/v3/customers', {
        idempotencyKey: 'retained',
        json: { type: 'individual', externalId: 'retention-1' },
      });
      expect(first.status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const reused = await shortLived.call('POST', '/v3/customers', {
        idempotencyKey: 'retained',
        json: { type: 'individual', externalId: 'retention-2' },
      });
      expect(reused.status).toBe(201);
      expect(reused.body.data.externalId).toBe('retention-2');
    } finally {
      await shortLived.close();
    }
  });
});
