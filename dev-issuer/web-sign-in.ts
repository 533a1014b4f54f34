/**
 * Browser sign-in at the dev issuer, the way a single-page app signs a person in: a public client
 * (no secret: `token_endpoint_auth_method: none`) using the authorization code flow with PKCE, and a
 * login page of the issuer's own that knows only the demo users, whose passwords are as public as
 * the demo key. A code is only ever sent back to a loopback address, and the login page answers only
 * loopback callers: this is a local demo, never an identity provider for anyone else.
 */
import type http from 'node:http';
import type { ClientMetadata, Provider } from 'oidc-provider';

/** A public browser client: a single-page app that signs users in with PKCE. */
export interface DevIssuerWebClient {
  clientId: string;
  /**
   * Where the issuer may send the browser back with a code, each exact; loopback only
   * (`http://127.0.0.1:<port>/...`, `http://localhost:<port>/...`, `http://[::1]:<port>/...`). Their
   * origins may call the token endpoint from the browser (CORS).
   */
  redirectUris: readonly string[];
}

/** A person who can sign in on the issuer's login page. */
export interface DevIssuerUser {
  /** The login name, and the tokens' `sub`. */
  username: string;
  /** Public, like every demo secret. */
  password: string;
  /** Put in the roles claim (omitted when undefined). */
  roles?: readonly string[];
  /** Put in the customer ids claim (omitted when undefined). */
  customerIds?: readonly string[];
  /** Put in the environment claim (omitted when undefined): the upstream environment it is in. */
  environment?: 'sandbox' | 'live';
  /** Put in the contract claim (omitted when undefined): the contract the facade serves the user. */
  contract?: string;
}

/** The example web app (examples/web/), served on port 5173 by `npm run example:web`. */
export const DEMO_WEB_CLIENTS: readonly DevIssuerWebClient[] = Object.freeze([
  { clientId: 'demo-web', redirectUris: ['http://127.0.0.1:5173/', 'http://localhost:5173/'] },
]);

/** Demo users: their passwords are as public as the demo key. */
export const DEMO_USERS: readonly DevIssuerUser[] = Object.freeze([
  { username: 'acme', password: 'acme-demo-password', roles: [], customerIds: ['cus_acme'] },
  { username: 'ada', password: 'ada-demo-password', roles: [], customerIds: ['cus_ada'] },
]);

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * oidc-provider's metadata for `client`.
 *
 * @throws {Error} when a redirect URI is not an exact http(s) loopback URL.
 */
export function webClientMetadata(client: DevIssuerWebClient): ClientMetadata {
  if (client.redirectUris.length === 0) {
    throw new Error(`startDevIssuer: the web client ${client.clientId} needs a redirect URI`);
  }
  for (const uri of client.redirectUris) {
    const url = URL.parse(uri);
    if (
      url === null ||
      !/^https?:$/.test(url.protocol) ||
      !LOOPBACK_HOSTS.has(url.hostname) ||
      url.hash !== ''
    ) {
      throw new Error(
        `startDevIssuer: the web client ${client.clientId} may redirect to loopback URLs only, got ${JSON.stringify(uri)}`,
      );
    }
  }
  return {
    client_id: client.clientId,
    application_type: 'web',
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: [...client.redirectUris],
  };
}

/** The origins a web client's pages are served from: they may call the token endpoint. */
export function webClientOrigins(client: DevIssuerWebClient): Set<string> {
  return new Set(client.redirectUris.map((uri) => new URL(uri).origin));
}

export interface LoginPageOptions {
  provider: Provider;
  users: readonly DevIssuerUser[];
  /** The resource indicator of the facade, and the scope granted on it. */
  resource: string;
  resourceScope: string;
  /** The origins a web client's redirect URIs are on: the login form's answer redirects there. */
  originsOf(clientId: string): ReadonlySet<string>;
}

const INTERACTION_PATH = /^\/interaction\/([A-Za-z0-9_-]{1,64})(\/login)?$/;

/**
 * Handles `/interaction/<uid>` (the login form) and `/interaction/<uid>/login` (its submission);
 * returns false for any other path, which oidc-provider answers. A correct login grants the client
 * `openid` and the facade's resource scope at once: the demo's own app needs no consent screen.
 */
