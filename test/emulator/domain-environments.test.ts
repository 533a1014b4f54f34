import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { LIVE_KEY, startTestEmulator } from './domain-harness.ts';
import type { TestEmulator } from './domain-harness.ts';

const READ_ONLY_KEY = 'sk_sandbox_emulator_readonly';

/** Everything a client can read of the demo data, in one comparable object. */
async function readEverything(emulator: TestEmulator): Promise<unknown> {
  const snapshot: Record<string, unknown> = {};
  const customers = (await emulator.get('/v3/customers')).body.data as { id: string }[];
  snapshot['customers'] = customers;
  snapshot['institutions'] = (await emulator.get('/v3/institutions')).body.data;
  snapshot['webhooks'] = (await emulator.get('/v3/webhooks')).body.data;
  for (const { id } of customers) {
    for (const collection of [
      'accounts',
      'related-parties',
      'capabilities',
      'documents',
      'recipients',
      'tasks',
      'quotes',
      'transfers',
      'rules',
    ]) {
      snapshot[`${id}/${collection}`] = (await emulator.get(`/v3/customers/${id}/${collection}`)).body.data;
    }
  }
  return snapshot;
}

describe('demo data', () => {
  let first: TestEmulator;
  let second: TestEmulator;

  beforeAll(async () => {
    [first, second] = await Promise.all([startTestEmulator(), startTestEmulator()]);
  });

  afterAll(async () => {
    await Promise.all([first.close(), second.close()]);
  });

  test('has three sandbox customers with three accounts each', async () => {
    const customers = (await first.get('/v3/customers')).body.data;
    expect(
      customers.map((customer: { id: string; type: string; displayName: string }) => [
        customer.id,
        customer.type,
        customer.displayName,
      ]),
    ).toEqual([
      ['cus_acme', 'business', 'Acme Robotics Ltd'],
      ['cus_ada', 'individual', 'Ada Lovelace'],
      ['cus_globex', 'business', 'Globex Trading LLC'],
    ]);
    for (const { id } of customers) {
      expect((await first.get(`/v3/customers/${id}/accounts`)).body.data).toHaveLength(3);
    }
  });

  test('is the same, ids, values and timestamps, on every start', async () => {
    const snapshot = await readEverything(first);
    expect(await readEverything(second)).toEqual(snapshot);
    expect(JSON.stringify(snapshot)).not.toContain('whsec_');
  });

  test('comes back unchanged after changes and a reset', async () => {
    const before = await readEverything(first);
    await first.call('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '5', currency: 'USDC' },
    });
    await first.call('DELETE', '/v3/customers/cus_acme/related-parties/rp_acme_cfo');
    expect(await readEverything(first)).not.toEqual(before);
    await first.reset();
    expect(await readEverything(first)).toEqual(before);
  });

  test('the empty data set keeps only the institutions', async () => {
    await second.reset('empty');
    expect((await second.get('/v3/customers')).body.data).toEqual([]);
    expect((await second.get('/v3/webhooks')).body.data).toEqual([]);
    expect((await second.get('/v3/institutions')).body.data).toHaveLength(3);
    await second.reset('demo');
  });
});

describe('environments', () => {
  let emulator: TestEmulator;

  beforeAll(async () => {
    emulator = await startTestEmulator();
  });

  afterAll(async () => {
    await emulator.close();
  });

  test('a live key lists only live customers, and a sandbox key only sandbox ones', async () => {
    const live = (await emulator.get('/v3/customers', LIVE_KEY)).body.data;
    expect(live.map((customer: { id: string }) => customer.id)).toEqual(['cus_live_northwind']);
    const sandbox = (await emulator.get('/v3/customers')).body.data;
    expect(sandbox.map((customer: { id: string }) => customer.id)).not.toContain('cus_live_northwind');
    expect((await emulator.get('/v3/webhooks', LIVE_KEY)).body.data).toEqual([]);
  });

  test('ids of one environment answer 404 in the other', async () => {
    const fromLive = await emulator.get('/v3/customers/cus_acme/accounts/acc_acme_eth', LIVE_KEY);
    expect(fromLive.status).toBe(404);
    expect(fromLive.body.code).toBe('not_found');
    const fromSandbox = await emulator.get(
      '/v3/customers/cus_live_northwind/accounts/acc_live_northwind_eth',
    );
    expect(fromSandbox.status).toBe(404);
    const party = await emulator.get('/v3/customers/cus_acme/related-parties', LIVE_KEY);
    expect(party.status).toBe(404);
    expect(party.body.code).toBe('customer_not_found');
    expect(
      (await emulator.get('/v3/customers/cus_live_northwind/accounts/acc_live_northwind_eth', LIVE_KEY)).body
        .data.balances,
    ).toEqual([{ currency: 'USDC', available: '50000.00', pending: '0.00' }]);
  });

  test('externalId is unique per environment', async () => {
    const body = {
      type: 'individual',
      externalId: 'user-4711',
      displayName: 'Grace Chen',
      email: 'grace@example.test',
    };
    const created = await emulator.call('POST', '/v3/customers', { body });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      id: expect.stringMatching(/^cus_/),
      ...body,
      status: 'active',
    });

    const duplicate = await emulator.call('POST', '/v3/customers', {
      body: { ...body, displayName: 'Someone else' },
    });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.code).toBe('conflict');
    expect(duplicate.body.statusReason).toMatchObject({ code: 'external_id_in_use', retryable: false });

    const inLive = await emulator.call('POST', '/v3/customers', { body, key: LIVE_KEY });
    expect(inLive.status).toBe(201);
    expect(inLive.body.data.id).not.toBe(created.body.data.id);
  });

  test('a created customer without displayName shows its externalId, and email null', async () => {
    const { body } = await emulator.call('POST', '/v3/customers', {
      body: { type: 'business', externalId: 'biz-9' },
    });
    expect(body.data).toMatchObject({ displayName: 'biz-9', email: null });
  });

  test('a read-only key reads but cannot write', async () => {
    expect((await emulator.get('/v3/customers/cus_acme', READ_ONLY_KEY)).status).toBe(200);
    const write = await emulator.call('POST', '/v3/customers', {
      body: { type: 'business', externalId: 'ro-1' },
      key: READ_ONLY_KEY,
    });
    expect(write.status).toBe(403);
    expect(write.body.code).toBe('forbidden');
  });
});
