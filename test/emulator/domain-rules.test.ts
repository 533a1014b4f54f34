import { describe, expect, test } from 'vitest';
import { eventually, useTestEmulator, useWebhookReceiver } from './domain-harness.ts';

const emulator = useTestEmulator({ transferSettleMs: 20 });
const receiver = useWebhookReceiver();

function createRule(customerId: string, body: unknown) {
  return emulator.call('POST', `/v3/customers/${customerId}/rules`, { body });
}

function setRuleStatus(ruleId: string, status: string) {
  return emulator.call('PATCH', `/v3/customers/cus_acme/rules/${ruleId}`, { body: { status } });
}

async function available(customerId: string, accountId: string): Promise<string> {
  const { body } = await emulator.get(`/v3/customers/${customerId}/accounts/${accountId}`);
  return body.data.balances[0].available;
}

describe('creating rules', () => {
  test('creates a rule sweeping an issued wallet to a recipient destination', async () => {
    const { status, body } = await createRule('cus_ada', {
      description: 'Sweep to cold storage',
      trigger: { accountId: 'acc_ada_sol' },
      action: { destination: { recipientId: 'rcp_ada_cold', destinationId: 'dst_ada_cold_polygon' } },
    });
    expect(status).toBe(201);
    expect(body.data).toMatchObject({
      id: expect.stringMatching(/^rul_/),
      customerId: 'cus_ada',
      status: 'active',
      description: 'Sweep to cold storage',
      trigger: { accountId: 'acc_ada_sol' },
      action: {
        account: null,
        destination: { recipientId: 'rcp_ada_cold', destinationId: 'dst_ada_cold_polygon' },
      },
      archivedAt: null,
    });
  });

  test('answers 409 conflict when a non-archived rule already watches the trigger account', async () => {
    const { status, body } = await createRule('cus_acme', {
      trigger: { accountId: 'acc_acme_polygon' },
      action: { account: { accountId: 'acc_acme_bank' } },
    });
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason).toMatchObject({
      code: 'trigger_account_watched',
      actor: 'developer',
      retryable: false,
    });
    expect(body.detail).toContain('rul_acme_sweep');
  });

  test('allows a new rule on the trigger once the old one is archived', async () => {
    await emulator.call('DELETE', '/v3/customers/cus_acme/rules/rul_acme_sweep');
    const { status } = await createRule('cus_acme', {
      trigger: { accountId: 'acc_acme_polygon' },
      action: { account: { accountId: 'acc_acme_bank' } },
    });
    expect(status).toBe(201);
  });

  test.each([
    [
      'an unknown trigger account',
      { trigger: { accountId: 'acc_nope' }, action: { account: { accountId: 'acc_acme_bank' } } },
      '/trigger/accountId',
      'not_found',
    ],
    [
      'a trigger of another customer',
      { trigger: { accountId: 'acc_ada_sol' }, action: { account: { accountId: 'acc_acme_bank' } } },
      '/trigger/accountId',
      'not_found',
    ],
    [
      'a bank account as trigger',
      { trigger: { accountId: 'acc_acme_bank' }, action: { account: { accountId: 'acc_acme_eth' } } },
      '/trigger/accountId',
      'invalid_value',
    ],
    [
      'both targets',
      {
        trigger: { accountId: 'acc_acme_eth' },
        action: {
          account: { accountId: 'acc_acme_bank' },
          destination: { recipientId: 'rcp_acme_supplier', destinationId: 'dst_acme_supplier_eth' },
        },
      },
      '/action',
      'invalid_value',
    ],
    [
      'no target',
      { trigger: { accountId: 'acc_acme_eth' }, action: { account: null } },
      '/action',
      'required',
    ],
    [
      'the trigger as target',
      { trigger: { accountId: 'acc_acme_eth' }, action: { account: { accountId: 'acc_acme_eth' } } },
      '/action/account/accountId',
      'invalid_value',
    ],
    [
      'a target account of another customer',
      { trigger: { accountId: 'acc_acme_eth' }, action: { account: { accountId: 'acc_ada_sol' } } },
      '/action/account/accountId',
      'not_found',
    ],
    [
      'an unknown recipient',
      {
        trigger: { accountId: 'acc_acme_eth' },
        action: { destination: { recipientId: 'rcp_nope', destinationId: 'dst_acme_supplier_eth' } },
      },
      '/action/destination/recipientId',
      'not_found',
    ],
    [
      'a destination of another recipient',
      {
        trigger: { accountId: 'acc_acme_eth' },
        action: { destination: { recipientId: 'rcp_acme_supplier', destinationId: 'dst_ada_cold_polygon' } },
      },
      '/action/destination/destinationId',
      'not_found',
    ],
  ])('rejects %s with 400 at its pointer', async (_case, body, pointer, code) => {
    const response = await createRule('cus_acme', body);
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('validation_error');
    expect(response.body.errors).toEqual([expect.objectContaining({ pointer, code })]);
  });
});

