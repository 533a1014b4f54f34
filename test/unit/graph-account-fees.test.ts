/**
 * `Account.fees` takes the fees from the account record and calls the fees endpoint only for a
 * record without them. The emulator always includes them, so this runs the real schema, resolvers
 * and loaders over an in-memory upstream client that answers one account without `fees`.
 */
import { execute, parse } from 'graphql';
import { expect, it } from 'vitest';
import { createGraphContext } from '../../src/graph/context.ts';
import { createSchema } from '../../src/graph/schema.ts';
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../src/upstream/client.ts';
import { OPEN_CALLER } from '../../src/auth/caller.ts';
import { PLATFORM_SCOPE } from '../../src/upstream/access.ts';
import { createUpstreamContext } from '../../src/upstream/context.ts';

const STAMP = '2025-01-06T09:00:00Z';

function account(id: string, fees?: unknown) {
  return {
    id,
    customerId: 'cus_x',
    type: 'wallet',
    network: 'ethereum',
    origin: 'issued',
    status: 'ready',
    openTaskIds: [],
    currency: 'USDC',
    label: id,
    isDefault: false,
    details: { network: 'ethereum', address: '0x0' },
    ...(fees === undefined ? {} : { fees }),
    balances: [],
    createdAt: STAMP,
    updatedAt: STAMP,
    archivedAt: null,
  };
}

const ANSWERS: Record<string, unknown> = {
  '/v3/customers/cus_x': {
    data: {
      id: 'cus_x',
      type: 'business',
      externalId: 'x',
      displayName: 'X',
      email: null,
      status: 'active',
      createdAt: STAMP,
      updatedAt: STAMP,
    },
  },
  '/v3/customers/cus_x/accounts': {
    data: [
      account('acc_with', { breakdown: { developer: { fixed: '1.00', bips: 5 } } }),
      account('acc_without'),
    ],
    nextCursor: null,
    hasMore: false,
  },
  '/v3/customers/cus_x/accounts/acc_without/fees': {
    data: { accountId: 'acc_without', breakdown: { developer: null } },
  },
};

/** An upstream client that answers from {@link ANSWERS} and records every request. */
function answeringClient(requests: string[]): UpstreamClient {
  return {
    retryPolicy: { maxAttempts: 1, budget: 0, baseDelayMs: 1, maxDelayMs: 1 },
    maxCallsPerOperation: 1_000,
    problemDocsUrl: 'https://docs.platform.test/v3',
    async send(_call, request: UpstreamRequest): Promise<UpstreamResponse> {
      requests.push(`${request.method} ${request.path}`);
      const body = ANSWERS[request.path];
      if (body === undefined) throw new Error(`No answer for ${request.path}`);
      return { status: 200, body, replayed: false };
    },
    close: async () => {},
  };
}

it('Account.fees comes from the record, and from the fees endpoint only for a record without fees', async () => {
  const requests: string[] = [];
  const context = createGraphContext(
    createUpstreamContext(answeringClient(requests), { apiKey: 'sk_test', scope: PLATFORM_SCOPE }),
    OPEN_CALLER,
  );

  const result = await execute({
    schema: createSchema(),
    document: parse(`{
      customer(id: "cus_x") {
        accounts { nodes { id fees { accountId breakdown { developer { fixed bips } } } } }
      }
    }`),
    contextValue: context,
  });

  expect(result.errors).toBeUndefined();
  expect(result.data).toEqual({
    customer: {
      accounts: {
        nodes: [
          {
            id: 'acc_with',
            fees: { accountId: 'acc_with', breakdown: { developer: { fixed: '1.00', bips: 5 } } },
          },
          { id: 'acc_without', fees: { accountId: 'acc_without', breakdown: { developer: null } } },
        ],
      },
    },
  });
  expect(requests).toEqual([
    'GET /v3/customers/cus_x',
    'GET /v3/customers/cus_x/accounts',
    'GET /v3/customers/cus_x/accounts/acc_without/fees',
  ]);
});
