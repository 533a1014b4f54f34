/**
 * Mutations of one document are independent: a failing mutation leaves the payloads of those that
 * ran in `data` (payload fields are nullable), and the key in a failed mutation's error lets the
 * client retry the whole document without executing anything twice.
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

const TOP_UP_THEN_ARCHIVE = /* GraphQL */ `
  mutation TopUpThenArchive($topUpKey: String!, $archiveKey: String!) {
    sandboxTopUp(
      input: { idempotencyKey: $topUpKey, accountId: "acc_globex_eth", amount: "10.00", currency: "USDC" }
    ) {
      topUp {
        id
      }
      idempotencyKey
      replayed
    }
    archiveAccount(
      input: { idempotencyKey: $archiveKey, customerId: "cus_globex", accountId: "acc_globex_external" }
    ) {
      account {
        id
        status
      }
      idempotencyKey
      replayed
    }
  }
`;

const ARCHIVE_ROUTE = 'DELETE /v3/customers/{customerId}/accounts/{accountId}';
const TOP_UP_ROUTE = 'POST /v3/sandbox/accounts/{accountId}/topup';

interface Payload {
  idempotencyKey: string;
  replayed: boolean;
  topUp?: { id: string };
  account?: { id: string; status: string };
}

async function globexEthAvailable(): Promise<string> {
  const result = await stack.query<{ account: { balances: { available: string }[] } }>(
    `{ account(customerId: "cus_globex", id: "acc_globex_eth") { balances { available } } }`,
  );
  return result.body.data!.account.balances[0]!.available;
}

describe('independent mutations in one document', () => {
  it('keeps the first payload when the second fails, and a retry with the keys executes nothing twice', async () => {
    const before = await globexEthAvailable();
    await stack.setFaults({ rules: [{ route: ARCHIVE_ROUTE, kind: 'request_failed', rate: 1 }] });
    await stack.resetUpstreamCalls();

    const failed = await stack.query<Record<string, Payload | null>>(TOP_UP_THEN_ARCHIVE, {
      topUpKey: 'independent-top-up-1',
      archiveKey: 'independent-archive-1',
    });

    expect(failed.status).toBe(200);
    expect(failed.body.data).toEqual({
      sandboxTopUp: {
        topUp: { id: expect.stringMatching(/^tu_/) },
        idempotencyKey: 'independent-top-up-1',
        replayed: false,
      },
      archiveAccount: null,
    });
    expect(failed.body.errors).toHaveLength(1);
    const error = failed.body.errors![0]!;
    expect(error.path).toEqual(['archiveAccount']);
    expect(error.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      idempotencyKey: 'independent-archive-1',
    });
    const firstCalls = await stack.upstreamCalls();
    expect(firstCalls.byRoute[TOP_UP_ROUTE]).toBe(1);
    // The upstream client retried the failing archive with the same key: three attempts.
    expect(firstCalls.byRoute[ARCHIVE_ROUTE]).toBe(3);

    await stack.clearFaults();
    await stack.resetUpstreamCalls();
    const retried = await stack.query<Record<string, Payload | null>>(TOP_UP_THEN_ARCHIVE, {
      topUpKey: failed.body.data!.sandboxTopUp!.idempotencyKey,
      archiveKey: error.extensions!.idempotencyKey as string,
    });

    expect(retried.body.errors).toBeUndefined();
    expect(retried.body.data).toEqual({
      sandboxTopUp: {
        topUp: failed.body.data!.sandboxTopUp!.topUp,
        idempotencyKey: 'independent-top-up-1',
        replayed: true,
      },
      archiveAccount: {
        account: { id: 'acc_globex_external', status: 'archived' },
        idempotencyKey: 'independent-archive-1',
        replayed: false,
      },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [TOP_UP_ROUTE]: 1, [ARCHIVE_ROUTE]: 1 });
    // The top-up was executed once: the balance rose by 10.00, not 20.00.
    expect(Number(await globexEthAvailable())).toBe(Number(before) + 10);
  });

  it('answers a null payload, not a null data, for a refused mutation next to one that ran', async () => {
    const result = await stack.query<Record<string, Payload | null>>(/* GraphQL */ `
      mutation {
        sandboxTopUp(
          input: {
            idempotencyKey: "independent-top-up-2"
            accountId: "acc_globex_eth"
            amount: "1.00"
            currency: "USDC"
          }
        ) {
          idempotencyKey
          replayed
        }
        archiveAccount(
          input: { idempotencyKey: "independent-archive-2", customerId: "cus_globex", accountId: "acc_nope" }
        ) {
          idempotencyKey
        }
      }
    `);

    expect(result.body.data).toEqual({
      sandboxTopUp: { idempotencyKey: 'independent-top-up-2', replayed: false },
      archiveAccount: null,
    });
    expect(result.body.errors![0]).toMatchObject({
      path: ['archiveAccount'],
      extensions: { code: 'NOT_FOUND', idempotencyKey: 'independent-archive-2' },
    });
  });
});