describe('rule transitions', () => {
  test('pauses, resumes and archives, answering 409 with the reason for every other transition', async () => {
    const paused = await setRuleStatus('rul_acme_sweep', 'paused');
    expect(paused.status).toBe(200);
    expect(paused.body.data.status).toBe('paused');

    const pausedAgain = await setRuleStatus('rul_acme_sweep', 'paused');
    expect(pausedAgain.status).toBe(409);
    expect(pausedAgain.body.statusReason.code).toBe('rule_already_paused');

    const resumed = await setRuleStatus('rul_acme_sweep', 'active');
    expect(resumed.status).toBe(200);
    expect(resumed.body.data.status).toBe('active');

    const resumedAgain = await setRuleStatus('rul_acme_sweep', 'active');
    expect(resumedAgain.status).toBe(409);
    expect(resumedAgain.body.statusReason.code).toBe('rule_already_active');

    const archived = await emulator.call('DELETE', '/v3/customers/cus_acme/rules/rul_acme_sweep');
    expect(archived.status).toBe(200);
    expect(archived.body.data).toMatchObject({ status: 'archived', archivedAt: expect.any(String) });

    for (const attempt of [
      () => setRuleStatus('rul_acme_sweep', 'active'),
      () => setRuleStatus('rul_acme_sweep', 'paused'),
      () => emulator.call('DELETE', '/v3/customers/cus_acme/rules/rul_acme_sweep'),
    ]) {
      const response = await attempt();
      expect(response.status).toBe(409);
      expect(response.body.code).toBe('conflict');
      expect(response.body.statusReason).toMatchObject({
        code: 'rule_archived',
        actor: 'developer',
        retryable: false,
      });
    }
    // An archived rule stays readable.
    expect((await emulator.get('/v3/customers/cus_acme/rules/rul_acme_sweep')).body.data.status).toBe(
      'archived',
    );
  });

  test('rejects a status other than active or paused at /status', async () => {
    const { status, body } = await setRuleStatus('rul_acme_sweep', 'archived');
    expect(status).toBe(400);
    expect(body.errors).toEqual([expect.objectContaining({ pointer: '/status', code: 'invalid_value' })]);
  });
});

describe('rules in action', () => {
  test('a top-up of a watched wallet is swept to the target account, and the transfer completes', async () => {
    await emulator.call('POST', '/v3/webhooks', {
      body: { url: receiver.url, events: ['transfer.created', 'transfer.completed'] },
    });
    const topUp = await emulator.call('POST', '/v3/sandbox/accounts/acc_acme_polygon/topup', {
      body: { amount: '250.75', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);

    // The sweep starts with the credit: the trigger is emptied at once and a transfer is pending or done.
    expect(await available('cus_acme', 'acc_acme_polygon')).toBe('0.00');
    const transfers = (await emulator.get('/v3/customers/cus_acme/transfers')).body.data;
    const sweep = transfers.find(
      (transfer: { ruleId: string | null }) => transfer.ruleId === 'rul_acme_sweep',
    );
    expect(sweep).toMatchObject({
      amount: '250.75',
      currency: 'USDC',
      source: { accountId: 'acc_acme_polygon' },
      target: { account: { accountId: 'acc_acme_eth' }, destination: null },
      quoteId: null,
    });

    await eventually(async () => {
      const { body } = await emulator.get(`/v3/customers/cus_acme/transfers/${sweep.id}`);
      expect(body.data).toMatchObject({ state: 'completed', completedAt: expect.any(String) });
    });
    expect(await available('cus_acme', 'acc_acme_eth')).toBe('12750.75');

    const created = await receiver.waitFor(
      (event) => event.type === 'transfer.created' && event.data.resourceId === sweep.id,
    );
    expect(created.data.object.state).toBe('pending');
    const completed = await receiver.waitFor(
      (event) => event.type === 'transfer.completed' && event.data.resourceId === sweep.id,
    );
    expect(completed.data.object.state).toBe('completed');
  });

  test('sweeps the whole available balance to a recipient destination', async () => {
    await createRule('cus_ada', {
      trigger: { accountId: 'acc_ada_sol' },
      action: { destination: { recipientId: 'rcp_ada_cold', destinationId: 'dst_ada_cold_polygon' } },
    });
    await emulator.call('POST', '/v3/sandbox/accounts/acc_ada_sol/topup', {
      body: { amount: '4.75', currency: 'USDC' },
    });
    expect(await available('cus_ada', 'acc_ada_sol')).toBe('0.00');
    const transfers = (await emulator.get('/v3/customers/cus_ada/transfers')).body.data;
    expect(transfers).toEqual([
      expect.objectContaining({
        amount: '850.00',
        target: {
          account: null,
          destination: { recipientId: 'rcp_ada_cold', destinationId: 'dst_ada_cold_polygon' },
        },
      }),
    ]);
  });

  test('a paused rule leaves the credited funds where they are', async () => {
    await setRuleStatus('rul_acme_sweep', 'paused');
    await emulator.call('POST', '/v3/sandbox/accounts/acc_acme_polygon/topup', {
      body: { amount: '10', currency: 'USDC' },
    });
    expect(await available('cus_acme', 'acc_acme_polygon')).toBe('10.00');
    const transfers = (await emulator.get('/v3/customers/cus_acme/transfers')).body.data;
    expect(transfers.map((transfer: { id: string }) => transfer.id)).toEqual(['trf_acme_payout']);
  });

  test('a completed transfer into a watched wallet sets its rule going too', async () => {
    // acc_acme_eth receives the polygon sweep; a second rule forwards it to the bank account.
    const forward = await createRule('cus_acme', {
      trigger: { accountId: 'acc_acme_eth' },
      action: { account: { accountId: 'acc_acme_bank' } },
    });
    expect(forward.status).toBe(201);
    await emulator.call('POST', '/v3/sandbox/accounts/acc_acme_polygon/topup', {
      body: { amount: '1', currency: 'USDC' },
    });

    const second = await eventually(async () => {
      const transfers = (await emulator.get('/v3/customers/cus_acme/transfers')).body.data;
      const found = transfers.find(
        (transfer: { ruleId: string | null }) => transfer.ruleId === forward.body.data.id,
      );
      expect(found).toBeDefined();
      return found;
    });
    expect(second).toMatchObject({
      amount: '12501.00',
      source: { accountId: 'acc_acme_eth' },
      target: { account: { accountId: 'acc_acme_bank' } },
    });
    expect(await available('cus_acme', 'acc_acme_eth')).toBe('0.00');
  });
});
