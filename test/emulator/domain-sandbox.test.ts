import { describe, expect, test } from 'vitest';
import { LIVE_KEY, useTestEmulator, useWebhookReceiver } from './domain-harness.ts';

const emulator = useTestEmulator();
const receiver = useWebhookReceiver();

function topUp(accountId: string, body: unknown, key?: string) {
  return emulator.call('POST', `/v3/sandbox/accounts/${accountId}/topup`, { body, ...(key ? { key } : {}) });
}

function forceStatus(customerId: string, capabilityId: string, status: string) {
  return emulator.call('POST', `/v3/sandbox/customers/${customerId}/capabilities/${capabilityId}/status`, {
    body: { status },
  });
}

describe('sandbox top-up', () => {
  test('credits an issued wallet exactly and answers with the top-up result', async () => {
    await emulator.call('POST', '/v3/webhooks', { body: { url: receiver.url, events: ['account.updated'] } });
    const { status, body } = await topUp('acc_ada_polygon', { amount: '0.000001', currency: 'USDC' });
    expect(status).toBe(200);
    const account = (await emulator.get('/v3/customers/cus_ada/accounts/acc_ada_polygon')).body.data;
    expect(body.data).toMatchObject({
      id: expect.stringMatching(/^tu_/),
      type: 'wallet_to_wallet',
      state: 'completed',
      from: {
        rail: expect.any(String),
        identifier: expect.any(String),
        amount: '0.000001',
        currency: 'USDC',
      },
      to: { identifier: account.details.address },
      url: expect.stringMatching(/^https:\/\//),
      onchainUrl: expect.stringMatching(/^https:\/\//),
    });
    expect(account.balances).toEqual([{ currency: 'USDC', available: '2000.000001', pending: '0.00' }]);

    const event = await receiver.waitFor((candidate) => candidate.data.resourceId === 'acc_ada_polygon');
    expect(event.data.object.balances[0].available).toBe('2000.000001');
  });

  test('adds up to the largest representable balance without losing precision, and no further', async () => {
    expect((await topUp('acc_ada_polygon', { amount: '999999997999.999998', currency: 'USDC' })).status).toBe(
      200,
    );
    expect((await topUp('acc_ada_polygon', { amount: '0.000001', currency: 'USDC' })).status).toBe(200);
    const account = (await emulator.get('/v3/customers/cus_ada/accounts/acc_ada_polygon')).body.data;
    expect(account.balances[0].available).toBe('999999999999.999999');

    const { status, body } = await topUp('acc_ada_polygon', { amount: '0.000001', currency: 'USDC' });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/amount', code: 'out_of_range' })]);
  });

  test.each([
    ['an external wallet', 'acc_ada_external'],
    ['a bank account', 'acc_acme_bank'],
  ])('answers 409 account_not_issued_wallet for %s', async (_case, accountId) => {
    const { status, body } = await topUp(accountId, { amount: '1', currency: 'USDC' });
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason).toMatchObject({ code: 'account_not_issued_wallet', retryable: false });
  });

  test('answers 409 account_archived for an archived wallet', async () => {
    expect((await emulator.call('DELETE', '/v3/customers/cus_ada/accounts/acc_ada_polygon')).status).toBe(
      200,
    );
    const { status, body } = await topUp('acc_ada_polygon', { amount: '1', currency: 'USDC' });
    expect(status).toBe(409);
    expect(body.statusReason.code).toBe('account_archived');
  });

  test('rejects a currency other than the account currency at /currency', async () => {
    const { status, body } = await topUp('acc_ada_polygon', { amount: '1', currency: 'EURC' });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/currency', code: 'invalid_value' })]);
  });

  test.each([['0'], ['0.00'], ['-1'], ['1.1234567'], ['1e3'], ['1234567890123']])(
    'rejects the amount %s at /amount',
    async (amount) => {
      const { status, body } = await topUp('acc_ada_polygon', { amount, currency: 'USDC' });
      expect(status).toBe(400);
      expect(body.errors).toEqual([expect.objectContaining({ pointer: '/amount' })]);
    },
  );

  test('answers 404 not_found for an unknown account', async () => {
    const { status, body } = await topUp('acc_nope', { amount: '1', currency: 'USDC' });
    expect(status).toBe(404);
    expect(body.code).toBe('not_found');
  });

  test('is forbidden to a live key', async () => {
    const { status, body } = await topUp(
      'acc_live_northwind_eth',
      { amount: '1', currency: 'USDC' },
      LIVE_KEY,
    );
    expect(status).toBe(403);
    expect(body.code).toBe('forbidden');
  });
});

describe('forcing a capability status', () => {
  test('forces ready: applications approved, statusReason null, capability.status_changed sent', async () => {
    await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['capability.status_changed'] },
    });
    const { status, body } = await forceStatus('cus_acme', 'cap_acme_wire', 'ready');
    expect(status).toBe(200);
    expect(body.data).toMatchObject({ id: 'cap_acme_wire', status: 'ready', statusReason: null });
    expect(body.data.applications.map((application: { status: string }) => application.status)).toEqual([
      'approved',
      'approved',
    ]);
    expect((await emulator.get('/v3/customers/cus_acme/capabilities/cap_acme_wire')).body.data).toEqual(
      body.data,
    );

    const event = await receiver.waitFor((candidate) => candidate.data.resourceId === 'cap_acme_wire');
    expect(event).toMatchObject({
      type: 'capability.status_changed',
      data: { customerId: 'cus_acme', resourceType: 'capability', object: body.data },
    });
  });

  test.each([['rejected'], ['restricted']])(
    'forces %s with a sandbox_forced statusReason',
    async (target) => {
      const { body } = await forceStatus('cus_acme', 'cap_acme_ach', target);
      expect(body.data.status).toBe(target);
      expect(body.data.statusReason).toMatchObject({
        code: 'sandbox_forced',
        actor: 'developer',
        retryable: false,
      });
      expect(body.data.applications[0]).toMatchObject({
        status: target,
        statusReason: { code: 'sandbox_forced' },
      });
    },
  );

  test('forcing the current status changes nothing', async () => {
    const before = (await emulator.get('/v3/customers/cus_acme/capabilities/cap_acme_ach')).body.data;
    const { status, body } = await forceStatus('cus_acme', 'cap_acme_ach', 'ready');
    expect(status).toBe(200);
    expect(body.data).toEqual(before);
  });

  test('answers 422 invalid_capability with the capabilities that can be forced', async () => {
    const { status, body } = await forceStatus('cus_acme', 'cap_acme_sepa', 'ready');
    expect(status).toBe(422);
    expect(body.code).toBe('invalid_capability');
    expect(body.capabilities).toEqual(['cap_acme_ach', 'cap_acme_wire']);
    expect((await emulator.get('/v3/customers/cus_acme/capabilities/cap_acme_sepa')).body.data.status).toBe(
      'pending',
    );
  });

  test('answers 404 not_found for a capability of another customer', async () => {
    const { status, body } = await forceStatus('cus_ada', 'cap_acme_wire', 'ready');
    expect(status).toBe(404);
    expect(body.code).toBe('not_found');
  });

  test('rejects a target status other than ready, rejected or restricted at /status', async () => {
    const { status, body } = await forceStatus('cus_acme', 'cap_acme_wire', 'pending');
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/status', code: 'invalid_value' })]);
  });
});

