import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestEmulator, useTestEmulator, useWebhookReceiver } from './domain-harness.ts';
import type { TestEmulator } from './domain-harness.ts';

const emulator = useTestEmulator();
const receiver = useWebhookReceiver();

function replaceFees(customerId: string, accountId: string, developer: unknown) {
  return emulator.call('PUT', `/v3/customers/${customerId}/accounts/${accountId}/fees`, {
    body: { breakdown: { developer } },
  });
}

describe('reading accounts', () => {
  test('an issued wallet carries its balances, network, address and fees', async () => {
    const { status, body } = await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth');
    expect(status).toBe(200);
    expect(body.data).toMatchObject({
      id: 'acc_acme_eth',
      customerId: 'cus_acme',
      type: 'wallet',
      network: 'ethereum',
      origin: 'issued',
      status: 'ready',
      currency: 'USDC',
      isDefault: true,
      openTaskIds: [],
      details: { network: 'ethereum', address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/) },
      fees: { breakdown: { developer: { fixed: '0.50', bips: 25 } } },
      balances: [{ currency: 'USDC', available: '12500.00', pending: '0.00' }],
      archivedAt: null,
    });
  });

  test('an external wallet has an empty balance collection', async () => {
    const { body } = await emulator.get('/v3/customers/cus_ada/accounts/acc_ada_external');
    expect(body.data).toMatchObject({
      type: 'wallet',
      origin: 'external',
      network: 'ethereum',
      balances: [],
    });
  });

  test('a bank account carries typed bank details', async () => {
    const { body } = await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_bank');
    expect(body.data).toMatchObject({
      type: 'bank_account',
      network: null,
      currency: 'USD',
      balances: [],
      details: {
        bankName: 'Lead Bank',
        accountHolderName: 'Acme Robotics Ltd',
        routingNumber: '101019644',
        accountNumberLast4: '4821',
        country: 'US',
      },
    });
  });

  test('lists a customer\u2019s accounts as full records in creation order', async () => {
    const { body } = await emulator.get('/v3/customers/cus_globex/accounts');
    expect(body.data.map((account: { id: string }) => account.id)).toEqual([
      'acc_globex_eth',
      'acc_globex_external',
      'acc_globex_bank',
    ]);
    expect(body.data[0].balances).toEqual([{ currency: 'USDC', available: '98000.00', pending: '0.00' }]);
    expect(body.data[2].fees).toEqual({ breakdown: { developer: { fixed: '2.50', bips: 0 } } });
  });

  test('answers 404 not_found for an account of another customer and for an unknown customer', async () => {
    const foreign = await emulator.get('/v3/customers/cus_ada/accounts/acc_acme_eth');
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('not_found');
    const unknown = await emulator.get('/v3/customers/cus_missing/accounts');
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('not_found');
  });
});

describe('account fees', () => {
  test('reads the developer fee, and null when none is configured', async () => {
    const set = await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth/fees');
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      data: { accountId: 'acc_acme_eth', breakdown: { developer: { fixed: '0.50', bips: 25 } } },
    });
    const unset = await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_polygon/fees');
    expect(unset.body).toEqual({ data: { accountId: 'acc_acme_polygon', breakdown: { developer: null } } });
  });

  test('a replace shows in the fees read and in the account record, and sends account.updated', async () => {
    await emulator.call('POST', '/v3/webhooks', { body: { url: receiver.url, events: ['account.updated'] } });
    const { status, body } = await replaceFees('cus_acme', 'acc_acme_polygon', { fixed: '1.25', bips: 9999 });
    expect(status).toBe(200);
    expect(body.data).toEqual({
      accountId: 'acc_acme_polygon',
      breakdown: { developer: { fixed: '1.25', bips: 9999 } },
    });

    expect((await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_polygon/fees')).body.data).toEqual(
      body.data,
    );
    const account = (await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_polygon')).body.data;
    expect(account.fees).toEqual({ breakdown: { developer: { fixed: '1.25', bips: 9999 } } });

    const event = await receiver.waitFor(
      (candidate) =>
        candidate.data.resourceId === 'acc_acme_polygon' &&
        candidate.data.object.fees.breakdown.developer?.bips === 9999,
    );
    expect(event).toMatchObject({
      type: 'account.updated',
      data: { customerId: 'cus_acme', resourceType: 'account', object: account },
    });
  });

  test('replacing with null removes the developer fee', async () => {
    const { body } = await replaceFees('cus_acme', 'acc_acme_eth', null);
    expect(body.data.breakdown.developer).toBeNull();
    expect(
      (await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth')).body.data.fees.breakdown.developer,
    ).toBeNull();
  });

  test.each([
    [
      'fixed with three decimals',
      { fixed: '1.234', bips: 10 },
      '/breakdown/developer/fixed',
      'invalid_format',
    ],
    ['fixed with a sign', { fixed: '-1', bips: 10 }, '/breakdown/developer/fixed', 'invalid_format'],
    ['bips of 10000', { fixed: '1', bips: 10000 }, '/breakdown/developer/bips', 'out_of_range'],
    ['negative bips', { fixed: '1', bips: -1 }, '/breakdown/developer/bips', 'out_of_range'],
    ['fractional bips', { fixed: '1', bips: 1.5 }, '/breakdown/developer/bips', 'invalid_type'],
    ['a missing bips', { fixed: '1' }, '/breakdown/developer/bips', 'required'],
  ])('rejects %s at its pointer', async (_case, developer, pointer, code) => {
    const { status, body } = await replaceFees('cus_acme', 'acc_acme_eth', developer);
    expect(status).toBe(400);
    expect(body.code).toBe('validation_error');
    expect(body.errors).toEqual([expect.objectContaining({ pointer, code })]);
    // The rejected replace changed nothing.
    expect(
      (await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth/fees')).body.data.breakdown.developer,
    ).toEqual({ fixed: '0.50', bips: 25 });
  });

  test('accepts the limits: whole-number fixed fee, two decimals, 0 and 9999 bips', async () => {
    expect((await replaceFees('cus_acme', 'acc_acme_eth', { fixed: '10', bips: 0 })).status).toBe(200);
    expect((await replaceFees('cus_acme', 'acc_acme_eth', { fixed: '0.05', bips: 9999 })).status).toBe(200);
  });
});

describe('creating accounts', () => {
  test('an issued wallet gets an address and a zero balance in its currency, and sends account.created', async () => {
    await emulator.call('POST', '/v3/webhooks', { body: { url: receiver.url, events: ['account.created'] } });
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_globex/accounts', {
      body: { type: 'wallet', origin: 'issued', network: 'solana', currency: 'USDC', label: 'Globex Solana' },
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      id: expect.stringMatching(/^acc_/),
      customerId: 'cus_globex',
      origin: 'issued',
      status: 'ready',
      isDefault: false,
      details: { network: 'solana', address: expect.stringMatching(/^[1-9A-HJ-NP-Za-km-z]{44}$/) },
      fees: { breakdown: { developer: null } },
      balances: [{ currency: 'USDC', available: '0.00', pending: '0.00' }],
    });
    const event = await receiver.waitFor(
      (candidate) => candidate.type === 'account.created' && candidate.data.resourceId === body.data.id,
    );
    expect(event.data.object).toEqual(body.data);
  });

  test('an external wallet keeps the address it was given and has no balances', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_ada/accounts', {
      body: {
        type: 'wallet',
        origin: 'external',
        network: 'polygon',
        currency: 'USDC',
        label: 'Ledger',
        address: '0x00000000000000000000000000000000000000aa',
      },
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      details: { address: '0x00000000000000000000000000000000000000aa' },
      balances: [],
    });
  });

  test('an external wallet without an address is rejected at /address', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_ada/accounts', {
      body: { type: 'wallet', origin: 'external', network: 'polygon', currency: 'USDC', label: 'Ledger' },
    });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/address', code: 'required' })]);
  });

  test('an issued wallet with an address is rejected at /address', async () => {
    const { status, body } = await emulator.call('POST', '/v3/customers/cus_ada/accounts', {
      body: {
        type: 'wallet',
        origin: 'issued',
        network: 'polygon',
        currency: 'USDC',
        label: 'Mine',
        address: '0xabc',
      },
    });
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/address', code: 'invalid_value' })]);
  });
});

