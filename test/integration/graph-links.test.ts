/**
 * Ids become links: a record's `openTaskIds`, a submission's `documentIds` and the top-up's credited
 * account are walked in the same query, each target read once through the operation's loaders.
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

describe('ids become links', () => {
  it('walks from a capability to its open tasks, their submissions and the documents submitted, in one query', async () => {
    const result = await stack.query(`{
      capability(customerId: "cus_acme", id: "cap_acme_wire") {
        openTaskIds
        openTasks {
          id
          status
          submissions { nodes { id documents { id } } }
        }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({
      capability: {
        openTaskIds: ['tsk_acme_ownership'],
        openTasks: [
          {
            id: 'tsk_acme_ownership',
            status: expect.any(String),
            submissions: {
              nodes: [{ id: 'tsb_acme_ownership_1', documents: [{ id: 'doc_acme_ownership' }] }],
            },
          },
        ],
      },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/capabilities/{capabilityId}': 1,
      'GET /v3/customers/{customerId}/tasks/{taskId}': 1,
      'GET /v3/customers/{customerId}/tasks/{taskId}/submissions': 1,
      'GET /v3/customers/{customerId}/documents/{documentId}': 1,
    });
  });

  it("reads an application's open tasks under its capability's customer, sharing the task read", async () => {
    const result = await stack.query(`{
      capability(customerId: "cus_acme", id: "cap_acme_wire") {
        openTasks { id }
        applications { id openTasks { id } }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({
      capability: {
        openTasks: [{ id: 'tsk_acme_ownership' }],
        applications: [
          { id: 'app_acme_wire_lead', openTasks: [{ id: 'tsk_acme_ownership' }] },
          { id: 'app_acme_wire_cross_river', openTasks: [] },
        ],
      },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/capabilities/{capabilityId}': 1,
      'GET /v3/customers/{customerId}/tasks/{taskId}': 1,
    });
  });

  it("answers an account's open tasks with no task read when it has none", async () => {
    const result = await stack.query(`{
      account(customerId: "cus_acme", id: "acc_acme_eth") { openTaskIds openTasks { id } }
    }`);

    expect(result.body.data).toEqual({ account: { openTaskIds: [], openTasks: [] } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
    });
  });

  it('returns the credited account after a top-up, read after it so its balance shows the deposit', async () => {
    const before = await stack.query<{ account: { balances: { available: string }[] } }>(
      `{ account(customerId: "cus_globex", id: "acc_globex_eth") { balances { available } } }`,
    );
    const available = Number(before.body.data!.account.balances[0]!.available);
    await stack.resetUpstreamCalls();

    const result = await stack.query<{
      sandboxTopUp: { account: { id: string; balances: { available: string }[] } };
    }>(`mutation {
      sandboxTopUp(input: { idempotencyKey: "links-top-up-1", customerId: "cus_globex", accountId: "acc_globex_eth", amount: "5.00", currency: "USDC" }) {
        account { id balances { available } }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.sandboxTopUp.account.id).toBe('acc_globex_eth');
    expect(Number(result.body.data!.sandboxTopUp.account.balances[0]!.available)).toBe(available + 5);
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/sandbox/accounts/{accountId}/topup': 1,
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
    });
  });

  it("finds a scoped caller's credited account through the owner the top-up looked up", async () => {
    const result = await stack.queryAs<{ sandboxTopUp: { account: { id: string; customerId: string } } }>(
      'globex',
      `mutation {
        sandboxTopUp(input: { idempotencyKey: "links-top-up-2", accountId: "acc_globex_eth", amount: "1.00", currency: "USDC" }) {
          account { id customerId }
        }
      }`,
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.sandboxTopUp.account).toEqual({
      id: 'acc_globex_eth',
      customerId: 'cus_globex',
    });
  });
});
