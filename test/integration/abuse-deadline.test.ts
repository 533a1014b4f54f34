/**
 * One time budget per operation (OPERATION_TIMEOUT_MS): upstream calls still running when it runs
 * out are cancelled, their fields answer UPSTREAM_TIMEOUT, and what was answered in time is kept.
 */
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack({ env: { OPERATION_TIMEOUT_MS: '1500' } });

describe('the operation deadline', () => {
  test('a stalled read is cancelled at the deadline; the rest of the answer is kept', async () => {
    await stack.setFaults({ rules: [{ route: 'getAccount', kind: 'stall', rate: 1 }] });

    const result = await stack.query(`{
      customer(id: "cus_acme") { id displayName }
      account(customerId: "cus_acme", id: "acc_acme_polygon") { id }
    }`);

    expect(result.status).toBe(200);
    expect(result.body.data).toEqual({
      customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' },
      account: null,
    });
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message: 'The operation ran out of time before the upstream API answered.',
        path: ['account'],
        extensions: { code: 'UPSTREAM_TIMEOUT', requestId: expect.any(String) },
      }),
    ]);
    // Cancelled once, never retried: the stalled read was sent exactly once.
    expect(await stack.upstreamCalls()).toEqual({
      total: 2,
      byRoute: {
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
      },
    });
  });

  test('retries stop at the deadline: nothing is sent after it', async () => {
    // Every attempt stalls; a retry would be sent only if the deadline left time for one.
    await stack.setFaults({ rules: [{ route: 'getCustomer', kind: 'stall', rate: 1 }] });

    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_TIMEOUT');
    expect((await stack.upstreamCalls()).total).toBe(1);
  });

  test('the next operation has a deadline of its own', async () => {
    const result = await stack.query('{ customer(id: "cus_acme") { id } }');

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });
});
