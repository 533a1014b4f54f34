/**
 * The verifier against a real key-set server on loopback: what a valid token becomes, and each
 * ordinary way a token is refused. Forgeries, rotation and outages are in token-verifier-attacks.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { JWTPayload } from 'jose';
import {
  AUTHENTICATION_FAILED_MESSAGE,
  AuthenticationError,
  createTokenVerifier,
  type TokenVerifierOptions,
} from '../../src/auth/token-verifier.ts';
import { bearerToken } from '../../src/auth/authenticate.ts';
import {
  createTestKey,
  signToken,
  startKeySetServer,
  type KeySetServer,
  type TestKey,
} from '../support/issuer.ts';

const AUDIENCE = 'platform-graphql-facade';
const NOW = 1_800_000_000; // seconds; the verifier's clock in this file
const now = () => NOW * 1000;

let server: KeySetServer;
let rsa: TestKey;
let ec: TestKey;
let ed: TestKey;

beforeAll(async () => {
  [rsa, ec, ed] = await Promise.all([
    createTestKey('rsa-1', 'RS256'),
    createTestKey('ec-1', 'ES256'),
    createTestKey('ed-1', 'EdDSA'),
  ]);
  server = await startKeySetServer([rsa, ec, ed]);
});
afterAll(async () => {
  await server.close();
});

function verifier(options: Partial<TokenVerifierOptions> = {}) {
  return createTokenVerifier({
    issuer: server.url,
    audience: AUDIENCE,
    jwksUrl: server.jwksUrl,
    now,
    ...options,
  });
}

function claims(overrides: JWTPayload = {}): JWTPayload {
  return {
    iss: server.url,
    aud: AUDIENCE,
    sub: 'client:demo-acme',
    client_id: 'demo-acme',
    iat: NOW - 60,
    exp: NOW + 3600,
    customer_ids: ['cus_acme', 'cus_beta'],
    ...overrides,
  };
}

/** The reason a verification was refused, failing the test if it was accepted. */
async function refusal(promise: Promise<unknown>): Promise<string> {
  const error: unknown = await promise.then(
    () => {
      throw new Error('the token was accepted');
    },
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(AuthenticationError);
  expect((error as AuthenticationError).message).toBe(AUTHENTICATION_FAILED_MESSAGE);
  return (error as AuthenticationError).reason;
}

describe('a valid token becomes a Caller', () => {
  test('a customer-scoped client: its subject, client, roles and customers', async () => {
    const token = await signToken(claims({ roles: ['support'] }), { key: rsa });
    expect(await verifier().verify(token)).toEqual({
      via: 'token',
      subject: 'client:demo-acme',
      clientId: 'demo-acme',
      roles: ['support'],
      operator: false,
      scope: { kind: 'customers', customerIds: new Set(['cus_acme', 'cus_beta']) },
      expiresAt: (NOW + 3600) * 1000,
    });
  });

  test('an operator sees every customer, whatever customer ids it also carries', async () => {
    const token = await signToken(
      claims({ roles: ['operator', 'support'], azp: 'ops-console', client_id: undefined }),
      {
        key: rsa,
      },
    );
    const caller = await verifier().verify(token);
    expect(caller).toMatchObject({ operator: true, scope: { kind: 'all' }, clientId: 'ops-console' });
    expect(caller.roles).toEqual(['operator', 'support']);
  });

  test.each([
    ['ES256', () => ec],
    ['EdDSA', () => ed],
  ])('%s signatures are accepted by default', async (_alg, key) => {
    const token = await signToken(claims(), { key: key() });
    expect((await verifier().verify(token)).subject).toBe('client:demo-acme');
  });

  test('an audience list that includes the facade is accepted', async () => {
    const token = await signToken(claims({ aud: ['another-api', AUDIENCE] }), { key: rsa });
    expect((await verifier().verify(token)).subject).toBe('client:demo-acme');
  });

  test.each([
    ['at+jwt', 'at+jwt'],
    ['application/at+jwt', 'application/at+jwt'],
    ['JWT', 'JWT'],
    ['no typ at all', null],
  ])('a typ of %s is accepted', async (_name, typ) => {
    const token = await signToken(claims(), { key: rsa, typ });
    expect((await verifier().verify(token)).subject).toBe('client:demo-acme');
  });

  test('claims under configured names, nested by path (realm_access.roles) or namespaced by URL', async () => {
    const token = await signToken(
      claims({
        customer_ids: undefined,
        realm_access: { roles: ['auditor'] },
        'https://platform.example.test/customers': ['cus_x'],
      }),
      { key: rsa },
    );
    const caller = await verifier({
      rolesClaim: 'realm_access.roles',
      customerIdsClaim: 'https://platform.example.test/customers',
    }).verify(token);
    expect(caller.roles).toEqual(['auditor']);
    expect(caller.scope).toEqual({ kind: 'customers', customerIds: new Set(['cus_x']) });
  });

  test('a configured operator role name grants every customer', async () => {
    const token = await signToken(claims({ roles: ['platform-admin'] }), { key: rsa });
    expect((await verifier({ operatorRole: 'platform-admin' }).verify(token)).scope).toEqual({ kind: 'all' });
    expect((await verifier().verify(token)).operator).toBe(false);
  });

  test('roles given as one space-separated string are read as a list', async () => {
    const token = await signToken(claims({ roles: 'support operator' }), { key: rsa });
    expect(await verifier().verify(token)).toMatchObject({ roles: ['support', 'operator'], operator: true });
  });

  test.each([
    ['a bare string', 'cus_acme'],
    ['an array with a number', ['cus_acme', 42]],
    ['an object', { cus_acme: true }],
    ['absent', undefined],
  ])('customer ids as %s scope the caller to no customer at all', async (_name, value) => {
    const token = await signToken(claims({ customer_ids: value }), { key: rsa });
    expect((await verifier().verify(token)).scope).toEqual({ kind: 'customers', customerIds: new Set() });
  });

  test('a roles claim with a non-string member grants no role, the operator role least of all', async () => {
    const token = await signToken(claims({ roles: ['operator', { admin: true }] }), { key: rsa });
    expect(await verifier().verify(token)).toMatchObject({ roles: [], operator: false });
  });

  test('the Caller is frozen', async () => {
    const caller = await verifier().verify(await signToken(claims(), { key: rsa }));
    expect(Object.isFrozen(caller)).toBe(true);
    expect(Object.isFrozen(caller.roles)).toBe(true);
  });
});

describe('tokens refused for what they say', () => {
  test('expired, beyond the clock tolerance', async () => {
    const token = await signToken(claims({ exp: NOW - 6 }), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('expired');
  });

  test('expired within the clock tolerance is still accepted; tolerance 0 refuses it', async () => {
    const token = await signToken(claims({ exp: NOW - 4 }), { key: rsa });
    expect((await verifier().verify(token)).subject).toBe('client:demo-acme');
    expect(await refusal(verifier({ clockToleranceSeconds: 0 }).verify(token))).toBe('expired');
  });

  test('not yet valid (nbf in the future beyond the tolerance)', async () => {
    const later = await signToken(claims({ nbf: NOW + 6 }), { key: rsa });
    expect(await refusal(verifier().verify(later))).toBe('not_yet_valid');
    const almost = await signToken(claims({ nbf: NOW + 4 }), { key: rsa });
    expect((await verifier().verify(almost)).subject).toBe('client:demo-acme');
  });

  test.each([
    ['another audience', 'another-api'],
    ['an audience list without the facade', ['another-api', 'yet-another']],
    ['the audience with a trailing slash', `${AUDIENCE}/`],
  ])('wrong audience: %s', async (_name, aud) => {
    const token = await signToken(claims({ aud }), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('wrong_audience');
  });

  test('no audience at all', async () => {
    const token = await signToken(claims({ aud: undefined }), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('missing_claim');
  });

  test.each([
    ['another issuer', () => 'https://evil.example.test'],
    ['the issuer with a trailing slash', () => `${server.url}/`],
    ['localhost instead of 127.0.0.1', () => server.url.replace('127.0.0.1', 'localhost')],
    ['upper-case scheme', () => server.url.replace('http:', 'HTTP:')],
  ])('wrong issuer: %s', async (_name, iss) => {
    const token = await signToken(claims({ iss: iss() }), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('wrong_issuer');
  });

  test('an issuer configured with a trailing slash refuses the token without one', async () => {
    const token = await signToken(claims(), { key: rsa });
    expect(await refusal(verifier({ issuer: `${server.url}/` }).verify(token))).toBe('wrong_issuer');
  });

  test.each(['exp', 'sub'])('no %s claim', async (claim) => {
    const token = await signToken(claims({ [claim]: undefined }), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('missing_claim');
  });

  test.each([
    ['a numeric sub', { sub: 42 }],
    ['an empty sub', { sub: '' }],
    ['a string exp', { exp: String(NOW + 3600) }],
  ])('%s is malformed', async (_name, overrides) => {
    const token = await signToken(claims(overrides as JWTPayload), { key: rsa });
    expect(await refusal(verifier().verify(token))).toBe('malformed');
  });

  test.each(['dpop+jwt', 'logout+jwt', 'secevent+jwt'])('a %s token is not an access token', async (typ) => {
    const token = await signToken(claims(), { key: rsa, typ });
    expect(await refusal(verifier().verify(token))).toBe('wrong_type');
  });

  test('an algorithm not configured is refused even with a valid signature', async () => {
    const token = await signToken(claims(), { key: ec });
    expect(await refusal(verifier({ algorithms: ['RS256'] }).verify(token))).toBe('disallowed_algorithm');
  });

  test('a verifier cannot be built to accept symmetric algorithms', () => {
    expect(() =>
      verifier({ algorithms: ['HS256'] as unknown as TokenVerifierOptions['algorithms'] }),
    ).toThrow(/algorithms must be a non-empty list of RS256/);
  });
});

describe('bearerToken', () => {
  test('absent header: undefined', () => {
    expect(bearerToken(undefined)).toBeUndefined();
  });

  test.each([
    ['Bearer abc.def.ghi', 'abc.def.ghi'],
    ['bearer abc.def.ghi', 'abc.def.ghi'],
    ['BEARER abc-_~+/.def=', 'abc-_~+/.def='],
  ])('%s', (header, token) => {
    expect(bearerToken(header)).toEqual({ kind: 'token', token });
  });

  test.each([
    ['empty', ''],
    ['scheme only', 'Bearer'],
    ['scheme and a space', 'Bearer '],
    ['two spaces', 'Bearer  abc.def.ghi'],
    ['a tab', 'Bearer\tabc.def.ghi'],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a token with a space', 'Bearer abc def'],
    ['a token with a comma', 'Bearer abc,def'],
    ['padding in the middle', 'Bearer ab=c'],
    ['leading space', ' Bearer abc.def.ghi'],
    ['two tokens', 'Bearer abc, Bearer def'],
  ])('malformed: %s', (_name, header) => {
    expect(bearerToken(header)).toEqual({ kind: 'malformed' });
  });
});
