/**
 * The verifier against a real OpenID provider (dev-issuer/, oidc-provider): tokens minted by the
 * client credentials grant over HTTP become the expected Callers, the discovery document is found
 * and used, and the issuer itself refuses what a client must not get.
 */
import { describe, expect, test } from 'vitest';
import { readAuthConfig } from '../../src/auth/config.ts';
import { AuthenticationError, createTokenVerifier } from '../../src/auth/token-verifier.ts';
import { LEAKED_DEMO_PUBLIC_MODULUS } from '../support/leaked-demo-key.ts';
import { devIssuerEnv, startDevIssuer, useDevIssuer } from '../support/issuer.ts';

describe('the dev issuer with its demo clients', () => {
  const issuer = useDevIssuer();

  test('discovery: the issuer names itself exactly, with its key set and token endpoint', async () => {
    const response = await fetch(`${issuer.issuer}/.well-known/openid-configuration`);
    expect(response.status).toBe(200);
    const document = (await response.json()) as Record<string, unknown>;
    expect(document).toMatchObject({
      issuer: issuer.issuer,
      jwks_uri: issuer.jwksUrl,
      token_endpoint: issuer.tokenUrl,
    });
    expect(document['grant_types_supported']).toContain('client_credentials');
    expect(issuer.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  test('its key set publishes a key generated at its start, public part only, never the leaked demo key', async () => {
    const { keys } = (await (await fetch(issuer.jwksUrl)).json()) as { keys: Record<string, unknown>[] };
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({
      kid: expect.stringMatching(/^dev-issuer-[0-9a-f-]{36}$/) as string,
      kty: 'RSA',
      alg: 'RS256',
      use: 'sig',
    });
    expect(keys[0]!['n']).not.toBe(LEAKED_DEMO_PUBLIC_MODULUS);
    expect(
      Object.keys(keys[0]!).filter((member) => ['d', 'p', 'q', 'dp', 'dq', 'qi'].includes(member)),
    ).toEqual([]);
  });

  test('demo-operator: an operator Caller over every customer', async () => {
    const verifier = createTokenVerifier({ issuer: issuer.issuer, audience: issuer.audience });
    const token = await issuer.token('demo-operator');
    const caller = await verifier.verify(token);
    expect(caller).toEqual({
      via: 'token',
      subject: 'demo-operator',
      clientId: 'demo-operator',
      roles: ['operator'],
      operator: true,
      scope: { kind: 'all' },
      expiresAt: expect.any(Number) as number,
    });
  });

  test('demo-acme: scoped to cus_acme, with a one-hour lifetime', async () => {
    const verifier = createTokenVerifier({ issuer: issuer.issuer, audience: issuer.audience });
    const token = await issuer.token('demo-acme');
    const [header, payload] = token
      .split('.')
      .slice(0, 2)
      .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()));
    expect(header).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: (await jwksKeyIds(issuer.jwksUrl))[0] });
    expect(payload.exp - payload.iat).toBe(3600);

    const caller = await verifier.verify(token);
    expect(caller).toEqual({
      via: 'token',
      subject: 'demo-acme',
      clientId: 'demo-acme',
      roles: [],
      operator: false,
      scope: { kind: 'customers', customerIds: new Set(['cus_acme']) },
      expiresAt: payload.exp * 1000,
    });
  });

  test("each token's `scope` claim holds its client's roles, for a gateway's @requiresScopes", async () => {
    const claimsOf = async (clientId: string) =>
      JSON.parse(
        Buffer.from((await issuer.token(clientId)).split('.')[1]!, 'base64url').toString(),
      ) as Record<string, unknown>;
    expect((await claimsOf('demo-operator')).scope).toBe('operator');
    // No role, no scope: a gateway refuses it every operator-only field.
    expect(await claimsOf('demo-acme')).not.toHaveProperty('scope');
  });

  test('the configuration read from AUTH_* variables builds a verifier that accepts its tokens', async () => {
    const problems: string[] = [];
    const config = readAuthConfig(devIssuerEnv(issuer), (name) => problems.push(name));
    expect(problems).toEqual([]);
    if (config.mode !== 'oidc' || config.oidc === undefined)
      throw new Error('expected an oidc configuration');
    const verifier = createTokenVerifier(config.oidc);
    expect((await verifier.verify(await issuer.token('demo-operator'))).operator).toBe(true);
    expect((await verifier.verify(await issuer.token('demo-acme'))).scope).toEqual({
      kind: 'customers',
      customerIds: new Set(['cus_acme']),
    });
  });

  test('the key set is found through the discovery document when no key-set URL is given', async () => {
    // A verifier per token kind, each discovering on its own first token.
    const discovering = createTokenVerifier({ issuer: issuer.issuer, audience: issuer.audience });
    const direct = createTokenVerifier({
      issuer: issuer.issuer,
      audience: issuer.audience,
      jwksUrl: issuer.jwksUrl,
    });
    const token = await issuer.token('demo-acme');
    expect((await discovering.verify(token)).subject).toBe('demo-acme');
    expect((await direct.verify(token)).subject).toBe('demo-acme');
  });

  test.each([
    ['with a trailing slash', (url: string) => `${url}/`],
    ['as localhost rather than 127.0.0.1', (url: string) => url.replace('127.0.0.1', 'localhost')],
  ])('a verifier configured with the issuer %s refuses its tokens', async (_name, variant) => {
    const verifier = createTokenVerifier({
      issuer: variant(issuer.issuer),
      audience: issuer.audience,
      jwksUrl: issuer.jwksUrl,
    });
    const error = await verifier.verify(await issuer.token('demo-acme')).catch((error: unknown) => error);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).reason).toBe('wrong_issuer');
  });

  test('a verifier for another audience refuses its tokens', async () => {
    const verifier = createTokenVerifier({ issuer: issuer.issuer, audience: 'another-api' });
    const error = await verifier.verify(await issuer.token('demo-operator')).catch((error: unknown) => error);
    expect((error as AuthenticationError).reason).toBe('wrong_audience');
  });

  test('the token endpoint refuses a wrong secret (401 invalid_client)', async () => {
    const response = await fetch(issuer.tokenUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('demo-acme:not-the-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: 'invalid_client' });
  });

  test('the token endpoint refuses a resource other than the facade (400 invalid_target)', async () => {
    const response = await fetch(issuer.tokenUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('demo-acme:demo-acme-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: 'https://other.example.test/',
      }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'invalid_target' });
  });

  test('the facade may be named explicitly as the resource', async () => {
    const response = await fetch(issuer.tokenUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('demo-acme:demo-acme-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource: issuer.resource }),
    });
    expect(response.status).toBe(200);
    const { access_token: token, token_type: tokenType } = (await response.json()) as Record<string, string>;
    expect(tokenType).toBe('Bearer');
    const verifier = createTokenVerifier({ issuer: issuer.issuer, audience: issuer.audience });
    expect((await verifier.verify(token!)).subject).toBe('demo-acme');
  });

  test('only the client credentials grant is offered', async () => {
    const response = await fetch(issuer.tokenUrl, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('demo-acme:demo-acme-secret').toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ grant_type: 'password', username: 'a', password: 'b' }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'unsupported_grant_type' });
  });
});

