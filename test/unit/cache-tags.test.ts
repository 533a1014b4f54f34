/**
 * A gateway drops exactly what the facade's own response cache drops: for every kind of stale read
 * and every kind of path the cache keeps, an answer that read the path carries the stale read's tag
 * if and only if `pathMatcherOf` names the path.
 */
import { describe, expect, it } from 'vitest';
import {
  cacheTagOfStale,
  cacheTagsOfPath,
  cacheTagsOfReads,
  cacheTagsOfStale,
} from '../../src/upstream/cache-tags.ts';
import { pathMatcherOf, type StaleReads } from '../../src/upstream/stale-reads.ts';

const PATHS = [
  '/v3/customers',
  '/v3/customers/cus_acme',
  '/v3/customers/cus_acme/accounts',
  '/v3/customers/cus_acme/accounts/acc_acme_eth',
  '/v3/customers/cus_acme/accounts/acc_acme_eth/fees',
  '/v3/customers/cus_acme/accounts/acc_acme_polygon',
  '/v3/customers/cus_acme/capabilities',
  '/v3/customers/cus_acme/capabilities/cap_1',
  '/v3/customers/cus_acme/quotes/quo_1',
  '/v3/customers/cus_globex',
  '/v3/customers/cus_globex/accounts',
  '/v3/customers/cus_globex/accounts/acc_acme_eth',
  '/v3/customers/cus%20odd',
  '/v3/customers/cus%20odd/accounts/acc%3Ax',
  '/v3/institutions',
  '/v3/institutions/ins_1',
];

const STALE: StaleReads[] = [
  { kind: 'everything' },
  { kind: 'customer-list' },
  { kind: 'customer', customerId: 'cus_acme' },
  { kind: 'customer', customerId: 'cus odd' },
  { kind: 'all-of-customer', customerId: 'cus_acme' },
  { kind: 'all-of-customer', customerId: 'cus odd' },
  { kind: 'list', customerId: 'cus_acme', collection: 'accounts' },
  { kind: 'list', customerId: 'cus_globex', collection: 'accounts' },
  { kind: 'collection', customerId: 'cus_acme', collection: 'accounts' },
  { kind: 'collection', customerId: 'cus_acme', collection: 'quotes' },
  { kind: 'record', customerId: 'cus_acme', collection: 'accounts', id: 'acc_acme_eth' },
  { kind: 'record', customerId: 'cus_acme', collection: 'capabilities', id: 'cap_1' },
  { kind: 'record', customerId: 'cus odd', collection: 'accounts', id: 'acc:x' },
];

describe('cache tags', () => {
  it.each(STALE.map((stale) => [JSON.stringify(stale), stale] as const))(
    '%s names, by its tag, the paths pathMatcherOf names and no other',
    (_name, stale) => {
      const named = pathMatcherOf(stale);
      const tag = cacheTagOfStale(stale, 'sandbox');
      for (const path of PATHS) {
        expect({ path, tagged: cacheTagsOfPath(path, 'sandbox').includes(tag) }).toEqual({
          path,
          tagged: named(path),
        });
      }
    },
  );

  it("never names another environment's answers", () => {
    for (const stale of STALE) {
      const tag = cacheTagOfStale(stale, 'live');
      for (const path of PATHS) {
        expect(cacheTagsOfPath(path, 'sandbox')).not.toContain(tag);
        expect(cacheTagsOfPath(path, undefined)).not.toContain(tag);
      }
    }
  });

  it('reads the paths of response-cache keys, without their queries, deduplicated and sorted', () => {
    expect(
      cacheTagsOfReads(
        [
          'facade-key /v3/customers/cus_acme/accounts?first=10',
          'facade-key /v3/customers/cus_acme/accounts?first=20',
          'facade-key /v3/customers/cus_acme',
        ],
        undefined,
      ),
    ).toEqual([
      'default:all:cus_acme',
      'default:collection:cus_acme:accounts',
      'default:customer:cus_acme',
      'default:everything',
      'default:list:cus_acme:accounts',
    ]);
    expect(
      cacheTagsOfStale(
        [
          { kind: 'all-of-customer', customerId: 'cus_acme' },
          { kind: 'all-of-customer', customerId: 'cus_acme' },
          { kind: 'customer-list' },
        ],
        'live',
      ),
    ).toEqual(['live:all:cus_acme', 'live:customers']);
  });
});
