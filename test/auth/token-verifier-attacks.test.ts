/**
 * What an attacker or a failing issuer can throw at the verifier: forged and tampered tokens, key
 * rotation, key sets that are down, hang or answer garbage, and discovery documents that lie. Each
 * against a real key-set server on loopback, whose request counts tell a fetch from a cache hit.
 */
import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { JWTPayload } from 'jose';
import {
  AUTHENTICATION_FAILED_MESSAGE,
  AUTHENTICATION_UNAVAILABLE_MESSAGE,
  AuthenticationError,
  AuthenticationUnavailableError,
  createTokenVerifier,
  DEFAULT_MAX_TOKEN_LENGTH,
  type TokenVerifierOptions,
} from '../../src/auth/token-verifier.ts';
import {
  base64url,
  createTestKey,
  keyConfusionToken,
  signToken,
  startKeySetServer,
  unreachableUrl,
  unsignedToken,
  type KeySetServer,
  type TestKey,
} from '../support/issuer.ts';

const AUDIENCE = 'platform-graphql-facade';

let keyA: TestKey;
let keyB: TestKey;
let outsider: TestKey;
const servers: KeySetServer[] = [];

beforeAll(async () => {
  [keyA, keyB, outsider] = await Promise.all([
    createTestKey('key-a'),
    createTestKey('key-b'),
    // Same kid as key A: the attacker names a published key but signs with their own.
    createTestKey('key-a'),
  ]);
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A key-set server for one test, closed after it. */
async function keySetServer(keys: readonly TestKey[]): Promise<KeySetServer> {
  const server = await startKeySetServer(keys);
  servers.push(server);
  return server;
}

function verifierFor(server: KeySetServer, options: Partial<TokenVerifierOptions> = {}) {
  return createTokenVerifier({ issuer: server.url, audience: AUDIENCE, jwksUrl: server.jwksUrl, ...options });
}

function claims(server: KeySetServer, overrides: JWTPayload = {}): JWTPayload {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: server.url,
    aud: AUDIENCE,
    sub: 'client:demo-acme',
    client_id: 'demo-acme',
    iat: now,
    exp: now + 3600,
    customer_ids: ['cus_acme'],
    ...overrides,
  };
}

/** The error a verification rejected with, failing the test if it resolved. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('the token was accepted');
    },
    (error: unknown) => error as Error,
  );
}

async function refusalReason(promise: Promise<unknown>): Promise<string> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(AuthenticationError);
  expect(error.message).toBe(AUTHENTICATION_FAILED_MESSAGE);
  return (error as AuthenticationError).reason;
}

async function unavailableReason(promise: Promise<unknown>): Promise<string> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(AuthenticationUnavailableError);
  expect(error).not.toBeInstanceOf(AuthenticationError);
  expect(error.message).toBe(AUTHENTICATION_UNAVAILABLE_MESSAGE);
  expect((error as AuthenticationUnavailableError).retryable).toBe(true);
  return (error as AuthenticationUnavailableError).reason;
}

describe('forgeries', () => {
  test('alg none with an empty signature is malformed, and no key set is fetched', async () => {
    const server = await keySetServer([keyA]);
    const token = unsignedToken(claims(server), keyA.kid);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('malformed');
    expect(server.requests('/jwks')).toBe(0);
  });

  test('alg none with a made-up signature is a disallowed algorithm, and no key set is fetched', async () => {
    const server = await keySetServer([keyA]);
    const token = unsignedToken(claims(server), keyA.kid, base64url('not a signature'));
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('disallowed_algorithm');
    expect(server.requests('/jwks')).toBe(0);
  });

  test('HS256 keyed with the issuer public key (key confusion) is a disallowed algorithm', async () => {
    const server = await keySetServer([keyA]);
    const token = await keyConfusionToken(claims(server, { roles: ['operator'] }), keyA);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('disallowed_algorithm');
    expect(server.requests('/jwks')).toBe(0);
  });

  test('a payload changed after signing (more customers) fails the signature', async () => {
    const server = await keySetServer([keyA]);
    const genuine = await signToken(claims(server), { key: keyA });
    const [header, , signature] = genuine.split('.');
    const widened = base64url(JSON.stringify(claims(server, { customer_ids: ['cus_acme', 'cus_other'] })));
    const verifier = verifierFor(server);
    expect((await verifier.verify(genuine)).subject).toBe('client:demo-acme');
    expect(await refusalReason(verifier.verify(`${header}.${widened}.${signature}`))).toBe('bad_signature');
  });

  test('a header changed after signing (another kid) fails the signature', async () => {
    const server = await keySetServer([keyA, keyB]);
    const genuine = await signToken(claims(server), { key: keyA });
    const [, payload, signature] = genuine.split('.');
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid: keyB.kid }));
    expect(await refusalReason(verifierFor(server).verify(`${header}.${payload}.${signature}`))).toBe(
      'bad_signature',
    );
  });

  test('a token signed with an unpublished key under a published kid fails the signature', async () => {
    const server = await keySetServer([keyA]);
    const token = await signToken(claims(server, { roles: ['operator'] }), { key: outsider });
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('bad_signature');
  });

  test('a key embedded in the header (jwk) is never trusted', async () => {
    const server = await keySetServer([keyA]);
    const { SignJWT } = await import('jose');
    const token = await new SignJWT(claims(server, { roles: ['operator'] }))
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: keyA.kid, jwk: outsider.publicJwk })
      .sign(outsider.privateKey);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('bad_signature');
  });

  test('a signature cut short fails the signature', async () => {
    const server = await keySetServer([keyA]);
    const genuine = await signToken(claims(server), { key: keyA });
    expect(await refusalReason(verifierFor(server).verify(genuine.slice(0, -4)))).toBe('bad_signature');
  });

  test('a token over the size limit is refused unread, even validly signed', async () => {
    const server = await keySetServer([keyA]);
    const token = await signToken(claims(server, { padding: 'x'.repeat(DEFAULT_MAX_TOKEN_LENGTH) }), {
      key: keyA,
    });
    expect(token.length).toBeGreaterThan(DEFAULT_MAX_TOKEN_LENGTH);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('too_large');
    expect(server.requests('/jwks')).toBe(0);
  });

  test.each([
    ['two segments', 'abc.def'],
    ['four segments', 'abc.def.ghi.jkl'],
    ['an empty segment', 'abc..ghi'],
    ['standard base64 characters', 'ab+c.de/f.ghi='],
    ['a header that is not JSON', `${base64url('not json')}.${base64url('{}')}.${base64url('sig')}`],
    ['a header that is a JSON array', `${base64url('[1]')}.${base64url('{}')}.${base64url('sig')}`],
    ['an empty string', ''],
  ])('%s is malformed, before any key-set fetch', async (_name, token) => {
    const server = await keySetServer([keyA]);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('malformed');
    expect(server.requests('/jwks')).toBe(0);
  });

  test('a payload that is not a JSON object is malformed, even validly signed', async () => {
    const server = await keySetServer([keyA]);
    const { CompactSign } = await import('jose');
    const token = await new CompactSign(new TextEncoder().encode('["not", "claims"]'))
      .setProtectedHeader({ alg: 'RS256', kid: keyA.kid })
      .sign(keyA.privateKey);
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('malformed');
  });

  test('no refusal ever carries the token or a piece of it', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server);
    const genuine = await signToken(claims(server), { key: keyA });
    const [header, payload, signature] = genuine.split('.') as [string, string, string];
    const tokens = [
      await signToken(claims(server, { exp: 1 }), { key: keyA }),
      await signToken(claims(server, { aud: 'other' }), { key: keyA }),
      await signToken(claims(server, { iss: 'https://evil.example.test' }), { key: keyA }),
      await signToken(claims(server), { key: outsider }),
      await signToken(claims(server), { key: keyA, kid: 'unknown-kid' }),
      await keyConfusionToken(claims(server), keyA),
      `${header}.${base64url(JSON.stringify(claims(server, { roles: ['operator'] })))}.${signature}`,
      `${header}.${payload}`,
    ];
    for (const token of tokens) {
      const error = await rejection(verifier.verify(token));
      const everything = [
        String(error),
        error.stack ?? '',
        JSON.stringify(error),
        inspect(error, { depth: 10, showHidden: true }),
      ].join('\n');
      for (const segment of token.split('.').filter((part) => part.length >= 8)) {
        // Every 8-character window, so no fragment slips through.
        for (let start = 0; start + 8 <= segment.length; start += 8) {
          expect(everything).not.toContain(segment.slice(start, start + 8));
        }
      }
      expect(everything).not.toContain('client:demo-acme');
    }
  });
});

describe('keys and rotation', () => {
  test('a kid absent from the key set is an unknown key', async () => {
    const server = await keySetServer([keyA]);
    const token = await signToken(claims(server), { key: keyB });
    expect(await refusalReason(verifierFor(server).verify(token))).toBe('unknown_key');
  });

  test('within the cooldown, an unknown kid does not make the verifier fetch the key set again', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server); // default cooldown: 30 s
    expect((await verifier.verify(await signToken(claims(server), { key: keyA }))).subject).toBe(
      'client:demo-acme',
    );
    expect(server.requests('/jwks')).toBe(1);
    for (const kid of ['made-up-1', 'made-up-2', 'made-up-3']) {
      const token = await signToken(claims(server), { key: keyB, kid });
      expect(await refusalReason(verifier.verify(token))).toBe('unknown_key');
    }
    expect(server.requests('/jwks')).toBe(1);
  });

  test('the key set is fetched once and then served from the cache', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server);
    const tokens = await Promise.all([1, 2, 3].map(() => signToken(claims(server), { key: keyA })));
    await Promise.all(tokens.map((token) => verifier.verify(token)));
    await verifier.verify(tokens[0]!);
    expect(server.requests('/jwks')).toBe(1);
  });

  test('a key added to the key set is accepted without a restart', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server, { jwksCooldownMs: 0 });
    expect((await verifier.verify(await signToken(claims(server), { key: keyA }))).subject).toBe(
      'client:demo-acme',
    );

    server.setKeys([keyA, keyB]);
    const signedWithB = await signToken(claims(server, { sub: 'client:rotated' }), { key: keyB });
    expect((await verifier.verify(signedWithB)).subject).toBe('client:rotated');
    expect(server.requests('/jwks')).toBe(2);
    // The old key goes on working while it is published.
    expect((await verifier.verify(await signToken(claims(server), { key: keyA }))).subject).toBe(
      'client:demo-acme',
    );
    expect(server.requests('/jwks')).toBe(2);
  });

  test('a key removed from the key set is refused once the verifier fetches the set again', async () => {
    const server = await keySetServer([keyA, keyB]);
    const verifier = verifierFor(server, { jwksCooldownMs: 0 });
    const signedWithA = await signToken(claims(server), { key: keyA });
    expect((await verifier.verify(signedWithA)).subject).toBe('client:demo-acme');

    // The issuer retires key A and signs with a new key C: the first C token refreshes the set.
    const keyC = await createTestKey('key-c');
    server.setKeys([keyB, keyC]);
    expect((await verifier.verify(await signToken(claims(server), { key: keyC }))).subject).toBe(
      'client:demo-acme',
    );
    expect(await refusalReason(verifier.verify(signedWithA))).toBe('unknown_key');
  });

  test('a removed key is refused once the cached key set is older than its maximum age', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server, { jwksCacheMaxAgeMs: 0 });
    const signedWithA = await signToken(claims(server), { key: keyA });
    expect((await verifier.verify(signedWithA)).subject).toBe('client:demo-acme');
    server.setKeys([keyB]);
    expect(await refusalReason(verifier.verify(signedWithA))).toBe('unknown_key');
  });

  test('several keys fitting a token without kid: each is tried, the signing one wins', async () => {
    const server = await keySetServer([keyA, keyB]);
    const verifier = verifierFor(server);
    const token = await signToken(claims(server), { key: keyB, kid: null });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    const forged = await signToken(claims(server), { key: outsider, kid: null });
    expect(await refusalReason(verifier.verify(forged))).toBe('bad_signature');
  });
});

describe('an issuer that cannot be reached', () => {
  test('a key set answering 503 is unavailable, and not asked again within the cooldown', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server); // default cooldown: 30 s
    const token = await signToken(claims(server), { key: keyA });
    server.setBehaviour({ kind: 'status', status: 503 });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
    server.setBehaviour({ kind: 'keys' });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
    expect(server.requests('/jwks')).toBe(1);
  });

  test('once the key set answers again (after the cooldown), the same token passes', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server, { jwksCooldownMs: 0 });
    const token = await signToken(claims(server), { key: keyA });
    server.setBehaviour({ kind: 'status', status: 503 });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
    server.setBehaviour({ kind: 'keys' });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    expect(server.requests('/jwks')).toBe(2);
  });

  test('keys already fetched go on verifying while the key set cannot be fetched again', async () => {
    const server = await keySetServer([keyA]);
    // A cache that is always too old: every verification wants a fresh key set.
    const verifier = verifierFor(server, { jwksCacheMaxAgeMs: 0 });
    const token = await signToken(claims(server), { key: keyA });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    server.setBehaviour({ kind: 'status', status: 503 });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    expect(server.requests('/jwks')).toBe(2);
    // Within the cooldown the issuer is not asked again; the old keys still answer.
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    expect(server.requests('/jwks')).toBe(2);
    // A key the old set lacks may be new: unavailable, not refused.
    const signedWithB = await signToken(claims(server), { key: keyB });
    expect(await unavailableReason(verifier.verify(signedWithB))).toBe('jwks_unavailable');
    // The old keys still check signatures: a forgery under a known kid is refused.
    const forged = await signToken(claims(server), { key: outsider });
    expect(await refusalReason(verifier.verify(forged))).toBe('bad_signature');
  });

  test('keys already fetched are not used past the stale limit', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server, { jwksCacheMaxAgeMs: 0, jwksMaxStaleMs: 0 });
    const token = await signToken(claims(server), { key: keyA });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    server.setBehaviour({ kind: 'status', status: 503 });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
  });

  test('a key set nobody listens for is unavailable', async () => {
    const server = await keySetServer([keyA]);
    const verifier = createTokenVerifier({
      issuer: server.url,
      audience: AUDIENCE,
      jwksUrl: `${await unreachableUrl()}/jwks`,
    });
    const token = await signToken(claims(server), { key: keyA });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
  });

  test('a key set answering something that is not a key set is unavailable', async () => {
    const server = await keySetServer([keyA]);
    server.setBehaviour({ kind: 'garbage' });
    const token = await signToken(claims(server), { key: keyA });
    expect(await unavailableReason(verifierFor(server).verify(token))).toBe('jwks_unavailable');
  });

  test('a key set that never answers is unavailable after the timeout', async () => {
    const server = await keySetServer([keyA]);
    server.setBehaviour({ kind: 'stall' });
    const token = await signToken(claims(server), { key: keyA });
    expect(await unavailableReason(verifierFor(server, { httpTimeoutMs: 100 }).verify(token))).toBe(
      'jwks_unavailable',
    );
  });

  test('an unknown kid while the key set is down is unavailable, not refused', async () => {
    const server = await keySetServer([keyA]);
    const verifier = verifierFor(server, { jwksCooldownMs: 0 });
    expect((await verifier.verify(await signToken(claims(server), { key: keyA }))).subject).toBe(
      'client:demo-acme',
    );
    server.setBehaviour({ kind: 'status', status: 500 });
    const token = await signToken(claims(server), { key: keyB });
    expect(await unavailableReason(verifier.verify(token))).toBe('jwks_unavailable');
  });
});

describe('discovery', () => {
  test('without a key-set URL, the discovery document is read once and its jwks_uri used', async () => {
    const server = await keySetServer([keyA]);
    const verifier = createTokenVerifier({ issuer: server.url, audience: AUDIENCE });
    for (let i = 0; i < 3; i += 1) {
      expect((await verifier.verify(await signToken(claims(server), { key: keyA }))).subject).toBe(
        'client:demo-acme',
      );
    }
    expect(server.requests('/.well-known/openid-configuration')).toBe(1);
    expect(server.requests('/jwks')).toBe(1);
  });

  test('a key-set URL given skips discovery', async () => {
    const server = await keySetServer([keyA]);
    await verifierFor(server).verify(await signToken(claims(server), { key: keyA }));
    expect(server.requests('/.well-known/openid-configuration')).toBe(0);
  });

  test('an issuer configured with a trailing slash discovers at the same place', async () => {
    const server = await keySetServer([keyA]);
    server.setDiscoveryIssuer(`${server.url}/`);
    const verifier = createTokenVerifier({ issuer: `${server.url}/`, audience: AUDIENCE });
    const token = await signToken(claims(server, { iss: `${server.url}/` }), { key: keyA });
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    expect(server.requests('/.well-known/openid-configuration')).toBe(1);
  });

  test('a discovery document naming another issuer is not used', async () => {
    const server = await keySetServer([keyA]);
    server.setDiscoveryIssuer('https://evil.example.test');
    const verifier = createTokenVerifier({ issuer: server.url, audience: AUDIENCE });
    const token = await signToken(claims(server), { key: keyA });
    const error = await rejection(verifier.verify(token));
    expect(error).toBeInstanceOf(AuthenticationUnavailableError);
    expect((error as AuthenticationUnavailableError).reason).toBe('discovery_unavailable');
    expect(String((error as Error & { cause: unknown }).cause)).toContain(
      'declares issuer "https://evil.example.test"',
    );
    expect(server.requests('/jwks')).toBe(0);
  });

  test('an unreachable issuer is unavailable, and not asked again within the cooldown', async () => {
    const issuer = await unreachableUrl();
    const server = await keySetServer([keyA]);
    const verifier = createTokenVerifier({ issuer, audience: AUDIENCE });
    const token = await signToken(claims(server, { iss: issuer }), { key: keyA });
    const first = await rejection(verifier.verify(token));
    expect((first as AuthenticationUnavailableError).reason).toBe('discovery_unavailable');
    // The same failure again, answered from memory rather than by another request.
    expect(await rejection(verifier.verify(token))).toBe(first);
  });

  test('a failed discovery is retried after the cooldown, and then succeeds', async () => {
    const server = await keySetServer([keyA]);
    server.setDiscoveryIssuer('https://evil.example.test');
    const verifier = createTokenVerifier({ issuer: server.url, audience: AUDIENCE, jwksCooldownMs: 0 });
    const token = await signToken(claims(server), { key: keyA });
    expect(await unavailableReason(verifier.verify(token))).toBe('discovery_unavailable');
    server.setDiscoveryIssuer(server.url);
    expect((await verifier.verify(token)).subject).toBe('client:demo-acme');
    expect(server.requests('/.well-known/openid-configuration')).toBe(2);
  });
});

afterAll(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
