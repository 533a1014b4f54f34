import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { EmulatorHarness } from './http-harness.ts';
import { startEmulator } from './http-harness.ts';

let emulator: EmulatorHarness;
const createdIds: string[] = [];
const createdAt: string[] = [];

beforeAll(async () => {
  emulator = await startEmulator({ data: 'empty' });
  for (let index = 0; index < 30; index++) {
    const response = await emulator.call('POST', '/v3/customers', {
      json: { type: 'individual', externalId: `page-${String(index).padStart(2, '0')}` },
    });
    expect(response.status).toBe(201);
    createdIds.push(response.body.data.id);
    createdAt.push(response.body.data.createdAt);
  }
});
afterAll(() => emulator.close());

async function list(query: string) {
  const response = await emulator.call('GET', `/v3/customers?${query}`);
  expect(response.status).toBe(200);
  return response.body as { data: { id: string }[]; nextCursor: string | null; hasMore: boolean };
}

describe('cursor pagination', () => {
  test('pages follow creation order, with hasMore and nextCursor until the last page', async () => {
    const first = await list('limit=10');
    expect(first.data.map((c) => c.id)).toEqual(createdIds.slice(0, 10));
    expect(first.hasMore).toBe(true);
    expect(first.nextCursor).toEqual(expect.any(String));

    const second = await list(`limit=10&cursor=${first.nextCursor}`);
    expect(second.data.map((c) => c.id)).toEqual(createdIds.slice(10, 20));

    const third = await list(`limit=10&cursor=${second.nextCursor}`);
    expect(third.data.map((c) => c.id)).toEqual(createdIds.slice(20, 30));
    expect(third.hasMore).toBe(false);
    expect(third.nextCursor).toBeNull();
  });

  test('the default page size is 25 and the maximum 100', async () => {
    const defaults = await list('');
    expect(defaults.data).toHaveLength(25);
    expect(defaults.hasMore).toBe(true);
    const max = await list('limit=100');
    expect(max.data).toHaveLength(30);
    expect(max.hasMore).toBe(false);
    expect((await emulator.call('GET', '/v3/customers?limit=101')).status).toBe(400);
  });

  test('pages stay stable when records are added between them', async () => {
    const first = await list('limit=20');
    const added = await emulator.call('POST', '/v3/customers', {
      json: { type: 'individual', externalId: 'added-later' },
    });
    const rest = await list(`limit=100&cursor=${first.nextCursor}`);
    expect(rest.data.map((c) => c.id)).toEqual([...createdIds.slice(20), added.body.data.id]);
  });

  test('updatedSince returns the records updated at or after the timestamp', async () => {
    const page = await list(`limit=100&updatedSince=${encodeURIComponent(createdAt[25]!)}`);
    expect(page.data.map((c) => c.id).slice(0, 5)).toEqual(createdIds.slice(25));
  });

  test('updatedSince finer than a millisecond leaves out a record updated just before it', async () => {
    // Records carry milliseconds; 100 ns after one of them is after it, so it is not "at or after".
    const justAfter = createdAt[25]!.replace(/Z$/, '0001Z');
    const after = await list(`limit=100&updatedSince=${encodeURIComponent(justAfter)}`);
    expect(after.data[0]?.id).toBe(createdIds[26]);
    // Trailing zeros name the same instant, so the record is in.
    const sameInstant = createdAt[25]!.replace(/Z$/, '000Z');
    const same = await list(`limit=100&updatedSince=${encodeURIComponent(sameInstant)}`);
    expect(same.data[0]?.id).toBe(createdIds[25]);
  });

  test('a leap-second updatedSince filters from the next second, never returning everything', async () => {
    const page = await list(`limit=100&updatedSince=${encodeURIComponent('2999-12-31T23:59:60Z')}`);
    expect(page.data).toEqual([]);
  });

  test('a cursor works only with the filter it was issued for', async () => {
    const since = encodeURIComponent(createdAt[0]!);
    const filtered = await list(`limit=5&updatedSince=${since}`);
    const response = await emulator.call('GET', `/v3/customers?limit=5&cursor=${filtered.nextCursor}`);
    expect(response.status).toBe(400);
    expect(response.body.errors).toEqual([
      { parameter: 'cursor', code: 'invalid_value', message: expect.any(String) },
    ]);
    const same = await emulator.call(
      'GET',
      `/v3/customers?limit=5&updatedSince=${since}&cursor=${filtered.nextCursor}`,
    );
    expect(same.status).toBe(200);
  });

  test('a cursor of another list is 400 on the cursor parameter', async () => {
    const customers = await list('limit=1');
    const response = await emulator.call('GET', `/v3/webhooks?cursor=${customers.nextCursor}`);
    expect(response.status).toBe(400);
    expect(response.body.code).toBe('validation_error');
    expect(response.body.errors[0]).toMatchObject({ parameter: 'cursor', code: 'invalid_value' });
  });

  test('a cursor of the same route for another customer is rejected too', async () => {
    const [a, b] = createdIds;
    for (const label of ['First wallet', 'Second wallet']) {
      const account = await emulator.call('POST', `/v3/customers/${a}/accounts`, {
        json: { type: 'wallet', origin: 'issued', network: 'ethereum', currency: 'USDC', label },
      });
      expect(account.status).toBe(201);
    }
    const page = await emulator.call('GET', `/v3/customers/${a}/accounts?limit=1`);
    expect(page.body.hasMore).toBe(true);
    const own = await emulator.call(
      'GET',
      `/v3/customers/${a}/accounts?limit=1&cursor=${page.body.nextCursor}`,
    );
    expect(own.body.data[0].label).toBe('Second wallet');

    const response = await emulator.call('GET', `/v3/customers/${b}/accounts?cursor=${page.body.nextCursor}`);
    expect(response.status).toBe(400);
    expect(response.body.errors[0]).toMatchObject({ parameter: 'cursor', code: 'invalid_value' });
  });

  test('a cursor that was never issued is 400, not a crash', async () => {
    for (const cursor of ['garbage', 'eyJ4IjoxfQ', '%00']) {
      const response = await emulator.call('GET', `/v3/customers?cursor=${cursor}`);
      expect(response.status).toBe(400);
      expect(response.body.errors[0]).toMatchObject({ parameter: 'cursor', code: 'invalid_value' });
    }
  });
});