describe('archiving accounts', () => {
  test('archives an account: status archived, archivedAt set, still readable and listed', async () => {
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_globex/accounts/acc_globex_external',
    );
    expect(status).toBe(200);
    expect(body.data).toMatchObject({
      id: 'acc_globex_external',
      status: 'archived',
      archivedAt: expect.any(String),
    });
    expect((await emulator.get('/v3/customers/cus_globex/accounts/acc_globex_external')).body.data).toEqual(
      body.data,
    );
    const list = await emulator.get('/v3/customers/cus_globex/accounts');
    expect(list.body.data.map((account: { id: string }) => account.id)).toContain('acc_globex_external');
  });

  test('answers 409 account_archived when already archived', async () => {
    await emulator.call('DELETE', '/v3/customers/cus_globex/accounts/acc_globex_external');
    const { status, body } = await emulator.call(
      'DELETE',
      '/v3/customers/cus_globex/accounts/acc_globex_external',
    );
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason).toMatchObject({
      code: 'account_archived',
      actor: 'developer',
      retryable: false,
    });
  });

  test('answers 409 rule_watches_account for the trigger of a rule, and rule_targets_account for its target', async () => {
    const watched = await emulator.call('DELETE', '/v3/customers/cus_acme/accounts/acc_acme_polygon');
    expect(watched.status).toBe(409);
    expect(watched.body.statusReason.code).toBe('rule_watches_account');
    const targeted = await emulator.call('DELETE', '/v3/customers/cus_acme/accounts/acc_acme_eth');
    expect(targeted.status).toBe(409);
    expect(targeted.body.statusReason.code).toBe('rule_targets_account');
  });

  test('allows archiving once the rule is archived', async () => {
    expect((await emulator.call('DELETE', '/v3/customers/cus_acme/rules/rul_acme_sweep')).status).toBe(200);
    expect((await emulator.call('DELETE', '/v3/customers/cus_acme/accounts/acc_acme_polygon')).status).toBe(
      200,
    );
  });
});

describe('archiving an account touched by a pending transfer', () => {
  let slow: TestEmulator;

  beforeAll(async () => {
    // Transfers stay pending for the whole test.
    slow = await startTestEmulator({ transferSettleMs: 600_000 });
  });

  afterAll(async () => {
    await slow.close();
  });

  test('answers 409 with blockingResources naming the transfer to wait for', async () => {
    const transfer = (await slow.call('POST', '/v3/customers/cus_acme/quotes/quo_acme_open/execute')).body
      .data;
    expect(transfer).toMatchObject({ state: 'pending', target: { account: { accountId: 'acc_acme_bank' } } });

    const { status, body } = await slow.call('DELETE', '/v3/customers/cus_acme/accounts/acc_acme_bank');
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason.code).toBe('pending_transfers');
    expect(body.blockingResources).toEqual([
      { type: 'transfer', id: transfer.id, requiredAction: 'wait_for_transfer' },
    ]);
  });
});
