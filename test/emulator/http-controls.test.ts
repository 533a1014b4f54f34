import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
beforeEach(async () => {
  await emulator.call('DELETE', '/_emulator/faults');
  await emulator.call('DELETE', '/_emulator/requests');
});

const setFaults = (json: unknown) => emulator.call('PUT', '/_emulator/faults', { json });

describe('request counts', () => {
  test('counts /v3 requests by method and route template, whatever their outcome', async () => {
    await emulator.call('GET', '/v3/customers/cus_acme');
    await emulator.call('GET', '/v3/customers/cus_ada');
    await emulator.call('GET', '/v3/customers/cus_missing');
    await emulator.call('GET', '/v3/customers/cus_acme/accounts/acc_acme_eth', { key: null });
    await emulator.call('GET', '/v3/not-a-route');

    const counts = await emulator.call('GET', '/_emulator/requests', { key: null });
    expect(counts.status).toBe(200);
    expect(counts.body.total).toBe(5);
    expect(counts.body.byRoute).toEqual({
      'GET /v3/customers/{customerId}': 3,
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
      'GET (unmatched)': 1,
    });
    expect(counts.body.requests.map((r: { status: number }) => r.status)).toEqual([200, 200, 404, 401, 404]);
    expect(counts.body.requests[0]).toEqual({
      method: 'GET',
      route: 'GET /v3/customers/{customerId}',
      path: '/v3/customers/cus_acme',
      status: 200,
      requestId: expect.stringMatching(/^req_/),
    });
  });

  test('control requests are not counted, and DELETE resets the counts', async () => {
    await emulator.call('GET', '/v3/capabilities');
    await emulator.call('GET', '/_emulator/health');
    expect((await emulator.call('GET', '/_emulator/requests')).body.total).toBe(1);
    expect((await emulator.call('DELETE', '/_emulator/requests')).status).toBe(204);
    expect((await emulator.call('GET', '/_emulator/requests')).body).toEqual({
      total: 0,
      byRoute: {},
      requests: [],
    });
  });
});