describe('one spelling per concept', () => {
  it('forces a capability with the spelling it reads back, and refuses another status before any upstream call', async () => {
    await stack.resetUpstreamCalls();
    const refused = await stack.query(`mutation {
      sandboxSetCapabilityStatus(input: { idempotencyKey: "spelling-1", customerId: "cus_globex", capabilityId: "cap_globex_ach", status: "READY" }) { replayed }
    }`);

    expect(refused.body.data).toEqual({ sandboxSetCapabilityStatus: null });
    expect(refused.body.errors![0]).toMatchObject({
      message: 'A sandbox capability can be forced only to "ready", "rejected", "restricted"; got "READY".',
      extensions: { code: 'BAD_USER_INPUT', idempotencyKey: 'spelling-1' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);

    const forced = await stack.query<{
      sandboxSetCapabilityStatus: { capability: { status: string } };
    }>(`mutation {
      sandboxSetCapabilityStatus(input: { idempotencyKey: "spelling-2", customerId: "cus_globex", capabilityId: "cap_globex_ach", status: "restricted" }) { capability { status } }
    }`);
    expect(forced.body.data!.sandboxSetCapabilityStatus.capability.status).toBe('restricted');
  });

  it('creates a related party with the partyType spelling it reads back, and refuses another before any upstream call', async () => {
    await stack.resetUpstreamCalls();
    const refused = await stack.query(`mutation {
      createRelatedParty(input: { idempotencyKey: "spelling-3", customerId: "cus_acme", partyType: "PERSON", roles: [OTHER],
        person: { firstName: "Mary", lastName: "Jackson", residenceCountry: "US" } }) { relatedParty { id } }
    }`);

    expect(refused.body.errors![0]).toMatchObject({
      message: `A related party's partyType is "person" or "entity"; got "PERSON".`,
      extensions: { code: 'BAD_USER_INPUT', idempotencyKey: 'spelling-3' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('spells statusReason.actor in extensions.problem as the typed field does', async () => {
    const result = await stack.query(`mutation {
      createRelatedParty(input: { idempotencyKey: "spelling-4", customerId: "cus_ada", partyType: "person", roles: [OTHER],
        person: { firstName: "Mary", lastName: "Jackson", residenceCountry: "US" } }) { relatedParty { id } }
    }`);

    expect(result.body.errors![0]!.extensions).toMatchObject({
      code: 'CONFLICT',
      problem: { statusReason: { code: 'individual_customer', actor: 'DEVELOPER' } },
    });
  });

  it('selects displayName on a customer and a related party in one _entities selection', async () => {
    const result = await stack.query<{ _entities: ({ displayName: string | null } | null)[] }>(
      `query($representations: [_Any!]!) {
        _entities(representations: $representations) {
          ... on Customer { displayName }
          ... on RelatedParty { displayName }
        }
      }`,
      {
        representations: [
          { __typename: 'Customer', id: 'cus_acme' },
          { __typename: 'RelatedParty', customerId: 'cus_acme', id: 'rp_acme_ceo' },
        ],
      },
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data!._entities).toHaveLength(2);
    expect(result.body.data!._entities[0]!.displayName).toEqual(expect.any(String));
  });
});

describe('traps closed', () => {
  it('refuses setAccountFees with an empty breakdown, before any upstream call', async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.query(`mutation {
      setAccountFees(input: { idempotencyKey: "traps-1", customerId: "cus_acme", accountId: "acc_acme_polygon", breakdown: {} }) { replayed }
    }`);

    expect(result.body.data).toEqual({ setAccountFees: null });
    expect(result.body.errors![0]).toMatchObject({
      message:
        'The breakdown names no fee: give `developer` a fee to set it, or `developer: null` to remove it.',
      extensions: { code: 'BAD_USER_INPUT', idempotencyKey: 'traps-1' },
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('refuses an empty id in a literal or a variable as BAD_USER_INPUT, with no upstream call', async () => {
    await stack.resetUpstreamCalls();
    const literal = await stack.query('{ customer(id: "") { id } }');
    // The same text again: the document is cached, its empty literal is still refused.
    const again = await stack.query('{ customer(id: "") { id } }');
    const variable = await stack.query(
      'query ($id: ID!) { account(customerId: "cus_acme", id: $id) { id } }',
      {
        id: '',
      },
    );

    expect(literal.status).toBe(400);
    expect(literal.body.errors).toEqual([
      expect.objectContaining({
        message: 'An ID in argument "id" is empty; no id is empty.',
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    expect(again.status).toBe(400);
    expect(again.body.errors).toEqual(literal.body.errors);
    expect(variable.status).toBe(400);
    expect(variable.body.errors).toEqual([
      expect.objectContaining({
        message: 'Variable "$id" is an empty ID; no id is empty.',
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  it('answers a subscription sent over HTTP POST with a 400 that names the WebSocket transport', async () => {
    await stack.resetUpstreamCalls();
    const result = await stack.query(
      'subscription { accountChanged(customerId: "cus_acme") { __typename } }',
    );

    expect(result.status).toBe(400);
    expect(result.body.data).toBeUndefined();
    expect(result.body.errors).toEqual([
      expect.objectContaining({
        message:
          "Subscriptions are not served by POST /graphql with Accept: application/json: connect a graphql-ws client (WebSocket) to /graphql, POST the subscription to /graphql with Accept: multipart/mixed;subscriptionSpec=1.0 (Apollo Client's HttpLink does), to /graphql/stream with Accept: text/event-stream (Server-Sent Events), or to /graphql with Accept: application/json;callbackSpec=1.0 (and `extensions.subscription`, as a gateway does).",
        extensions: { code: 'BAD_REQUEST' },
      }),
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
