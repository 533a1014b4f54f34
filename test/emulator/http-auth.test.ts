import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { LIVE_KEY, READ_ONLY_KEY, startEmulator } from './http-harness.ts';
import { createEmulator } from '../../emulator/index.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

describe('authentication', () => {
  test('a request without X-API-Key gets 401 unauthorized', async () => {
    const response = await emulator.call('GET', '/v3/customers/cus_acme', { key: null });
    expect(response.status).toBe(401);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(response.body).toMatchObject({
      type: 'https://docs.platform.test/v3/errors/unauthorized',
      title: 'Unauthorized',
      status: 401,
      code: 'unauthorized',
      retryable: false,
    });
  });

  test('an unknown key gets 401 unauthorized and is never echoed back', async () => {
    const secret = 'sk_sandbox_not_a_real_key_123';
    const response = await emulator.call('GET', '/v3/customers/cus_acme', { key: secret });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe('unauthorized');
    expect(response.text).not.toContain(secret);
  });

  test('a key is checked before the route: an unknown path without a key is 401, not 404', async () => {
    const response = await emulator.call('GET', '/v3/nowhere', { key: null });
    expect(response.status).toBe(401);
  });

  test('a read-only key can read', async () => {
    const response = await emulator.call('GET', '/v3/customers/cus_acme', { key: READ_ONLY_KEY });
    expect(response.status).toBe(200);
    expect(response.body.data.id).toBe('cus_acme');
  });

  test.each([
    ['POST', '/v3/customers', { type: 'individual', externalId: 'read-only-attempt' }],
    ['PUT', '/v3/customers/cus_acme/accounts/acc_acme_eth/fees', { breakdown: { developer: null } }],
    ['PATCH', '/v3/webhooks/we_x', { status: 'disabled' }],
    ['DELETE', '/v3/customers/cus_acme/documents/doc_x', undefined],
  ])('a read-only key writing (%s) gets 403 forbidden', async (method, path, json) => {
    const response = await emulator.call(method, path, { key: READ_ONLY_KEY, ...(json ? { json } : {}) });
    expect(response.status).toBe(403);
    expect(response.body).toMatchObject({ code: 'forbidden', status: 403, retryable: false });
  });

  test('a live key on /v3/sandbox/* gets 403 forbidden', async () => {
    const response = await emulator.call('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      key: LIVE_KEY,
      json: { amount: '10', currency: 'USDC' },
    });
    expect(response.status).toBe(403);
    expect(response.body.code).toBe('forbidden');
    expect(response.text).not.toContain(LIVE_KEY);
  });

  test('a live key works outside the sandbox area and sees the live environment', async () => {
    const response = await emulator.call('GET', '/v3/capabilities', { key: LIVE_KEY });
    expect(response.status).toBe(200);
    expect(response.body.data.environment).toBe('live');
  });

  test('two configured keys may not share an id, which scopes their idempotency keys', () => {
    expect(() =>
      createEmulator({
        apiKeys: [
          { key: 'sk_sandbox_one', id: 'team', environment: 'sandbox', scope: 'read_write' },
          { key: 'sk_sandbox_two', id: 'team', environment: 'sandbox', scope: 'read_write' },
        ],
      }),
    ).toThrow('Two configured API keys share the id "team".');
  });

  test('configured keys replace the defaults', async () => {
    const custom = await startEmulator({
      apiKeys: [{ key: 'sk_sandbox_custom', id: 'custom', environment: 'sandbox', scope: 'read_write' }],
    });
    try {
      expect((await custom.call('GET', '/v3/capabilities', { key: 'sk_sandbox_custom' })).status).toBe(200);
      expect((await custom.call('GET', '/v3/capabilities')).status).toBe(401);
    } finally {
      await custom.close();
    }
  });
});
