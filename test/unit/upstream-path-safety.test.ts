/**
 * The scope check judges the path the upstream will act on: what a path-normalising proxy makes
 * of it (decoded, dot segments resolved). A path it could read differently from the way it is
 * sent is refused, so the check and the upstream never disagree.
 */
import { describe, expect, test } from 'vitest';
import { authorizeUpstreamRequest, pathAsUpstreamSees, scopeOf } from '../../src/upstream/access.ts';
import type { UpstreamAccessDeniedError } from '../../src/upstream/errors.ts';
import { UpstreamProblemError } from '../../src/upstream/errors.ts';

const ACME = scopeOf({ operator: false, scope: { kind: 'customers', customerIds: new Set(['cus_acme']) } });
const OPERATOR = scopeOf({ operator: true, scope: { kind: 'all' } });
const OPTIONS = { requestId: 'req_1', problemDocsUrl: 'https://docs.platform.test/v3' };

describe('pathAsUpstreamSees', () => {
  test.each([
    ['/v3/customers/cus_acme/accounts/acc_acme_eth', '/v3/customers/cus_acme/accounts/acc_acme_eth'],
    [
      '/v3/customers/cus_acme/accounts/..%2F..%2Fcus_globex%2Faccounts%2Facc_globex_eth',
      '/v3/customers/cus_globex/accounts/acc_globex_eth',
    ],
    ['/v3/customers/cus_acme/accounts/%2e%2e/%2e%2e/cus_globex', '/v3/customers/cus_globex'],
    ['/v3/customers/cus_acme/accounts/%252e%252e/%252e%252e/cus_globex', '/v3/customers/cus_globex'],
    ['/v3/institutions/..', '/v3'],
    ['/v3/customers/cus_acme/tasks/../submissions/..', '/v3/customers/cus_acme'],
    ['/v3/customers/cus_acme\\..\\cus_globex', '/v3/customers/cus_globex'],
    ['/v3/customers/cus_acme;x=1//accounts', '/v3/customers/cus_acme/accounts'],
  ])('%s is %s', (path, seen) => {
    expect(pathAsUpstreamSees(path)).toBe(seen);
  });

  test('a malformed escape has no reading', () => {
    expect(pathAsUpstreamSees('/v3/customers/%E0%A4%A')).toBeUndefined();
  });
});

describe('authorizeUpstreamRequest', () => {
  test("passes a plain path of the caller's own customer", () => {
    expect(() =>
      authorizeUpstreamRequest(
        ACME,
        { method: 'GET', path: '/v3/customers/cus_acme/accounts/acc_acme_eth' },
        OPTIONS,
      ),
    ).not.toThrow();
  });

  test("answers another customer's plain path as the upstream's 404", () => {
    expect(() =>
      authorizeUpstreamRequest(
        ACME,
        { method: 'GET', path: '/v3/customers/cus_globex/accounts/acc_globex_eth' },
        OPTIONS,
      ),
    ).toThrow(UpstreamProblemError);
  });

  test.each([
    '/v3/customers/cus_acme/accounts/..%2F..%2Fcus_globex%2Faccounts%2Facc_globex_eth',
    '/v3/customers/cus_acme/accounts/../../cus_globex/accounts/acc_globex_eth',
    '/v3/customers/cus_acme/accounts/%2e%2e',
    '/v3/customers/cus_acme/accounts/acc%20x',
    '/v3/customers/cus_acme/accounts/acc;x',
    '/v3/customers/cus_acme/accounts/acc_x/',
    '/v3/institutions/..',
    '/v3/customers/cus_acme/tasks/../submissions/..',
  ])('refuses %s, for an operator too, whatever it would read as', (path) => {
    for (const scope of [ACME, OPERATOR]) {
      expect(() => authorizeUpstreamRequest(scope, { method: 'GET', path }, OPTIONS)).toThrow(
        expect.objectContaining({ reason: 'unsafe_path' }) as UpstreamAccessDeniedError,
      );
    }
  });
});
