/**
 * Real access tokens for the tests, from the run's OpenID provider (see identity-global-setup.ts)
 * by the client credentials grant over HTTP, and the facade environment that trusts that issuer.
 */
import { importJWK, SignJWT, type JWTPayload } from 'jose';
import { inject } from 'vitest';
import { TEST_CLIENTS, type TestCallerName } from './test-clients.ts';

export { TEST_CLIENTS, type TestCallerName } from './test-clients.ts';

/** The AUTH_* variables of a facade that trusts the run's issuer. */
export function issuerEnv(): Record<string, string> {
  const { issuer, audience } = inject('issuer');
  return { AUTH_ISSUER: issuer, AUTH_AUDIENCE: audience };
}

const cache = new Map<TestCallerName, Promise<string>>();

/** A valid access token of `caller` (cached for the test file: tokens live an hour). */
export function tokenFor(caller: TestCallerName): Promise<string> {
  let token = cache.get(caller);
  if (token === undefined) {
    token = fetchToken(caller);
    cache.set(caller, token);
    token.catch(() => cache.delete(caller));
  }
  return token;
}

/** `{ authorization: 'Bearer …' }` for `caller`. */
export async function bearer(caller: TestCallerName): Promise<{ authorization: string }> {
  return { authorization: `Bearer ${await tokenFor(caller)}` };
}

async function fetchToken(caller: TestCallerName): Promise<string> {
  const { tokenUrl, resource } = inject('issuer');
  const { clientId, clientSecret } = TEST_CLIENTS[caller];
  const response = await fetch(tokenUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource }).toString(),
  });
  const body = (await response.json()) as { access_token?: string };
  if (!response.ok || typeof body.access_token !== 'string') {
    throw new Error(
      `The test issuer refused a token for ${caller}: ${response.status} ${JSON.stringify(body)}`,
    );
  }
  return body.access_token;
}

/** The `kid` of the run's issuer's signing key (generated at the run's start). */
export function issuerKeyId(): string {
  const { kid } = inject('issuer').signingKey;
  if (kid === undefined) throw new Error("the run issuer's signing key has no kid");
  return kid;
}

/**
 * A token the run's issuer would have signed (with its signing key, generated for the run), with claims
 * chosen by the test: a subject scoped to `cus_acme` valid five minutes, over `overrides`. For
 * tokens the issuer would never hand out (expired, short-lived, odd claims).
 */
export async function issuerSignedToken(
  overrides: JWTPayload = {},
  header: { kid?: string | null; typ?: string | null } = {},
): Promise<string> {
  const kid = header.kid === undefined ? issuerKeyId() : header.kid;
  const typ = header.typ === undefined ? 'at+jwt' : header.typ;
  return new SignJWT(tokenClaims(overrides))
    .setProtectedHeader({ alg: 'RS256', ...(kid === null ? {} : { kid }), ...(typ === null ? {} : { typ }) })
    .sign(await importJWK(inject('issuer').signingKey, 'RS256'));
}

/** Claims of a valid token of the run's issuer for `cus_acme`, over `overrides` (undefined removes a claim). */
export function tokenClaims(overrides: JWTPayload = {}): JWTPayload {
  const { issuer, audience } = inject('issuer');
  const now = Math.floor(Date.now() / 1000);
  const claims: JWTPayload = {
    iss: issuer,
    aud: audience,
    sub: 'crafted-test-caller',
    client_id: 'crafted-test-caller',
    iat: now,
    exp: now + 300,
    customer_ids: ['cus_acme'],
    roles: [],
    ...overrides,
  };
  return Object.fromEntries(Object.entries(claims).filter(([, value]) => value !== undefined));
}
