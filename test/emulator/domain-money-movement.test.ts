import { describe, expect, test } from 'vitest';
import { eventually, useTestEmulator } from './domain-harness.ts';

const emulator = useTestEmulator({ transferSettleMs: 20 });

describe('quotes', () => {
  test('lists a customer\u2019s quotes with their status', async () => {
    const { body } = await emulator.get('/v3/customers/cus_acme/quotes');
    expect(body.data.map((quote: { id: string; status: string }) => [quote.id, quote.status])).toEqual([
      ['quo_acme_executed', 'executed'],
      ['quo_acme_open', 'open'],
    ]);
  });

  test('executing an open quote debits the source, creates a pending transfer and marks the quote executed', async () => {
    const { status, body } = await emulator.call(
      'POST',
      '/v3/customers/cus_acme/quotes/quo_acme_open/execute',
    );
    expect(status).toBe(201);
    const transfer = body.data;
    expect(transfer).toMatchObject({
      id: expect.stringMatching(/^trf_/),
      customerId: 'cus_acme',
      amount: '1000.00',
      currency: 'USDC',
      source: { accountId: 'acc_acme_eth' },
      target: { account: { accountId: 'acc_acme_bank' }, destination: null },
      quoteId: 'quo_acme_open',
      ruleId: null,
    });
    expect(
      (await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth')).body.data.balances[0].available,
    ).toBe('11500.00');
    expect((await emulator.get('/v3/customers/cus_acme/quotes/quo_acme_open')).body.data).toMatchObject({
      status: 'executed',
      transferId: transfer.id,
    });
    await eventually(async () => {
      const read = await emulator.get(`/v3/customers/cus_acme/transfers/${transfer.id}`);
      expect(read.body.data).toMatchObject({ state: 'completed', completedAt: expect.any(String) });
    });
  });

  test('a second execution answers 409 quote_already_executed with the transfer id', async () => {
    const first = await emulator.call('POST', '/v3/customers/cus_acme/quotes/quo_acme_open/execute');
    const { status, body } = await emulator.call(
      'POST',
      '/v3/customers/cus_acme/quotes/quo_acme_open/execute',
    );
    expect(status).toBe(409);
    expect(body.code).toBe('quote_already_executed');
    expect(body.transferId).toBe(first.body.data.id);

    const demo = await emulator.call('POST', '/v3/customers/cus_acme/quotes/quo_acme_executed/execute');
    expect(demo.status).toBe(409);
    expect(demo.body).toMatchObject({ code: 'quote_already_executed', transferId: 'trf_acme_payout' });
  });

  test('an expired quote answers 409 conflict quote_expired', async () => {
    const { status, body } = await emulator.call(
      'POST',
      '/v3/customers/cus_globex/quotes/quo_globex_expired/execute',
    );
    expect(status).toBe(409);
    expect(body.code).toBe('conflict');
    expect(body.statusReason.code).toBe('quote_expired');
  });

  test('a quote of another customer answers 404 not_found', async () => {
    const { status, body } = await emulator.call(
      'POST',
      '/v3/customers/cus_globex/quotes/quo_acme_open/execute',
    );
    expect(status).toBe(404);
    expect(body.code).toBe('not_found');
  });
});

describe('transfers', () => {
  test('reads the demo transfer that consumed the executed quote', async () => {
    const { body } = await emulator.get('/v3/customers/cus_acme/transfers/trf_acme_payout');
    expect(body.data).toMatchObject({ state: 'completed', quoteId: 'quo_acme_executed', amount: '2500.00' });
  });
});