describe('requesting a capability', () => {
  test('starts pending with one requested application per institution, and can then be forced', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_globex/capabilities', {
      body: { method: 'wire', accountType: 'pooled' },
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      customerId: 'cus_globex',
      method: 'wire',
      accountType: 'pooled',
      status: 'pending',
      statusReason: null,
    });
    expect(
      body.data.applications.map((application: { institution: { id: string }; status: string }) => [
        application.institution.id,
        application.status,
      ]),
    ).toEqual([
      ['ins_lead_bank', 'requested'],
      ['ins_cross_river', 'requested'],
      ['ins_bankhaus_nord', 'requested'],
    ]);
    expect((await forceStatus('cus_globex', body.data.id, 'ready')).body.data.status).toBe('ready');
  });

  test('answers 409 capability_exists for a pair the customer already has', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_acme/capabilities', {
      body: { method: 'ach', accountType: 'pooled' },
    });
    expect(status).toBe(409);
    expect(body.statusReason.code).toBe('capability_exists');
  });

  test('rejects a method discovery does not offer at /method', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_acme/capabilities', {
      body: { method: 'carrier_pigeon', accountType: 'pooled' },
    });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/method', code: 'invalid_value' })]);
  });

  test('discovery names the environment of the key', async () => {
    expect((await emulator.get('/v3/capabilities')).body.data).toMatchObject({
      environment: 'sandbox',
      capabilities: expect.arrayContaining([{ method: 'ach', accountType: 'pooled' }]),
    });
    expect((await emulator.get('/v3/capabilities', LIVE_KEY)).body.data.environment).toBe('live');
  });
});
