/**
 * `/_emulator/keys`: keys added and revoked at runtime, for rotations. A new key of an identity is
 * accepted beside the old one (same data, same idempotency keys) until the old one is revoked; no
 * answer ever holds a key.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { SANDBOX_KEY, startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(() => emulator.close());

const NEW_KEY = 'sk_sandbox_rotated_1';

describe('/_emulator/keys', () => {
  test('a new key of an identity works beside the old one, replays its writes, and the old one can be revoked', async () => {
    const added = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: NEW_KEY, id: 'sandbox-read-write' },
    });
    expect(added.status).toBe(201);
    expect(added.body).toEqual({
      data: { id: 'sandbox-read-write', environment: 'sandbox', scope: 'read_write', keys: 2 },
    });

    // Both keys are valid during the window and see the same data.
    expect((await emulator.call('GET', '/v3/customers/cus_acme', { key: SANDBOX_KEY })).status).toBe(200);
    expect((await emulator.call('GET', '/v3/customers/cus_acme', { key: NEW_KEY })).status).toBe(200);

    // A write sent with the old key and retried with the new one is done once: the retry replays.
    const topUp = { amount: '1.00', currency: 'USDC' };
    const first = await emulator.call('POST', '/v3/sandbox/accounts/acc_globex_eth/topup', {
      key: SANDBOX_KEY,
      json: topUp,
      idempotencyKey: 'rotation-write-1',
    });
    const retried = await emulator.call('POST', '/v3/sandbox/accounts/acc_globex_eth/topup', {
      key: NEW_KEY,
      json: topUp,
      idempotencyKey: 'rotation-write-1',
    });
    expect(first.status).toBe(200);
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotency-replayed')).toBe('true');
    expect(retried.body.data.id).toBe(first.body.data.id);

    const revoked = await emulator.call('POST', '/_emulator/keys/revoke', {
      key: null,
      json: { key: SANDBOX_KEY },
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.keys).toBe(1);
    const refused = await emulator.call('GET', '/v3/customers/cus_acme', { key: SANDBOX_KEY });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('unauthorized');
    expect((await emulator.call('GET', '/v3/customers/cus_acme', { key: NEW_KEY })).status).toBe(200);

    const listed = await emulator.call('GET', '/_emulator/keys', { key: null });
    expect(listed.status).toBe(200);
    expect(listed.body.data).toContainEqual({
      id: 'sandbox-read-write',
      environment: 'sandbox',
      scope: 'read_write',
      keys: 1,
    });
    for (const answer of [added, revoked, listed]) {
      expect(answer.text).not.toContain(NEW_KEY);
      expect(answer.text).not.toContain(SANDBOX_KEY);
    }
  });

  test('bad input gets a clear problem and changes nothing', async () => {
    const again = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: NEW_KEY, id: 'sandbox-read-write' },
    });
    expect(again.status).toBe(409);
    const unknownId = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: 'sk_other', id: 'nobody' },
    });
    expect(unknownId.status).toBe(404);
    const mismatch = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: 'sk_other', id: 'sandbox-read-write', environment: 'live' },
    });
    expect(mismatch.status).toBe(409);
    const invalid = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: 'has space', environment: 'staging' },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.body.errors.map((error: { pointer: string }) => error.pointer)).toEqual(['/key']);
    const unknownKey = await emulator.call('POST', '/_emulator/keys/revoke', {
      key: null,
      json: { key: 'sk_never_added' },
    });
    expect(unknownKey.status).toBe(404);
    expect(unknownKey.text).not.toContain('sk_never_added');
    // A brand-new identity needs its environment and scope.
    const fresh = await emulator.call('POST', '/_emulator/keys', {
      key: null,
      json: { key: 'sk_live_second', id: 'live-second', environment: 'live', scope: 'read_only' },
    });
    expect(fresh.status).toBe(201);
    expect(
      (await emulator.call('GET', '/v3/customers/cus_live_northwind', { key: 'sk_live_second' })).status,
    ).toBe(200);
    expect((await emulator.call('GET', '/v3/customers/cus_acme', { key: 'sk_other' })).status).toBe(401);
  });
});
