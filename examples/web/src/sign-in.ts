/**
 * Sign-in as a single-page app does it (OAuth 2.0 for browser-based apps): the authorization code
 * flow with PKCE through a public client, no secret. The verifier and state survive the round trip
 * to the issuer in sessionStorage; the access token is kept in memory only, so a script injected
 * later cannot find it in storage, and a reload signs in again (silently while the issuer's session
 * lasts).
 */
import type { WebConfig } from './config.ts';

export interface Session {
  accessToken: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
}

const PENDING_KEY = 'web-example.pending-sign-in';

interface PendingSignIn {
  state: string;
  verifier: string;
}

async function discover(config: WebConfig): Promise<Discovery> {
  const response = await fetch(`${config.issuer}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`The issuer's discovery answered ${response.status}`);
  return (await response.json()) as Discovery;
}

function randomString(bytes: number): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

function base64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
}

/** Where the issuer sends the browser back: this page's own origin (registered at the issuer). */
function redirectUri(): string {
  return `${window.location.origin}/`;
}

/** Sends the browser to the issuer's sign-in; it comes back with `?code=…&state=…`. */
export async function beginSignIn(config: WebConfig): Promise<void> {
  const { authorization_endpoint } = await discover(config);
  const pending: PendingSignIn = { state: randomString(16), verifier: randomString(32) };
  const challenge = base64Url(
    new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(pending.verifier))),
  );
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    scope: 'openid platform',
    resource: config.resource,
    state: pending.state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  window.location.assign(url);
}

/**
 * Finishes a sign-in when the page is the issuer's redirect back (`?code` or `?error`): checks the
 * state, exchanges the code with the verifier, and takes the code out of the address bar. Returns
 * undefined when the page was opened otherwise.
 */
export async function completeSignIn(config: WebConfig): Promise<Session | undefined> {
  const params = new URLSearchParams(window.location.search);
  const code = params.get('code');
  const error = params.get('error');
  if (code === null && error === null) return undefined;
  window.history.replaceState(null, '', redirectUri());
  const pendingText = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  if (error !== null) throw new Error(`The issuer refused the sign-in: ${error}`);
  const pending = pendingText === null ? undefined : (JSON.parse(pendingText) as PendingSignIn);
  // A code this page did not ask for (a forged link) is never exchanged.
  const mismatch = new Error('The sign-in answer does not match the request this page made; sign in again.');
  if (pending === undefined) throw mismatch;
  if (params.get('state') !== pending.state) throw mismatch;
  const { token_endpoint } = await discover(config);
  const response = await fetch(token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: config.clientId,
      code: code!,
      redirect_uri: redirectUri(),
      code_verifier: pending.verifier,
    }),
  });
  const body = (await response.json()) as { access_token?: string; expires_in?: number; error?: string };
  if (!response.ok || body.access_token === undefined) {
    throw new Error(`The issuer refused the code: ${body.error ?? String(response.status)}`);
  }
  return { accessToken: body.access_token, expiresAt: Date.now() + (body.expires_in ?? 3600) * 1000 };
}

/**
 * Who the session is for, to show on the page: the access token's subject (the issuer's user name).
 * Read without verifying, for display only: the facade verifies the token on every request.
 */
export function userOf(session: Session): string {
  try {
    const payload = session.accessToken.split('.')[1] ?? '';
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
    const claims = JSON.parse(json) as { sub?: unknown; preferred_username?: unknown };
    if (typeof claims.preferred_username === 'string') return claims.preferred_username;
    if (typeof claims.sub === 'string') return claims.sub;
  } catch {
    // Not a JWT: an opaque token names nobody the page can read.
  }
  return 'a signed-in user';
}
