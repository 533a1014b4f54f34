/**
 * The contract operations that had no GraphQL field before: opening an account, applying for a
 * capability, executing a quote and reading one task submission, each against the emulator with
 * the upstream calls it makes counted.
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

const CREATE_ACCOUNT = /* GraphQL */ `
  mutation Open($key: String!) {
    createAccount(
      input: {
        idempotencyKey: $key
        customerId: "cus_acme"
        type: "wallet"
        origin: "issued"
        network: "ethereum"
        currency: "USDC"
        label: "Treasury"
      }
    ) {
      account {
        id
        customerId
        type
        origin
        status
        label
        customer {
          id
        }
      }
      idempotencyKey
      replayed
    }
  }
`;

const EXECUTE_QUOTE = /* GraphQL */ `
  mutation Execute($key: String!, $quoteId: ID!) {
    executeQuote(input: { idempotencyKey: $key, customerId: "cus_acme", quoteId: $quoteId }) {
      transfer {
        id
        state
      }
      quote {
        id
        status
        transfer {
          id
        }
      }
      idempotencyKey
      replayed
    }
  }
`;

describe('createAccount', () => {
  it('opens a wallet, and a retry with the same key replays it without opening a second', async () => {
    const first = await stack.query<{ createAccount: Record<string, unknown> & { account: { id: string } } }>(
      CREATE_ACCOUNT,
      { key: 'contract-account-1' },
    );

    expect(first.body.errors).toBeUndefined();
    expect(first.body.data!.createAccount).toEqual({
      account: {
        id: expect.stringMatching(/^acc_/),
        customerId: 'cus_acme',
        type: 'wallet',
        origin: 'issued',
        status: expect.any(String),
        label: 'Treasury',
        customer: { id: 'cus_acme' },
      },
      idempotencyKey: 'contract-account-1',
      replayed: false,
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/accounts': 1,
      'GET /v3/customers/{customerId}': 1,
    });

    await stack.resetUpstreamCalls();
    const retry = await stack.query<{ createAccount: { account: { id: string }; replayed: boolean } }>(
      CREATE_ACCOUNT,
      { key: 'contract-account-1' },
    );
    expect(retry.body.data!.createAccount.replayed).toBe(true);
    expect(retry.body.data!.createAccount.account.id).toBe(first.body.data!.createAccount.account.id);

    const list = await stack.query<{ customer: { accounts: { nodes: { label: string }[] } } }>(
      `{ customer(id: "cus_acme") { accounts(first: 100) { nodes { label } } } }`,
    );
    expect(list.body.data!.customer.accounts.nodes.filter((node) => node.label === 'Treasury')).toHaveLength(
      1,
    );
  });
});

describe('createCapability', () => {
  it('applies for a capability, with one upstream call', async () => {
    const result = await stack.query<{ createCapability: Record<string, unknown> }>(`mutation {
      createCapability(input: { idempotencyKey: "contract-capability-1", customerId: "cus_ada", method: "wire", accountType: "pooled" }) {
        capability { id customerId method accountType status customer { id } } idempotencyKey replayed
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!.createCapability).toEqual({
      capability: {
        id: expect.stringMatching(/^cap_/),
        customerId: 'cus_ada',
        method: 'wire',
        accountType: 'pooled',
        status: expect.any(String),
        customer: { id: 'cus_ada' },
      },
      idempotencyKey: 'contract-capability-1',
      replayed: false,
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/capabilities': 1,
      'GET /v3/customers/{customerId}': 1,
    });
  });

  it('refuses a second application for the same pair as CONFLICT capability_exists, with the key', async () => {
    const result = await stack.query(`mutation {
      createCapability(input: { idempotencyKey: "contract-capability-2", customerId: "cus_acme", method: "ach", accountType: "pooled" }) {
        capability { id }
      }
    }`);

    expect(result.body.data).toEqual({ createCapability: null });
    expect(result.body.errors![0]).toMatchObject({
      path: ['createCapability'],
      extensions: {
        code: 'CONFLICT',
        idempotencyKey: 'contract-capability-2',
        problem: { statusReason: { code: 'capability_exists', actor: 'DEVELOPER' } },
      },
    });
  });
});

describe('executeQuote', () => {
  it('executes an open quote into a transfer and reads the quote after it', async () => {
    const result = await stack.query<{
      executeQuote: Record<string, unknown> & { transfer: { id: string } };
    }>(EXECUTE_QUOTE, { key: 'contract-quote-1', quoteId: 'quo_acme_open' });

    expect(result.body.errors).toBeUndefined();
    const transferId = result.body.data!.executeQuote.transfer.id;
    expect(result.body.data!.executeQuote).toEqual({
      transfer: { id: expect.stringMatching(/^trf_/), state: expect.any(String) },
      quote: { id: 'quo_acme_open', status: 'executed', transfer: { id: transferId } },
      idempotencyKey: 'contract-quote-1',
      replayed: false,
    });
    // The quote is read once after the execution; its transfer comes from the loader the
    // execution primed, with no read.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/quotes/{quoteId}/execute': 1,
      'GET /v3/customers/{customerId}/quotes/{quoteId}': 1,
    });

    await stack.resetUpstreamCalls();
    const again = await stack.query(EXECUTE_QUOTE, { key: 'contract-quote-2', quoteId: 'quo_acme_open' });
    expect(again.body.data).toEqual({ executeQuote: null });
    expect(again.body.errors![0]).toMatchObject({
      path: ['executeQuote'],
      extensions: {
        code: 'CONFLICT',
        idempotencyKey: 'contract-quote-2',
        problem: { code: 'quote_already_executed', transferId },
      },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'POST /v3/customers/{customerId}/quotes/{quoteId}/execute': 1,
    });
  });
});

describe('taskSubmission', () => {
  it('reads one submission with one upstream call, and its task through the loaders', async () => {
    const result = await stack.query(`{
      taskSubmission(customerId: "cus_acme", taskId: "tsk_acme_ownership", id: "tsb_acme_ownership_1") {
        id customerId taskId status documentIds task { id }
      }
    }`);

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({
      taskSubmission: {
        id: 'tsb_acme_ownership_1',
        customerId: 'cus_acme',
        taskId: 'tsk_acme_ownership',
        status: 'submitted',
        documentIds: ['doc_acme_ownership'],
        task: { id: 'tsk_acme_ownership' },
      },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/tasks/{taskId}/submissions/{submissionId}': 1,
      'GET /v3/customers/{customerId}/tasks/{taskId}': 1,
    });
  });

  it('answers NOT_FOUND for a submission that does not exist', async () => {
    const result = await stack.query(`{
      taskSubmission(customerId: "cus_acme", taskId: "tsk_acme_ownership", id: "tsb_nope") { id }
    }`);

    expect(result.body.data).toEqual({ taskSubmission: null });
    expect(result.body.errors![0]!.extensions!.code).toBe('NOT_FOUND');
  });

  it("answers a scoped caller's read of another customer's submission without an upstream call", async () => {
    const result = await stack.queryAs(
      'globex',
      `{ taskSubmission(customerId: "cus_acme", taskId: "tsk_acme_ownership", id: "tsb_acme_ownership_1") { id } }`,
    );

    expect(result.body.data).toEqual({ taskSubmission: null });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