describe('a dev issuer with its own options', () => {
  test('clients, audience, lifetime and claim names as given', async () => {
    const issuer = await startDevIssuer({
      audience: 'https://facade.example.test/',
      accessTokenTtlSeconds: 120,
      customerIdsClaim: 'https://platform.example.test/customers',
      rolesClaim: 'groups',
      clients: [
        { clientId: 'partner', clientSecret: 'partner secret:1', roles: ['support'], customerIds: ['cus_1'] },
      ],
    });
    try {
      const token = await issuer.token('partner');
      const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<
        string,
        unknown
      >;
      expect(payload).toMatchObject({
        aud: 'https://facade.example.test/',
        groups: ['support'],
        'https://platform.example.test/customers': ['cus_1'],
      });
      expect((payload['exp'] as number) - (payload['iat'] as number)).toBe(120);
      const caller = await createTokenVerifier({
        issuer: issuer.issuer,
        audience: 'https://facade.example.test/',
        rolesClaim: 'groups',
        customerIdsClaim: 'https://platform.example.test/customers',
      }).verify(token);
      expect(caller).toMatchObject({ subject: 'partner', roles: ['support'], operator: false });
      expect(caller.scope).toEqual({ kind: 'customers', customerIds: new Set(['cus_1']) });
      await expect(issuer.token('demo-acme')).rejects.toThrow(/no client "demo-acme"/);
    } finally {
      await issuer.close();
    }
  });

  test('a restarted issuer has a new key: its earlier tokens stop verifying, its new ones verify', async () => {
    const first = await startDevIssuer();
    const port = Number(new URL(first.issuer).port);
    const before = await first.token('demo-acme');
    const firstKeys = await jwksKeyIds(first.jwksUrl);
    await first.close();

    const second = await startDevIssuer({ port });
    try {
      expect(second.issuer).toBe(first.issuer);
      const secondKeys = await jwksKeyIds(second.jwksUrl);
      expect(secondKeys).toHaveLength(1);
      expect(secondKeys).not.toEqual(firstKeys);
      // A verifier that meets the restarted issuer fresh: the new key id is fetched, the old token's is unknown.
      const verifier = createTokenVerifier({
        issuer: second.issuer,
        audience: second.audience,
        jwksUrl: second.jwksUrl,
      });
      expect((await verifier.verify(await second.token('demo-operator'))).operator).toBe(true);
      await expect(verifier.verify(before)).rejects.toBeInstanceOf(AuthenticationError);
    } finally {
      await second.close();
    }
  });
});

/** The key ids of the key set at `jwksUrl`. */
async function jwksKeyIds(jwksUrl: string): Promise<string[]> {
  const { keys } = (await (await fetch(jwksUrl)).json()) as { keys: { kid: string }[] };
  return keys.map((key) => key.kid);
}
