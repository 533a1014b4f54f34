import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { CallResult, EmulatorHarness } from './http-harness.ts';
import { READ_ONLY_KEY, startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());
beforeEach(async () => {
  await emulator.call('DELETE', '/_emulator/faults');
});

async function withFault(kind: 'internal_error' | 'request_failed'): Promise<CallResult> {
  await emulator.call('PUT', '/_emulator/faults', {
    json: { rules: [{ route: 'getCustomer', kind, times: 1 }] },
  });
  return emulator.call('GET', '/v3/customers/cus_acme');
}

async function idempotencyConflict(): Promise<CallResult> {
  const body = (externalId: string) => ({ type: 'individual', externalId });
  await emulator.call('POST', '/v3/customers', { idempotencyKey: 'catalog-conflict', json: body('c-1') });
  return emulator.call('POST', '/v3/customers', { idempotencyKey: 'catalog-conflict', json: body('c-2') });
}

async function inProgress(): Promise<CallResult> {
  // Latency keeps the first request inside the operation while the second one arrives.
  await emulator.call('PUT', '/_emulator/faults', { json: { latency: { fixedMs: 2000 } } });
  const send = () =>
    emulator.call('POST', '/v3/customers', {
      idempotencyKey: 'catalog-in-progress',
      json: { type: 'individual', externalId: 'catalog-in-progress' },
    });
  const responses = await Promise.all([send(), send()]);
  return responses.find((response) => response.status === 409) ?? responses[0]!;
}

/**
 * Each code of the spec's Errors table, produced for real, with the `retryable` value the table
 * gives it: `undefined` where the table's column is blank, so the member must be absent.
 */
const CATALOG: [string, number, string, boolean | undefined, () => Promise<CallResult>][] = [
  [
    'validation_error',
    400,
    'Validation Error',
    false,
    () => emulator.call('POST', '/v3/customers', { json: {} }),
  ],
  ['unauthorized', 401, 'Unauthorized', false, () => emulator.call('GET', '/v3/customers', { key: null })],
  [
    'forbidden',
    403,
    'Forbidden',
    false,
    () => emulator.call('POST', '/v3/customers', { key: READ_ONLY_KEY, json: {} }),
  ],
  ['not_found', 404, 'Not Found', undefined, () => emulator.call('GET', '/v3/customers/cus_missing')],
  [
    'customer_not_found',
    404,
    'Customer Not Found',
    undefined,
    () => emulator.call('GET', '/v3/customers/cus_missing/related-parties'),
  ],
  [
    'conflict',
    409,
    'Conflict',
    false,
    () =>
      emulator.call('POST', '/v3/sandbox/accounts/acc_acme_bank/topup', {
        json: { amount: '1.00', currency: 'USD' },
      }),
  ],
  ['idempotency_conflict', 409, 'Idempotency Conflict', false, idempotencyConflict],
  ['idempotency_request_in_progress', 409, 'Idempotency Request In Progress', true, inProgress],
  [
    'invalid_capability',
    422,
    'Invalid Capability',
    undefined,
    () =>
      emulator.call('POST', '/v3/sandbox/customers/cus_acme/capabilities/cap_acme_sepa/status', {
        json: { status: 'ready' },
      }),
  ],
  ['internal_error', 500, 'Internal Error', true, () => withFault('internal_error')],
  ['request_failed', 502, 'Request Failed', true, () => withFault('request_failed')],
  [
    'quote_already_executed',
    409,
    'Quote Already Executed',
    undefined,
    () => emulator.call('POST', '/v3/customers/cus_acme/quotes/quo_acme_executed/execute'),
  ],
];

describe("the spec's problem catalog", () => {
  test.each(CATALOG)(
    '%s: status %i, its title, type URL and retryable as the spec gives it',
    async (code, status, title, retryable, produce) => {
      const response = await produce();
      expect(response.status).toBe(status);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(response.body).toMatchObject({
        type: `https://docs.platform.test/v3/errors/${code.replaceAll('_', '-')}`,
        title,
        status,
        code,
        detail: expect.any(String),
        correlationId: response.headers.get('x-request-id'),
      });
      if (retryable === undefined) expect(response.body).not.toHaveProperty('retryable');
      else expect(response.body.retryable).toBe(retryable);
    },
  );
});
