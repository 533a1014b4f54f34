/**
 * A real OpenID provider (oidc-provider) for the demo and the tests: the client credentials grant
 * for servers, and browser sign-in of the demo users through public clients (authorization code
 * with PKCE, see web-sign-in.ts), issuing RFC 9068 JWT access tokens for the facade's audience, with
 * each client's or user's customer ids and roles as claims. The facade verifies its tokens exactly as it would a production identity
 * provider's. Like emulator/, it imports nothing from src/: the two meet only over HTTP.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { Agent, fetch } from 'undici';
import Provider, { errors, type Adapter, type AdapterPayload, type ClientMetadata } from 'oidc-provider';
import {
  DEMO_USERS,
  DEMO_WEB_CLIENTS,
  handleLoginPage,
  webClientMetadata,
  webClientOrigins,
  type DevIssuerUser,
  type DevIssuerWebClient,
} from './web-sign-in.ts';

export { DEMO_USERS, DEMO_WEB_CLIENTS, type DevIssuerUser, type DevIssuerWebClient };

/** A confidential client that gets tokens with its id and secret. */
export interface DevIssuerClient {
  clientId: string;
  clientSecret: string;
  /** Put in the roles claim (omitted when undefined). */
  roles?: readonly string[];
  /** Put in the customer ids claim (omitted when undefined). */
  customerIds?: readonly string[];
  /**
   * Put in the environment claim (omitted when undefined): the upstream environment (`sandbox` or
   * `live`) a facade serving both binds the client to.
   */
  environment?: 'sandbox' | 'live';
  /**
   * Put in the contract claim (omitted when undefined): the contract (filtered schema) the facade
   * serves the client, e.g. `partner`.
   */
  contract?: string;
}

export interface DevIssuerOptions {
  /** The `aud` of every token and the only resource indicator accepted (default `platform-graphql-facade`). */
  audience?: string;
  /** Clients (default {@link DEMO_CLIENTS}). */
  clients?: readonly DevIssuerClient[];
  /** Public browser clients signing users in with PKCE (default {@link DEMO_WEB_CLIENTS}). */
  webClients?: readonly DevIssuerWebClient[];
  /** Who may sign in on the login page (default {@link DEMO_USERS}). */
  users?: readonly DevIssuerUser[];
  /** Lifetime of access tokens (default 3600). */
  accessTokenTtlSeconds?: number;
  /**
   * Private signing JWK with `kid`. Default: a fresh RS256 key generated at this start and never
   * written anywhere, so no key in the repository can sign a token this issuer's key set verifies
   * (tokens issued before a restart stop verifying).
   */
  signingKey?: JWK;
  /** Name of the customer ids claim (default `customer_ids`, the facade's default). */
  customerIdsClaim?: string;
  /** Name of the roles claim (default `roles`, the facade's default). */
  rolesClaim?: string;
  /** Name of the environment claim (default `environment`, the facade's default). */
  environmentClaim?: string;
  /** Name of the contract claim (default `contract`, the facade's default). */
  contractClaim?: string;
  /** Interface to listen on (default `127.0.0.1`). */
  host?: string;
  /** Port (default 0: a free one). */
  port?: number;
  /**
   * The issuer identifier (`iss`, and the base of its endpoints' URLs) when it is not
   * `http://<host>:<port>`: e.g. `http://dev-issuer:4200` for a container listening on 0.0.0.0.
   */
  issuerUrl?: string;
}