export function handleLoginPage(
  options: LoginPageOptions,
  request: http.IncomingMessage,
  response: http.ServerResponse,
): boolean {
  const match = INTERACTION_PATH.exec(new URL(request.url ?? '/', 'http://issuer.invalid').pathname);
  if (match === null) return false;
  void answerLoginPage(options, request, response, match[2] !== undefined).catch((error: unknown) => {
    // An expired or unknown interaction (oidc-provider's SessionNotFound) is the usual failure here.
    const message = error instanceof Error ? error.message : 'the sign-in could not continue';
    if (!response.headersSent)
      sendPage(response, 400, page('Sign-in failed', `<p>${escapeHtml(message)}</p>`));
  });
  return true;
}

async function answerLoginPage(
  options: LoginPageOptions,
  request: http.IncomingMessage,
  response: http.ServerResponse,
  submitted: boolean,
): Promise<void> {
  if (!isLoopback(request.socket.remoteAddress)) {
    sendPage(response, 403, page('Not here', '<p>The demo login answers on loopback only.</p>'));
    return;
  }
  const interaction = await options.provider.interactionDetails(request, response);
  if (interaction.prompt.name !== 'login') {
    sendPage(
      response,
      400,
      page('Sign-in failed', '<p>Nothing to sign in to: start again from the app.</p>'),
    );
    return;
  }
  const clientId = String(interaction.params['client_id']);
  if (!submitted || request.method !== 'POST') {
    sendPage(
      response,
      200,
      loginForm(interaction.uid, clientId, options.users, undefined),
      options.originsOf(clientId),
    );
    return;
  }
  const form = new URLSearchParams(await readBody(request));
  const user = options.users.find(
    (candidate) => candidate.username === form.get('username') && candidate.password === form.get('password'),
  );
  if (user === undefined) {
    sendPage(
      response,
      401,
      loginForm(interaction.uid, clientId, options.users, 'Unknown user or wrong password.'),
      options.originsOf(clientId),
    );
    return;
  }
  const grant = new options.provider.Grant({ accountId: user.username, clientId });
  grant.addOIDCScope('openid');
  grant.addResourceScope(options.resource, options.resourceScope);
  const grantId = await grant.save();
  await options.provider.interactionFinished(
    request,
    response,
    { login: { accountId: user.username }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}

function loginForm(
  uid: string,
  clientId: string,
  users: readonly DevIssuerUser[],
  problem: string | undefined,
): string {
  const demo = users
    .map(
      (user) =>
        `<li><code>${escapeHtml(user.username)}</code> / <code>${escapeHtml(user.password)}</code></li>`,
    )
    .join('');
  return page(
    'Sign in to the demo',
    `<p><strong>${escapeHtml(clientId)}</strong> asks you to sign in.</p>
${problem === undefined ? '' : `<p role="alert">${escapeHtml(problem)}</p>`}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
  <label>User <input name="username" autocomplete="username" required autofocus></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit">Sign in</button>
</form>
<p>Demo users only (local use; these passwords are public):</p><ul>${demo}</ul>`,
  );
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto}label{display:block;margin:.5rem 0}</style>
</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

function sendPage(
  response: http.ServerResponse,
  status: number,
  html: string,
  formTargets: ReadonlySet<string> = new Set(),
): void {
  // A form's redirects count as its target: a login's answer goes on to the app's redirect URI.
  const formAction = ["'self'", ...formTargets].join(' ');
  response.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    // A login form is never framed (clickjacking), runs no script, and sends only here and on to the app.
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; form-action ${formAction}; frame-ancestors 'none'`,
    'x-frame-options': 'DENY',
  });
  response.end(html);
}

/** A login form is a few dozen bytes; anything far larger is not one. */
const MAX_FORM_BYTES = 4096;

async function readBody(request: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new Error('The form is too large.');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function isLoopback(address: string | undefined): boolean {
  return (
    address === '::1' || address?.startsWith('127.') === true || address?.startsWith('::ffff:127.') === true
  );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}
