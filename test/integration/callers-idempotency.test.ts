/**
 * Idempotency keys between callers. Every caller of the facade reaches the upstream with the same
 * API key, and the upstream keeps Idempotency-Keys per API key: a caller's key must stay its own,
 * so another caller can neither block a change by using the same key first, nor learn that the key
 * was used. A caller's own retries still replay, and its own misuse of a key is still refused.
 */
import { describe, expect, test } from 'vitest';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

const setFees = (customerId: string, accountId: string, bips: number, idempotencyKey: string) =>
  `mutation { setAccountFees(input: {
    customerId: "${customerId}", accountId: "${accountId}"
    breakdown: { developer: { fixed: "1.00", bips: ${bips} } }, idempotencyKey: "${idempotencyKey}"
  }) { replayed idempotencyKey } }`;

const codes = (result: GraphQLResult) => (result.body.errors ?? []).map((error) => error.extensions?.code);

describe('an Idempotency-Key another caller has used', () => {
  test('neither blocks nor reveals anything: each caller’s keys are its own', async () => {
    const acme = await stack.queryAs('acme', setFees('cus_acme', 'acc_acme_eth', 10, 'order-42'));
    const globex = await stack.queryAs('globex', setFees('cus_globex', 'acc_globex_eth', 10, 'order-42'));

    expect(acme.body).toEqual({ data: { setAccountFees: { replayed: false, idempotencyKey: 'order-42' } } });
    expect(globex.body).toEqual({
      data: { setAccountFees: { replayed: false, idempotencyKey: 'order-42' } },
    });
  });

  test('a caller’s identical retry still replays, and its own key reused for another change is refused', async () => {
    const first = await stack.queryAs('acme', setFees('cus_acme', 'acc_acme_eth', 20, 'order-43'));
    const retry = await stack.queryAs('acme', setFees('cus_acme', 'acc_acme_eth', 20, 'order-43'));
    const reused = await stack.queryAs('acme', setFees('cus_acme', 'acc_acme_eth', 30, 'order-43'));

    expect(first.body).toEqual({ data: { setAccountFees: { replayed: false, idempotencyKey: 'order-43' } } });
    expect(retry.body).toEqual({ data: { setAccountFees: { replayed: true, idempotencyKey: 'order-43' } } });
    expect(codes(reused)).toEqual(['IDEMPOTENCY_CONFLICT']);
  });

  test('a key the upstream would refuse is still refused by it', async () => {
    const tooLong = await stack.queryAs('acme', setFees('cus_acme', 'acc_acme_eth', 40, 'k'.repeat(256)));

    expect(codes(tooLong)).toEqual(['BAD_USER_INPUT']);
    expect(tooLong.body.errors?.[0]?.path).toEqual(['setAccountFees']);
  });
});