export interface DevIssuer {
  /** `http://<host>:<port>`, exactly the tokens' `iss` (no trailing slash). */
  issuer: string;
  jwksUrl: string;
  tokenUrl: string;
  audience: string;
  /** The resource indicator (RFC 8707) of the facade: the audience, or `urn:<audience>` when not a URI. Optional in requests. */
  resource: string;
  clients: readonly DevIssuerClient[];
  webClients: readonly DevIssuerWebClient[];
  users: readonly DevIssuerUser[];
  /** A fresh access token for a configured client, by the client credentials grant over HTTP. */
  token(clientId: string): Promise<string>;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

export const DEFAULT_AUDIENCE = 'platform-graphql-facade';

/** The scope granted on the facade's resource. */
const RESOURCE_SCOPE = 'platform';

/**
 * Demo clients. Their secrets are public: the issuer is safe only where strangers cannot reach its
 * token endpoint (loopback by default; compose.yaml publishes it on the host's loopback only).
 */
export const DEMO_CLIENTS: readonly DevIssuerClient[] = Object.freeze([
  { clientId: 'demo-operator', clientSecret: 'demo-operator-secret', roles: ['operator'] },
  { clientId: 'demo-acme', clientSecret: 'demo-acme-secret', roles: [], customerIds: ['cus_acme'] },
]);

/** Starts the issuer on loopback; resolves once it listens. Always `close()` it. */
export async function startDevIssuer(options: DevIssuerOptions = {}): Promise<DevIssuer> {
  const audience = options.audience ?? DEFAULT_AUDIENCE;
  const clients = options.clients ?? DEMO_CLIENTS;
  const ttl = options.accessTokenTtlSeconds ?? 3600;
  const signingKey = options.signingKey ?? (await generateSigningKey());
  const customerIdsClaim = options.customerIdsClaim ?? 'customer_ids';
  const rolesClaim = options.rolesClaim ?? 'roles';
  const environmentClaim = options.environmentClaim ?? 'environment';
  const contractClaim = options.contractClaim ?? 'contract';
  const host = options.host ?? '127.0.0.1';
  // RFC 8707 wants the resource indicator to be an absolute URI; the audience need not be one.
  const resource = URL.canParse(audience) ? audience : `urn:${audience}`;
  const webClients = options.webClients ?? DEMO_WEB_CLIENTS;
  const users = options.users ?? DEMO_USERS;
  const byId = new Map(clients.map((client) => [client.clientId, client]));
  const webById = new Map(webClients.map((client) => [client.clientId, client]));
  if (
    byId.size !== clients.length ||
    webById.size !== webClients.length ||
    clients.some(({ clientId }) => webById.has(clientId))
  )
    throw new Error('startDevIssuer: client ids must be unique');
  const usersByName = new Map(users.map((user) => [user.username, user]));
  /** Whom a token was issued to: a signed-in user's token names its account; a server's, its client. */
  const holderOf = (token: object & { clientId?: string | undefined }) =>
    'accountId' in token && typeof token.accountId === 'string'
      ? usersByName.get(token.accountId)
      : token.clientId === undefined
        ? undefined
        : byId.get(token.clientId);
  const webMetadata = webClients.map(webClientMetadata);
  const webOrigins = new Map(webClients.map((client) => [client.clientId, webClientOrigins(client)]));

  // The issuer URL holds the port, so the server listens first and gets its handler after. Idle
  // connections are kept 10 s past the advertised 5 s (Node's slack is 1 s): a verifier whose process
  // was busy may send its key-set request on a connection it still thinks fresh, and should not get
  // a reset for it (see src/http/server-timeouts.ts).
  const server = http.createServer({ keepAliveTimeoutBuffer: 10_000 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const issuer =
    options.issuerUrl?.replace(/\/+$/, '') ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  const provider = new Provider(issuer, {
    adapter: createMemoryAdapter(),
    clients: [
      ...clients.map((client): ClientMetadata => ({
        client_id: client.clientId,
        client_secret: client.clientSecret,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_basic',
      })),
      ...webMetadata,
    ],
    jwks: { keys: [signingKey] },
    // Sessions and interactions live as long as the process: a key of its own per start.
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    findAccount: (_ctx, id) => {
      const user = usersByName.get(id);
      return user === undefined ? undefined : { accountId: id, claims: () => ({ sub: id }) };
    },
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      introspection: { enabled: false },
      revocation: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resourceIndicator) => {
          // An unknown resource is the client's mistake (400 invalid_target), not a server error.
          if (resourceIndicator !== resource) throw new errors.InvalidTarget();
          return {
            audience,
            scope: RESOURCE_SCOPE,
            accessTokenTTL: ttl,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: signingAlgorithm(signingKey) } },
          };
        },
      },
    },
    extraTokenClaims: (_ctx, token) => {
      // A signed-in user's token carries the user's claims; a server's, its client's.
      const holder = holderOf(token);
      if (holder === undefined) return undefined;
      return {
        ...(holder.roles === undefined ? {} : { [rolesClaim]: [...holder.roles] }),
        ...(holder.customerIds === undefined ? {} : { [customerIdsClaim]: [...holder.customerIds] }),
        ...(holder.environment === undefined ? {} : { [environmentClaim]: holder.environment }),
        ...(holder.contract === undefined ? {} : { [contractClaim]: holder.contract }),
      };
    },
    formats: {
      customizers: {
        // RFC 9068's space-separated `scope` claim, which gateways check at the edge (Apollo
        // Router's and Hive Gateway's `@requiresScopes`): the holder's roles, e.g. "operator".
        // Set here because oidc-provider writes `scope` after the extra claims, from the scopes
        // the request named, and the demo clients name none.
        jwt: (_ctx, token, jwt) => {
          const holder = holderOf(token);
          const requested = typeof jwt.payload.scope === 'string' ? jwt.payload.scope.split(' ') : [];
          const scopes = new Set([...requested, ...(holder?.roles ?? [])]);
          scopes.delete('');
          if (scopes.size > 0) jwt.payload.scope = [...scopes].join(' ');
        },
      },
    },
    ttl: {
      ClientCredentials: ttl,
      AccessToken: ttl,
      AuthorizationCode: 60,
      IdToken: ttl,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
    },
    // Browsers may call the token endpoint only from the pages of the web client asking.
    clientBasedCORS: (_ctx, origin, client) => webOrigins.get(client.clientId)?.has(origin) === true,
  });
  // Koa prints every 500 to stderr unless silenced; the token endpoint's answers say enough.
  provider.silent = true;
  // Koa answers a failure of its own (ctx.onerror), so the handler's promise never rejects.
  const handleRequest = provider.callback();
  const loginPage = {
    provider,
    users,
    resource,
    resourceScope: RESOURCE_SCOPE,
    originsOf: (clientId: string): ReadonlySet<string> => webOrigins.get(clientId) ?? new Set(),
  };
  server.on('request', (request, response) => {
    if (!handleLoginPage(loginPage, request, response)) void handleRequest(request, response);
  });

  // Its own connections, closed with it: a pooled socket to a closed issuer would fail the next
  // token request of an issuer restarted on the same port.
  const dispatcher = new Agent();
  const tokenUrl = `${issuer}/token`;
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    tokenUrl,
    audience,
    resource,
    clients,
    webClients,
    users,
    async token(clientId) {
      const client = byId.get(clientId);
      if (client === undefined) throw new Error(`startDevIssuer: no client ${JSON.stringify(clientId)}`);
      const response = await fetch(tokenUrl, {
        dispatcher,
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${encodeForm(client.clientId)}:${encodeForm(client.clientSecret)}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
      });
      const body = (await response.json()) as { access_token?: string; error?: string };
      if (response.status !== 200 || typeof body.access_token !== 'string') {
        throw new Error(`The dev issuer answered ${response.status} ${body.error ?? ''} for ${clientId}`);
      }
      return body.access_token;
    },
    async close() {
      await dispatcher.close();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}