describe('fault injection', () => {
  test('internal_error answers 500 for the matching route, `times` times, and is still counted', async () => {
    await setFaults({
      rules: [{ route: 'GET /v3/customers/{customerId}', kind: 'internal_error', rate: 1, times: 2 }],
    });
    const first = await emulator.call('GET', '/v3/customers/cus_acme');
    expect(first.status).toBe(500);
    expect(first.body).toMatchObject({ code: 'internal_error', retryable: true, status: 500 });
    expect((await emulator.call('GET', '/v3/capabilities')).status).toBe(200);
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(500);
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
    const counts = (await emulator.call('GET', '/_emulator/requests')).body;
    expect(counts.byRoute['GET /v3/customers/{customerId}']).toBe(3);
  });

  test('request_failed answers 502, retryable; a rule can name an operationId', async () => {
    await setFaults({ rules: [{ route: 'listCustomers', kind: 'request_failed' }] });
    const response = await emulator.call('GET', '/v3/customers');
    expect(response.status).toBe(502);
    expect(response.body).toMatchObject({
      code: 'request_failed',
      type: 'https://docs.platform.test/v3/errors/request-failed',
      retryable: true,
    });
  });

  test('rate 0 never fires', async () => {
    await setFaults({ rules: [{ kind: 'internal_error', rate: 0 }] });
    for (let index = 0; index < 5; index++)
      expect((await emulator.call('GET', '/v3/capabilities')).status).toBe(200);
  });

  test('reset destroys the connection without a response', async () => {
    await setFaults({ rules: [{ kind: 'reset', times: 1 }] });
    await expect(emulator.call('GET', '/v3/customers/cus_acme')).rejects.toThrow();
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
  });

  test('stall never answers; the client gives up', async () => {
    await setFaults({ rules: [{ kind: 'stall', times: 1 }] });
    await expect(
      emulator.call('GET', '/v3/customers/cus_acme', { signal: AbortSignal.timeout(300) }),
    ).rejects.toThrow();
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
  });

  test('latency delays answers by at least the fixed part', async () => {
    await setFaults({ latency: { fixedMs: 150, jitterMs: 50 } });
    const started = performance.now();
    expect((await emulator.call('GET', '/v3/capabilities')).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  test('a delay rule holds back only its route, then answers as usual', async () => {
    await setFaults({ rules: [{ kind: 'delay', route: 'discoverCapabilities', delayMs: 150 }] });
    const started = performance.now();
    const slow = await emulator.call('GET', '/v3/capabilities');
    const slowMs = performance.now() - started;
    expect(slow.status).toBe(200);
    expect(slowMs).toBeGreaterThanOrEqual(140);
    // Another route is not held back: it answers before the delayed one would have.
    const other = performance.now();
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);
    expect(performance.now() - other).toBeLessThan(slowMs);
  });

  test('a delay rule needs delayMs, and no other kind takes one', async () => {
    const response = await setFaults({ rules: [{ kind: 'delay' }, { kind: 'delay', delayMs: 0 }] });
    expect(response.status).toBe(400);
    const byPointer = Object.fromEntries(
      response.body.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
    );
    expect(byPointer).toEqual({ '/rules/0/delayMs': 'required', '/rules/1/delayMs': 'out_of_range' });
    const misplaced = await setFaults({ rules: [{ kind: 'stall', delayMs: 10 }] });
    expect(misplaced.status).toBe(400);
    expect(misplaced.body.errors).toEqual([
      { pointer: '/rules/0/delayMs', code: 'invalid_value', message: 'Only a delay rule takes delayMs.' },
    ]);
  });

  test('the configuration reads back, with defaults filled in', async () => {
    await setFaults({ rules: [{ kind: 'stall', route: 'getCustomer' }] });
    const current = await emulator.call('GET', '/_emulator/faults');
    expect(current.body.data).toEqual({
      latency: { fixedMs: 0, jitterMs: 0 },
      rules: [{ kind: 'stall', route: 'getCustomer', rate: 1 }],
    });
  });

  test('an invalid fault configuration is 400 with pointers', async () => {
    const response = await setFaults({ latency: { fixedMs: -1 }, rules: [{ kind: 'explode', rate: 2 }] });
    expect(response.status).toBe(400);
    const byPointer = Object.fromEntries(
      response.body.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
    );
    expect(byPointer).toEqual({
      '/latency/fixedMs': 'out_of_range',
      '/rules/0/kind': 'invalid_value',
      '/rules/0/rate': 'out_of_range',
    });
  });
});

describe('other controls', () => {
  test('reset restores the demo data and forgets idempotency keys', async () => {
    const created = await emulator.call('POST', '/v3/customers', {
      idempotencyKey: 'before-reset',
      json: { type: 'individual', externalId: 'gone-after-reset' },
    });
    expect(created.status).toBe(201);

    const reset = await emulator.call('POST', '/_emulator/reset', { json: { data: 'demo' } });
    expect(reset.status).toBe(200);
    expect((await emulator.call('GET', `/v3/customers/${created.body.data.id}`)).status).toBe(404);
    expect((await emulator.call('GET', '/v3/customers/cus_acme')).status).toBe(200);

    const again = await emulator.call('POST', '/v3/customers', {
      idempotencyKey: 'before-reset',
      json: { type: 'individual', externalId: 'gone-after-reset' },
    });
    expect(again.headers.get('idempotency-replayed')).toBeNull();
    expect(again.status).toBe(201);
  });

  test('reset to empty leaves no customers; an unknown data set is 400', async () => {
    expect((await emulator.call('POST', '/_emulator/reset', { json: { data: 'empty' } })).status).toBe(200);
    expect((await emulator.call('GET', '/v3/customers')).body.data).toEqual([]);
    const bad = await emulator.call('POST', '/_emulator/reset', { json: { data: 'lots' } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatchObject({ pointer: '/data', code: 'invalid_value' });
    await emulator.call('POST', '/_emulator/reset', { json: { data: 'demo' } });
  });

  test('webhook deliveries are listed', async () => {
    const response = await emulator.call('GET', '/_emulator/webhook-deliveries');
    expect(response.status).toBe(200);
    expect(Array.isArray(response.body.data)).toBe(true);
  });

  test('an unknown control is 404 problem+json', async () => {
    const response = await emulator.call('GET', '/_emulator/nothing');
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });
});

describe('closing', () => {
  test('close() finishes even with a stalled request open', async () => {
    const local = await startEmulator();
    await local.call('PUT', '/_emulator/faults', { json: { rules: [{ kind: 'stall' }] } });
    const pending = local.call('GET', '/v3/capabilities').catch((error: unknown) => error);
    // Wait until the emulator has the stalled request, then close under it.
    for (let attempt = 0; attempt < 100; attempt++) {
      if ((await local.call('GET', '/_emulator/requests')).body.total === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await local.close();
    expect(await pending).toBeInstanceOf(Error);
  });
});
