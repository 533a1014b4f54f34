/**
 * Browser sign-in at the dev issuer, driven over HTTP the way a browser follows it: the
 * authorization request with PKCE, the issuer's login page, the code sent back to the app's loopback
 * address, the code exchanged for an RFC 9068 access token the facade's verifier accepts as the
 * signed-in demo user. And what it must refuse: wrong passwords, a missing or wrong PKCE verifier,
 * the token endpoint from a page of another origin, redirect URIs off loopback.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { createTokenVerifier } from '../../src/auth/token-verifier.ts';
import { startDevIssuer, useDevIssuer } from '../support/issuer.ts';

const APP = 'http://127.0.0.1:5199';
const REDIRECT_URI = `${APP}/`;

/** A browser's cookie jar, just enough for one issuer. */
class CookieJar {
  readonly #cookies = new Map<string, string>();

  header(): string {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  keep(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const separator = pair!.indexOf('=');
      this.#cookies.set(pair!.slice(0, separator), pair!.slice(separator + 1));
    }
  }
}

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

describe('browser sign-in at the dev issuer (authorization code with PKCE)', () => {
  const issuer = useDevIssuer({
    webClients: [{ clientId: 'test-web', redirectUris: [REDIRECT_URI] }],
  });

  /** Follows the browser's way from the authorization request to the login page; returns the form's action. */
  async function openLoginPage(jar: CookieJar, challenge: string | undefined): Promise<Response> {
    const authorize = new URL(`${issuer.issuer}/auth`);
    authorize.search = new URLSearchParams({
      client_id: 'test-web',
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      scope: 'openid platform',
      resource: issuer.resource,
      state: 'state-1',
      ...(challenge === undefined ? {} : { code_challenge: challenge, code_challenge_method: 'S256' }),
    }).toString();
    let response = await fetch(authorize, { redirect: 'manual' });
    for (let hops = 0; response.status >= 300 && response.status < 400 && hops < 5; hops += 1) {
      jar.keep(response);
      const next = new URL(response.headers.get('location')!, issuer.issuer);
      if (!next.href.startsWith(issuer.issuer)) return response;
      response = await fetch(next, { redirect: 'manual', headers: { cookie: jar.header() } });
    }
    jar.keep(response);
    return response;
  }

  async function signIn(username: string, password: string, challenge: string): Promise<URL> {
    const jar = new CookieJar();
    const page = await openLoginPage(jar, challenge);
    expect(page.status).toBe(200);
    const html = await page.text();
    const action = /action="([^"]+)"/.exec(html)![1]!;
    let response = await fetch(new URL(action, issuer.issuer), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username, password }).toString(),
    });
    // The login finishes the interaction; the authorization resumes and sends the browser back.
    for (let hops = 0; hops < 5; hops += 1) {
      jar.keep(response);
      expect(response.status).toBeGreaterThanOrEqual(300);
      const next = new URL(response.headers.get('location')!, issuer.issuer);
      if (next.origin === APP) return next;
      response = await fetch(next, { redirect: 'manual', headers: { cookie: jar.header() } });
    }
    throw new Error('the sign-in never came back to the app');
  }

  function exchange(code: string, verifier: string | undefined, origin = APP) {
    return fetch(`${issuer.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        client_id: 'test-web',
        code,
        redirect_uri: REDIRECT_URI,
        ...(verifier === undefined ? {} : { code_verifier: verifier }),
      }).toString(),
    });
  }

  test("a demo user signs in; the app's origin exchanges the code for a JWT the facade accepts as that user", async () => {
    const { verifier, challenge } = pkce();
    const back = await signIn('acme', 'acme-demo-password', challenge);
    expect(back.searchParams.get('state')).toBe('state-1');
    const code = back.searchParams.get('code')!;

    const response = await exchange(code, verifier);
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe(APP);
    const body = (await response.json()) as { access_token: string; token_type: string };
    expect(body.token_type).toBe('Bearer');

    const verifierOfFacade = createTokenVerifier({ issuer: issuer.issuer, audience: issuer.audience });
    const caller = await verifierOfFacade.verify(body.access_token);
    expect(caller).toMatchObject({ subject: 'acme', clientId: 'test-web', operator: false, roles: [] });
    expect(caller.scope).toEqual({ kind: 'customers', customerIds: new Set(['cus_acme']) });

    // A code is good once.
    const again = await exchange(code, verifier);
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({ error: 'invalid_grant' });
  });

  test('a wrong password is answered 401 on the login page and sends nothing back to the app', async () => {
    const jar = new CookieJar();
    const page = await openLoginPage(jar, pkce().challenge);
    const action = /action="([^"]+)"/.exec(await page.text())![1]!;
    const response = await fetch(new URL(action, issuer.issuer), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: 'acme', password: 'guess' }).toString(),
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('location')).toBeNull();
    expect(await response.text()).toContain('Unknown user or wrong password.');
  });

  test('the code is refused without the PKCE verifier, or with another one', async () => {
    const { challenge } = pkce();
    const code = (await signIn('acme', 'acme-demo-password', challenge)).searchParams.get('code')!;
    const without = await exchange(code, undefined);
    expect(without.status).toBe(400);

    const { challenge: challenge2 } = pkce();
    const code2 = (await signIn('acme', 'acme-demo-password', challenge2)).searchParams.get('code')!;
    const wrong = await exchange(code2, pkce().verifier);
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_grant' });
  });

  test('an authorization request without PKCE is refused before any login page', async () => {
    const response = await openLoginPage(new CookieJar(), undefined);
    // The error goes back to the registered redirect URI, never to a login page.
    expect(response.status).toBe(303);
    const back = new URL(response.headers.get('location')!);
    expect(back.origin).toBe(APP);
    expect(back.searchParams.get('error')).toBe('invalid_request');
  });

  test('a page of another origin may not call the token endpoint', async () => {
    const { verifier, challenge } = pkce();
    const code = (await signIn('acme', 'acme-demo-password', challenge)).searchParams.get('code')!;
    const response = await exchange(code, verifier, 'https://evil.example.com');
    expect(response.status).toBe(400);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('a web client redirecting off loopback is refused at start', async () => {
    await expect(
      startDevIssuer({ webClients: [{ clientId: 'web', redirectUris: ['https://app.example.com/'] }] }),
    ).rejects.toThrow(/loopback URLs only, got "https:\/\/app.example.com\/"/);
  });
});