/**
 * A fresh RS256 private JWK with a random `kid`: a restart publishes a key set no verifier has
 * cached under that id, so a verifier fetches it rather than failing on a stale key of the same id.
 */
export async function generateSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: `dev-issuer-${randomUUID()}`, alg: 'RS256', use: 'sig' };
}

/** RFC 6749 §2.3.1: client id and secret are form-encoded before Basic authentication. */
function encodeForm(value: string): string {
  return encodeURIComponent(value).replace(/%20/g, '+');
}

const SIGNING_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;

function signingAlgorithm(key: JWK): (typeof SIGNING_ALGORITHMS)[number] {
  const named = SIGNING_ALGORITHMS.find((alg) => alg === key.alg);
  if (named !== undefined) return named;
  if (key.kty === 'RSA') return 'RS256';
  if (key.kty === 'EC' && key.crv === 'P-256') return 'ES256';
  if (key.kty === 'OKP' && key.crv === 'Ed25519') return 'EdDSA';
  throw new Error('startDevIssuer: the signing key must be RSA, EC P-256 or Ed25519');
}

/**
 * oidc-provider's storage, in memory and per issuer (its own in-memory adapter does the same, but
 * prints a warning at every start). Client-credentials JWTs are not even stored.
 */
function createMemoryAdapter(): (model: string) => Adapter {
  const stores = new Map<string, Map<string, AdapterPayload>>();
  return (model) => {
    const store = stores.get(model) ?? new Map<string, AdapterPayload>();
    stores.set(model, store);
    const findWhere = (test: (payload: AdapterPayload) => boolean) => [...store.values()].find(test);
    return {
      async upsert(id, payload) {
        store.set(id, payload);
      },
      async find(id) {
        return store.get(id);
      },
      async findByUserCode(userCode) {
        return findWhere((payload) => payload.userCode === userCode);
      },
      async findByUid(uid) {
        return findWhere((payload) => payload.uid === uid);
      },
      async consume(id) {
        const payload = store.get(id);
        if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000);
      },
      async destroy(id) {
        store.delete(id);
      },
      async revokeByGrantId(grantId) {
        for (const [id, payload] of store) if (payload.grantId === grantId) store.delete(id);
      },
    };
  };
}
