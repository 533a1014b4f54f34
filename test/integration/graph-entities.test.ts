/**
 * The facade as a federation subgraph: `_service { sdl }` and `_entities`, whose representations
 * resolve through the loaders (one upstream read per distinct entity, however many times named).
 */
import { describe, expect, it } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

const ENTITIES = /* GraphQL */ `
  query Entities($representations: [_Any!]!) {
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
        fees {
          breakdown {
            developer {
              bips
            }
          }
        }
      }
    }
  }
`;

describe('_service', () => {
  it('publishes the subgraph SDL with the federation link and entity keys', async () => {
    const result = await stack.query<{ _service: { sdl: string } }>(`{ _service { sdl } }`);

    expect(result.body.errors).toBeUndefined();
    const sdl = result.body.data!._service.sdl;
    expect(sdl).toContain('@link(url: "https://specs.apollo.dev/federation/v2.14"');
    expect(sdl).toMatch(/type Customer implements Node @key\(fields: "id"\)/);
    expect(sdl).toMatch(/type Account implements Node @key\(fields: "customerId id"\)/);
    expect(sdl).toContain('apiStatus: ApiStatus!');
    expect(await stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });
  });
});

describe('_entities', () => {
  it('resolves Customer and Account representations with one read per distinct entity', async () => {
    const result = await stack.query(ENTITIES, {
      representations: [
        { __typename: 'Customer', id: 'cus_ada' },
        { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
        { __typename: 'Customer', id: 'cus_ada' },
        { __typename: 'Account', customerId: 'cus_ada', id: 'acc_ada_polygon' },
        { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
        { __typename: 'Customer', id: 'cus_globex' },
      ],
    });

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toEqual({
      _entities: [
        { __typename: 'Customer', id: 'cus_ada', displayName: 'Ada Lovelace' },
        {
          __typename: 'Account',
          id: 'acc_acme_eth',
          customerId: 'cus_acme',
          label: 'Acme treasury (Ethereum)',
          fees: { breakdown: { developer: { bips: 25 } } },
        },
        { __typename: 'Customer', id: 'cus_ada', displayName: 'Ada Lovelace' },
        {
          __typename: 'Account',
          id: 'acc_ada_polygon',
          customerId: 'cus_ada',
          label: 'Savings (Polygon)',
          fees: { breakdown: { developer: { bips: 10 } } },
        },
        {
          __typename: 'Account',
          id: 'acc_acme_eth',
          customerId: 'cus_acme',
          label: 'Acme treasury (Ethereum)',
          fees: { breakdown: { developer: { bips: 25 } } },
        },
        { __typename: 'Customer', id: 'cus_globex', displayName: 'Globex Trading LLC' },
      ],
    });
    expect(await stack.upstreamCalls()).toEqual({
      total: 4,
      byRoute: {
        'GET /v3/customers/{customerId}': 2,
        'GET /v3/customers/{customerId}/accounts/{accountId}': 2,
      },
    });
  });

  it('answers an unknown entity with null and NOT_FOUND at its index, and still resolves the others', async () => {
    const result = await stack.query(ENTITIES, {
      representations: [
        { __typename: 'Account', customerId: 'cus_acme', id: 'acc_missing' },
        { __typename: 'Customer', id: 'cus_acme' },
      ],
    });

    expect(result.body.data).toEqual({
      _entities: [null, { __typename: 'Customer', id: 'cus_acme', displayName: 'Acme Robotics Ltd' }],
    });
    expect(result.body.errors).toHaveLength(1);
    expect(result.body.errors![0]).toMatchObject({
      path: ['_entities', 0],
      extensions: { code: 'NOT_FOUND', problem: { status: 404, code: 'not_found' } },
    });
  });
});
