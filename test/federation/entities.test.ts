import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type Stack, startStack } from '../support/harness/stack.ts';

/** What a gateway sends the facade to resolve entities: one `_entities` call, many representations. */
const ENTITIES = /* GraphQL */ `
  query ($representations: [_Any!]!) {
    _entities(representations: $representations) {
      __typename
      ... on Customer {
        id
        displayName
      }
      ... on Account {
        id
        customerId
        label
        balances {
          currency
          available
        }
        fees {
          breakdown {
            developer {
              fixed
              bips
            }
          }
        }
      }
      ... on Capability {
        id
        customerId
        method
        status
      }
      ... on RelatedParty {
        id
        customerId
      }
      ... on CustomerDocument {
        id
        customerId
      }
    }
  }
`;

const ACCOUNT_READ = 'GET /v3/customers/{customerId}/accounts/{accountId}';
const CUSTOMER_READ = 'GET /v3/customers/{customerId}';
const CAPABILITY_READ = 'GET /v3/customers/{customerId}/capabilities/{capabilityId}';

describe('_entities on the facade', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.close();
  });
  beforeEach(async () => {
    await stack.resetUpstreamCalls();
  });

  test('resolves many representations of the same and different entities with one read per distinct resource', async () => {
    const representations = [
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
      { __typename: 'Customer', id: 'cus_acme' },
      { __typename: 'Account', customerId: 'cus_ada', id: 'acc_ada_sol' },
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
      { __typename: 'Capability', customerId: 'cus_acme', id: 'cap_acme_ach' },
      { __typename: 'Customer', id: 'cus_ada' },
      { __typename: 'Capability', customerId: 'cus_acme', id: 'cap_acme_ach' },
      { __typename: 'Account', customerId: 'cus_globex', id: 'acc_globex_eth' },
      { __typename: 'Customer', id: 'cus_acme' },
      { __typename: 'Capability', customerId: 'cus_globex', id: 'cap_globex_ach' },
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
    ];
    const { status, body } = await stack.query(ENTITIES, { representations });

    expect(status).toBe(200);
    expect(body.errors).toBeUndefined();
    const entities = body.data?._entities as Record<string, unknown>[];
    // In the order of the representations, each with its own data.
    expect(entities.map((entity) => `${String(entity.__typename)}:${String(entity.id)}`)).toEqual([
      'Account:acc_acme_eth',
      'Customer:cus_acme',
      'Account:acc_ada_sol',
      'Account:acc_acme_eth',
      'Capability:cap_acme_ach',
      'Customer:cus_ada',
      'Capability:cap_acme_ach',
      'Account:acc_globex_eth',
      'Customer:cus_acme',
      'Capability:cap_globex_ach',
      'Account:acc_acme_eth',
    ]);
    expect(entities[0]).toEqual({
      __typename: 'Account',
      id: 'acc_acme_eth',
      customerId: 'cus_acme',
      label: 'Acme treasury (Ethereum)',
      balances: [{ currency: 'USDC', available: '12500.00' }],
      fees: { breakdown: { developer: { fixed: '0.50', bips: 25 } } },
    });
    expect(entities[1]).toEqual({ __typename: 'Customer', id: 'cus_acme', displayName: 'Acme Robotics Ltd' });
    expect(entities[9]).toEqual({
      __typename: 'Capability',
      id: 'cap_globex_ach',
      customerId: 'cus_globex',
      method: 'ach',
      status: 'restricted',
    });

    // 3 distinct accounts, 2 customers, 2 capabilities; fees come with the account record.
    expect(await stack.upstreamCalls()).toEqual({
      total: 7,
      byRoute: { [ACCOUNT_READ]: 3, [CUSTOMER_READ]: 2, [CAPABILITY_READ]: 2 },
    });
  });

  test('answers an unknown or archived entity with null and a NOT_FOUND error at its path, resolving the others', async () => {
    const representations = [
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_does_not_exist' },
      { __typename: 'Customer', id: 'cus_does_not_exist' },
      // Archived: the upstream keeps both for compliance but answers 404 to reads of them.
      { __typename: 'RelatedParty', customerId: 'cus_acme', id: 'rp_acme_former_director' },
      { __typename: 'CustomerDocument', customerId: 'cus_acme', id: 'doc_acme_old_statement' },
      { __typename: 'Customer', id: 'cus_globex' },
      { __typename: 'Account', customerId: 'cus_acme', id: 'acc_does_not_exist' },
    ];
    const { status, body } = await stack.query(ENTITIES, { representations });

    expect(status).toBe(200);
    const entities = body.data?._entities as (Record<string, unknown> | null)[];
    expect(entities).toHaveLength(7);
    expect(entities[0]).toMatchObject({ __typename: 'Account', id: 'acc_acme_eth' });
    expect(entities[5]).toEqual({
      __typename: 'Customer',
      id: 'cus_globex',
      displayName: 'Globex Trading LLC',
    });
    for (const index of [1, 2, 3, 4, 6]) expect(entities[index]).toBeNull();

    const errors = [...(body.errors ?? [])].sort((a, b) => Number(a.path?.[1]) - Number(b.path?.[1]));
    expect(errors.map((error) => [error.path, error.extensions?.code])).toEqual([
      [['_entities', 1], 'NOT_FOUND'],
      [['_entities', 2], 'NOT_FOUND'],
      [['_entities', 3], 'NOT_FOUND'],
      [['_entities', 4], 'NOT_FOUND'],
      [['_entities', 6], 'NOT_FOUND'],
    ]);
    for (const error of errors) {
      expect(error.extensions?.problem).toMatchObject({ status: 404, code: 'not_found' });
    }

    // The unknown account is read once although two representations name it.
    expect(await stack.upstreamCalls()).toEqual({
      total: 6,
      byRoute: {
        [ACCOUNT_READ]: 2,
        [CUSTOMER_READ]: 2,
        'GET /v3/customers/{customerId}/related-parties/{relatedPartyId}': 1,
        'GET /v3/customers/{customerId}/documents/{documentId}': 1,
      },
    });
  });

  test('refuses a representation without its key fields at its own index, without an upstream call', async () => {
    const { status, body } = await stack.query(ENTITIES, {
      representations: [
        { __typename: 'Account', id: 'acc_acme_eth' },
        { __typename: 'Customer', id: 'cus_ada' },
        { __typename: 'Capability', customerId: 42, id: 'cap_acme_ach' },
        { __typename: 'Account', customerId: '', id: 'acc_acme_eth' },
      ],
    });
    expect(status).toBe(200);
    expect(body.data?._entities).toEqual([
      null,
      { __typename: 'Customer', id: 'cus_ada', displayName: 'Ada Lovelace' },
      null,
      null,
    ]);
    expect(body.errors?.map((error) => [error.path, error.extensions?.code, error.message])).toEqual([
      [
        ['_entities', 0],
        'BAD_USER_INPUT',
        'A representation of Account needs `customerId` and `id`, each a non-empty string.',
      ],
      [
        ['_entities', 2],
        'BAD_USER_INPUT',
        'A representation of Capability needs `customerId` and `id`, each a non-empty string.',
      ],
      [
        ['_entities', 3],
        'BAD_USER_INPUT',
        'A representation of Account needs `customerId` and `id`, each a non-empty string.',
      ],
    ]);
    expect(await stack.upstreamCalls()).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
  });

  test('answers an unknown __typename at its own index and keeps serving while other reads fail', async () => {
    // Before each representation was answered on its own, the unknown type failed the whole list
    // and left the failing account read unawaited: an unhandled rejection that ended the process.
    const { status, body } = await stack.query(ENTITIES, {
      representations: [
        { __typename: 'Account', customerId: 'cus_acme', id: 'acc_does_not_exist' },
        { __typename: 'NotAnEntity', id: 'x' },
        { __typename: 'SupportNote', id: 'note_001' },
        { __typename: 'Customer', id: 'cus_globex' },
      ],
    });
    expect(status).toBe(200);
    expect(body.data?._entities).toEqual([
      null,
      null,
      null,
      { __typename: 'Customer', id: 'cus_globex', displayName: 'Globex Trading LLC' },
    ]);
    expect(body.errors?.map((error) => [error.path, error.extensions?.code, error.message])).toEqual([
      [['_entities', 1], 'BAD_USER_INPUT', '"NotAnEntity" is not an entity type of this subgraph.'],
      [['_entities', 2], 'BAD_USER_INPUT', '"SupportNote" is not an entity type of this subgraph.'],
      [['_entities', 0], 'NOT_FOUND', 'No account with id acc_does_not_exist exists.'],
    ]);
    // Still serving.
    const again = await stack.query('{ customer(id: "cus_ada") { id } }');
    expect(again.body).toEqual({ data: { customer: { id: 'cus_ada' } } });
  });
});
