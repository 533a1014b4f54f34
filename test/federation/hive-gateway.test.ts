import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGateway, startHiveGateway } from '../support/harness/gateways.ts';

describe('the same supergraph under Hive Gateway', () => {
  let federation: FederationStack;
  let gateway: RunningGateway;

  beforeAll(async () => {
    federation = await startFederationStack();
    gateway = await startHiveGateway(federation.supergraphSdl);
  });
  afterAll(async () => {
    await gateway?.close();
    await federation?.close();
  });
  beforeEach(async () => {
    await federation.stack.resetUpstreamCalls();
  });

  test('joins facade customers and accounts with support notes, one read per distinct resource', async () => {
    const { status, body } = await postGraphQL(
      gateway.url,
      `{
        customer(id: "cus_acme") {
          displayName
          openSupportNoteCount
          supportNotes { id account { id balances { available } fees { breakdown { developer { bips } } } } }
        }
      }`,
    );
    expect(status).toBe(200);
    expect(body).toEqual({
      data: {
        customer: {
          displayName: 'Acme Robotics Ltd',
          openSupportNoteCount: 2,
          supportNotes: [
            {
              id: 'note_003',
              account: {
                id: 'acc_acme_polygon',
                balances: [{ available: '0.00' }],
                fees: { breakdown: { developer: null } },
              },
            },
            {
              id: 'note_002',
              account: {
                id: 'acc_acme_eth',
                balances: [{ available: '12500.00' }],
                fees: { breakdown: { developer: { bips: 25 } } },
              },
            },
            {
              id: 'note_001',
              account: {
                id: 'acc_acme_eth',
                balances: [{ available: '12500.00' }],
                fees: { breakdown: { developer: { bips: 25 } } },
              },
            },
            { id: 'note_004', account: null },
          ],
        },
      },
    });
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 3,
      byRoute: {
        'GET /v3/customers/{customerId}': 1,
        'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
      },
    });
  });

  test('keeps extensions.code and extensions.problem of a facade error', async () => {
    const { status, body } = await postGraphQL(
      gateway.url,
      '{ account(customerId: "cus_acme", id: "acc_does_not_exist") { id label } }',
      undefined,
      { 'x-request-id': 'hive-gateway-not-found' },
    );
    expect(status).toBe(200);
    expect(body.data).toEqual({ account: null });
    expect(body.errors).toHaveLength(1);
    expect(body.errors?.[0]).toMatchObject({
      message: 'No account with id acc_does_not_exist exists.',
      path: ['account'],
      extensions: {
        code: 'NOT_FOUND',
        problem: {
          status: 404,
          code: 'not_found',
          detail: 'No account with id acc_does_not_exist exists.',
          correlationId: 'hive-gateway-not-found',
        },
      },
    });
  });
});
