/**
 * Hive Gateway's configuration for compose.yaml and deploy/kubernetes (mounted as
 * /gateway/gateway.config.ts into the official image, ghcr.io/graphql-hive/gateway), for its
 * scripted twin (scripts/compose-twin.ts, which runs the `hive-gateway` CLI with it) and for the
 * tests that run the gateway runtime in process. deploy/gateway.config.ts links to this file.
 *
 * At the edge, before any subgraph is called, it refuses:
 * - a request without a valid access token of `AUTH_ISSUER` for `AUTH_AUDIENCE` (401), with the
 *   issuer's key set found at `AUTH_JWKS_URL` (default `<AUTH_ISSUER>/jwks`, the dev issuer's). The
 *   token is read where the facade reads it: over graphql-ws from `connection_init`'s
 *   `Authorization` (what browsers can send), else from the `Authorization` header (over graphql-ws,
 *   the upgrade request's); each operation on a socket is checked again;
 * - a field the caller may not reach by the supergraph's `@authenticated` and `@requiresScopes`
 *   (the token's space-separated `scope` claim): the whole operation, not just the field;
 * - an operation whose estimated cost, by the supergraph's `@cost` and `@listSize`, is above
 *   `GATEWAY_MAX_COST` (default {@link DEFAULT_MAX_COST}).
 * Without `AUTH_ISSUER` and `AUTH_AUDIENCE` every request is refused: the edge fails closed.
 *
 * It forwards what the facade reads from a caller, which verifies the token itself too: its
 * request id (so upstream correlation ids tie back to the client's request), the bearer token
 * verified here (wherever the caller put it) and a server-side caller's own upstream key; and the
 * client's address as the one entry of `X-Forwarded-For`, which the facade believes one hop deep
 * (`TRUST_PROXY=1`), so its per-address budgets count the clients rather than the gateway: the
 * address it saw, or with `GATEWAY_TRUST_PROXY=<n>` proxies in front of it (an Ingress) the one
 * they appended, n hops back (what a client wrote there itself is never passed on).
 *
 * Its own identity, for inline traces (`ftv1`, docs/federation.md): with `GATEWAY_CLIENT_ID` and
 * `GATEWAY_CLIENT_SECRET`, it gets a token of its own from the issuer (client credentials, at the
 * issuer's `token_endpoint` or `GATEWAY_TOKEN_URL`, renewed before it expires) and sends it to the
 * facade beside the caller's, as `X-Gateway-Authorization`; with `GATEWAY_INLINE_TRACES=true` it also
 * asks for a trace (`apollo-federation-include-trace: ftv1`). The facade traces only a request whose
 * gateway token holds the `gateway` role; neither header is ever taken from a client. The same
 * token goes in graphql-ws's connection params, where it makes the gateway's one socket per caller a
 * multiplexer the facade's per-connection cap does not bound (its per-caller caps do). With
 * `GATEWAY_METRICS=true` it serves Prometheus metrics on `/metrics`. A query whose subgraph request
 * got no answer at all (a lost connection) is sent once more; a mutation never is.
 * Subscriptions, whichever transport the client used (graphql-ws or server-sent events), go to the
 * facade over graphql-ws (`@graphql-mesh/transport-ws`, which the image ships) on its `/graphql`
 * path, with that token and key as connection params: the facade applies the caller's scope and
 * ends the subscription when the token expires. The gateway resolves the other subgraphs' fields of
 * each event (e.g. `Customer.openSupportNoteCount`) as in a query.
 *
 * The image loads this file by itself, so it imports nothing but Node's own modules (types aside).
 */
import { createPublicKey, generateKeyPairSync, type JsonWebKey } from 'node:crypto';
import type { GatewayConfigSupergraph, GatewayPlugin } from '@graphql-hive/gateway-runtime';
import type { JWTAuthPluginOptions } from '@graphql-mesh/plugin-jwt-auth';
import { useApolloMultipartSubscriptions } from './gateway-multipart-subscriptions.ts';
import { useFacadeResponseCache } from './gateway-response-cache.ts';

/** Headers passed from the client request to every subgraph request. */
export const FORWARDED_HEADERS = ['authorization', 'x-request-id', 'x-api-key'] as const;

/** Where the JWT plugin puts the verified token in the GraphQL context, and genericAuth reads its user. */
const JWT_CONTEXT_FIELD = 'jwt';

/** A token as the JWT plugin leaves it in the context once verified. */
type VerifiedToken = {
  payload: Record<string, unknown>;
  token: { value: string; prefix?: string };
};

/** The token the JWT plugin verified for this operation, if it did. */
function verifiedTokenOf(context: unknown): VerifiedToken | undefined {
  return (context as Partial<Record<typeof JWT_CONTEXT_FIELD, VerifiedToken>> | undefined)?.[
    JWT_CONTEXT_FIELD
  ];
}

/** A token found in a request, before verification. */
type BearerToken = { token: string; prefix: string };

/** The highest estimated cost accepted by default: the same as router.yaml's `demand_control`. */
export const DEFAULT_MAX_COST = 1000;

/**
 * How long the CLI lets requests in flight at SIGTERM finish before it closes every connection (its
 * `gracefulShutdownTimeout`). Its default, 0, closes them at once, so a query the gateway was
 * running when its pod stopped failed with a closed socket (the game day's gateway restart). 20 s:
 * within deploy/kubernetes/gateway.yaml's 30 s grace after its 5 s preStop.
 */
const GATEWAY_SHUTDOWN_GRACE_MS = 20_000;

/** The length assumed for a list without `@listSize` (Apollo Router's `list_size`). */
export const ASSUMED_LIST_SIZE = 10;

/** Signing algorithms accepted; an HMAC (`HS*`) token is never accepted. */
const ALGORITHMS = ['RS256', 'PS256', 'ES256'] as const;

/** How long a fetched key set is trusted before an unknown key id may fetch it again. */
const KEY_SET_REFRESH_MS = 30_000;

/** How long one fetch of the key set may take. */
const KEY_SET_TIMEOUT_MS = 10_000;

/**
 * The key given for a token whose key id the issuer does not publish (or that names none): a
 * public key of this process's own, which verifies no token, so the JWT plugin answers 401 as for
 * any invalid token. A key provider that throws makes the plugin answer 500 instead.
 */
const NO_KEY_OF_THE_ISSUER = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  .publicKey.export({ type: 'spki', format: 'pem' })
  .toString();

/** What the edge checks tokens and costs against. */
export interface EdgeOptions {
  /** `AUTH_ISSUER`: a token's `iss`, byte for byte. Undefined: every request is refused. */
  issuer: string | undefined;
  /** `AUTH_AUDIENCE`: a token's `aud`. Undefined: every request is refused. */
  audience: string | undefined;
  /** `AUTH_JWKS_URL`: the issuer's key set (default `<issuer>/jwks`). */
  jwksUrl?: string;
  /** `GATEWAY_MAX_COST`: the highest estimated cost of an accepted operation. */
  maxCost?: number;
  /** `GATEWAY_TRUST_PROXY`: proxies in front of the gateway whose `X-Forwarded-For` entry is believed. */
  trustProxy?: number;
  /** `GATEWAY_METRICS`: Prometheus metrics on `/metrics`. */
  metrics?: boolean;
  /** The gateway's own client at the issuer (`GATEWAY_CLIENT_ID`, `GATEWAY_CLIENT_SECRET`). */
  client?: { id: string; secret: string; tokenUrl?: string };
  /** `GATEWAY_INLINE_TRACES`: ask the facade for inline traces (needs {@link client}). */
  inlineTraces?: boolean;
}

/** The gateway's configuration: the runtime's options and the CLI's `jwt` option. */
export type EdgeGatewayConfig = Omit<GatewayConfigSupergraph, 'supergraph'> & {
  /** The CLI's built-in JWT plugin options; in process, give them to `useJWT` as the CLI does. */
  jwt: JWTAuthPluginOptions;
  /** The CLI's drain at SIGTERM ({@link GATEWAY_SHUTDOWN_GRACE_MS}); no runtime option. */
  gracefulShutdownTimeout: number;
};

/** The edge's options from the same variables the facade reads, plus `GATEWAY_MAX_COST`. */
export function edgeOptionsFromEnv(env: NodeJS.ProcessEnv): EdgeOptions {
  const given = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const jwksUrl = given('AUTH_JWKS_URL');
  const maxCost = Number(given('GATEWAY_MAX_COST'));
  const trustProxy = Number(given('GATEWAY_TRUST_PROXY') ?? 0);
  const clientId = given('GATEWAY_CLIENT_ID');
  const clientSecret = given('GATEWAY_CLIENT_SECRET');
  const tokenUrl = given('GATEWAY_TOKEN_URL');
  return {
    issuer: given('AUTH_ISSUER'),
    audience: given('AUTH_AUDIENCE'),
    ...(jwksUrl === undefined ? {} : { jwksUrl }),
    ...(Number.isFinite(maxCost) && maxCost > 0 ? { maxCost } : {}),
    ...(Number.isInteger(trustProxy) && trustProxy > 0 ? { trustProxy } : {}),
    metrics: given('GATEWAY_METRICS') === 'true',
    ...(clientId === undefined || clientSecret === undefined
      ? {}
      : { client: { id: clientId, secret: clientSecret, ...(tokenUrl === undefined ? {} : { tokenUrl }) } }),
    inlineTraces: given('GATEWAY_INLINE_TRACES') === 'true',
  };
}

/** The gateway's configuration for `edge`. */
export function createGatewayConfig(edge: EdgeOptions): EdgeGatewayConfig {
  const ownToken = edge.client === undefined ? undefined : createOwnTokenSource(edge, edge.client);
  return {
    gracefulShutdownTimeout: GATEWAY_SHUTDOWN_GRACE_MS,
    deferStream: true,
    ...(edge.metrics === true ? { prometheus: { metrics: true, endpoint: '/metrics' } } : {}),
    ...(ownToken === undefined ? {} : { plugins: () => [ownTokenInContext(ownToken)] }),
    upstreamRetry: retryQueriesOnLostConnections(),
    jwt: {
      // Where the facade reads it too: graphql-ws's `connection_init` payload first (browsers
      // cannot set headers on a WebSocket), then the `Authorization` header of the request (over
      // graphql-ws, of the upgrade request).
      tokenLookupLocations: [connectionParamsToken, headerToken],
      extendContext: JWT_CONTEXT_FIELD,
      signingKeyProviders: [createKeySetProvider(edge)],
      tokenVerification: {
        algorithms: [...ALGORITHMS],
        // Never undefined (which would check nothing): without them no token can match.
        issuer: edge.issuer ?? 'urn:unconfigured-issuer',
        audience: edge.audience ?? 'urn:unconfigured-audience',
      },
      reject: { missingToken: true, invalidToken: true },
    },
    genericAuth: {
      // `@authenticated` and `@requiresScopes` of the supergraph; an operation that selects a field
      // the caller may not reach is refused whole, before any subgraph call.
      mode: 'protect-granular',
      // The user is the JWT plugin's own context field, read when the operation is validated. Over
      // graphql-ws the plugin verifies the token while the context is built, after this plugin
      // has resolved its user (HTTP verifies it earlier, while the request is parsed): a user copied
      // into a field of this plugin's own would be missing there.
      // (The runtime's type names only the default field; the plugin takes any.)
      contextFieldName: JWT_CONTEXT_FIELD as 'currentUser',
      resolveUserFn: (context) => verifiedTokenOf(context) ?? null,
      // No user has no scopes, and is refused as unauthenticated: never a crash.
      extractScopes: (user: Record<string, unknown> | null | undefined) => {
        const scope = (user?.payload as Record<string, unknown> | undefined)?.scope;
        return typeof scope === 'string' ? scope.split(' ').filter(Boolean) : [];
      },
      rejectUnauthenticated: true,
    },
    demandControl: {
      maxCost: edge.maxCost ?? DEFAULT_MAX_COST,
      listSize: ASSUMED_LIST_SIZE,
    },
    transportEntries: {
      platform: {
        options: {
          subscriptions: {
            kind: 'ws',
            location: '/graphql',
            options: {
              // The credentials the facade reads from connection_init: the token this gateway
              // verified, wherever the caller put it, and a caller's own key. The transport opens
              // one connection per distinct set of them, so callers never share a socket, and the
              // facade checks the token again (its scope, and its expiry on the open socket).
              connectionParams: {
                authorization: `Bearer {context.${JWT_CONTEXT_FIELD}.token.value}`,
                'X-API-Key': '{context.headers.x-api-key}',
                // Its own token, when it has a client of its own: the facade then carries every
                // operation of the caller on this one socket, past its per-connection cap (its
                // per-caller caps still apply), so a caller's subscriptions that move here when
                // the other gateway restarts are not refused. Absent (empty), nothing is sent.
                'X-Gateway-Authorization': `{context.${OWN_TOKEN_CONTEXT_FIELD}}`,
              },
            },
          },
        },
      },
    },
    propagateHeaders: {
      async fromClientToSubgraphs({ request, context, subgraphName }) {
        const headers: Record<string, string> = {};
        for (const name of FORWARDED_HEADERS) {
          const value = request.headers.get(name);
          if (value !== null) headers[name] = value;
        }
        // The token verified here, wherever the caller put it: over graphql-ws it is usually in
        // `connectionParams`, not on the upgrade request.
        const verified = verifiedTokenOf(context);
        if (verified !== undefined) headers.authorization = `Bearer ${verified.token.value}`;
        const seen = (context as { req?: { socket?: { remoteAddress?: string } } }).req?.socket
          ?.remoteAddress;
        const client = clientAddress(request.headers.get('x-forwarded-for'), seen, edge.trustProxy ?? 0);
        if (client !== undefined) headers['x-forwarded-for'] = client;
        if (subgraphName === FACADE_SUBGRAPH && ownToken !== undefined) {
          // Set here, never passed on from a client (FORWARDED_HEADERS names neither).
          const token = await ownToken();
          if (token !== undefined) headers[GATEWAY_AUTHORIZATION_HEADER] = `Bearer ${token}`;
          if (token !== undefined && edge.inlineTraces === true) headers[INCLUDE_TRACE_HEADER] = 'ftv1';
        }
        return headers;
      },
    },
  };
}

/** Where {@link ownTokenInContext} puts `Bearer <the gateway's own token>` in the GraphQL context. */
const OWN_TOKEN_CONTEXT_FIELD = 'gatewayAuthorization';

/**
 * Puts the gateway's own token into each operation's context, where the graphql-ws transport's
 * connection params read it: the transport builds them from the context alone. Nothing a client
 * sends reaches that field (a client's own connection params sit under `connectionParams`).
 */
function ownTokenInContext(ownToken: () => Promise<string | undefined>): GatewayPlugin {
  return {
    async onContextBuilding({ extendContext }) {
      const token = await ownToken();
      if (token !== undefined) extendContext({ [OWN_TOKEN_CONTEXT_FIELD]: `Bearer ${token}` });
    },
  };
}

/** Hive Gateway's retry of one subgraph request (its `upstreamRetry` option). */
type UpstreamRetry = NonNullable<EdgeGatewayConfig['upstreamRetry']>;

/** How long the retry of a query whose connection was lost waits: long enough for a new connection. */
const LOST_CONNECTION_RETRY_DELAY_MS = 100;

/**
 * A query whose request to a subgraph got no answer at all (its connection refused, reset or
 * closed as it went out: a replica killed, or one closing a kept-alive connection) is sent once
 * more, after {@link LOST_CONNECTION_RETRY_DELAY_MS}, on a new connection (through a Service, to a
 * replica that stays). Reading twice changes nothing. Never a mutation: a write that may have
 * reached the facade is the caller's to send again, with its idempotency key, which the gateway
 * cannot judge; nor a subscription, nor a request the subgraph answered, whatever it answered (an
 * error of the facade's, a 503 `SHUTTING_DOWN`, is its answer and says what to do).
 */
export function retryQueriesOnLostConnections(): UpstreamRetry {
  return ({ executionRequest }) =>
    operationTypeOf(executionRequest) === 'query'
      ? {
          maxRetries: 1,
          retryDelay: LOST_CONNECTION_RETRY_DELAY_MS,
          // Not whether the gateway saw a response: it loses track of it for some requests (its
          // record of responses is keyed by a request object the executor may replace), and
          // retried every answered error (another customer's NOT_FOUND read the facade twice).
          shouldRetry: ({ executionResult }) => {
            const result = executionResult as { errors?: readonly unknown[] } | undefined;
            return result === undefined || (result.errors ?? []).some(madeByTheGateway);
          },
        }
      : undefined;
}

/**
 * Whether an error of a subgraph request was made by the gateway (a request that got no answer:
 * it wraps the fetch's own error), not read from the subgraph's answer (a GraphQL error with no
 * cause). What @envelop/core's `isOriginalGraphQLError` tells, without importing it here.
 */
function madeByTheGateway(error: unknown): boolean {
  let cause = (error as { originalError?: unknown } | null)?.originalError;
  while (cause instanceof Error && cause.name === 'GraphQLError') {
    cause = (cause as { originalError?: unknown }).originalError;
  }
  return cause != null;
}

/**
 * The operation type of a subgraph request: the runtime's own field when it set it, else the
 * operation its document defines (no import of graphql here: the image loads this file alone).
 */
function operationTypeOf(request: {
  operationType?: string;
  operationName?: string;
  document: { definitions: readonly unknown[] };
}): string | undefined {
  if (request.operationType !== undefined) return request.operationType;
  const operations = request.document.definitions.filter(
    (definition): definition is { kind: string; operation: string; name?: { value: string } } =>
      (definition as { kind?: string }).kind === 'OperationDefinition',
  );
  const named =
    request.operationName === undefined
      ? operations
      : operations.filter((operation) => operation.name?.value === request.operationName);
  return named.length === 1 ? named[0]!.operation : undefined;
}

/** The facade's subgraph name in the supergraph (scripts/compose-supergraph.ts). */
const FACADE_SUBGRAPH = 'platform';

/** The header the gateway's own token goes in, beside the caller's `Authorization` (the facade reads it). */
export const GATEWAY_AUTHORIZATION_HEADER = 'x-gateway-authorization';

/** The header a federation gateway asks a subgraph for an inline trace with. */
const INCLUDE_TRACE_HEADER = 'apollo-federation-include-trace';

/**
 * The client's address: `trustProxy` hops back along `X-Forwarded-For` and the address the gateway
 * saw, as the facade reads `TRUST_PROXY`; the address seen when there are fewer entries.
 */
export function clientAddress(
  forwardedFor: string | null,
  seen: string | undefined,
  trustProxy: number,
): string | undefined {
  if (seen === undefined) return undefined;
  const hops = [
    ...(forwardedFor ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean),
    seen,
  ];
  return hops[Math.max(0, hops.length - 1 - trustProxy)];
}

/** How long before its expiry the gateway's own token is renewed. */
const OWN_TOKEN_RENEW_BEFORE_MS = 60_000;

/** How long after a failed attempt the gateway asks the issuer for its own token again. */
const OWN_TOKEN_RETRY_MS = 10_000;

/**
 * The gateway's own access token (client credentials), fetched on first use and again shortly
 * before it expires, one request at a time. Undefined while the issuer cannot give one: the caller's
 * request goes on without it (no trace), and the issuer is asked again after a pause.
 */
function createOwnTokenSource(
  edge: EdgeOptions,
  client: NonNullable<EdgeOptions['client']>,
): () => Promise<string | undefined> {
  let current: { token: string; renewAt: number } | undefined;
  let fetching: Promise<void> | undefined;
  let failedAt = -Infinity;
  const tokenEndpoint = async (): Promise<string> => {
    if (client.tokenUrl !== undefined) return client.tokenUrl;
    if (edge.issuer === undefined) throw new Error('AUTH_ISSUER is not set: no issuer to ask');
    const response = await fetch(`${edge.issuer}/.well-known/openid-configuration`, {
      signal: AbortSignal.timeout(KEY_SET_TIMEOUT_MS),
    });
    const { token_endpoint: endpoint } = (await response.json()) as { token_endpoint?: unknown };
    if (!response.ok || typeof endpoint !== 'string') throw new Error('the issuer names no token endpoint');
    return endpoint;
  };
  const fetchToken = async (): Promise<void> => {
    const response = await fetch(await tokenEndpoint(), {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.id)}:${encodeURIComponent(client.secret)}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
      signal: AbortSignal.timeout(KEY_SET_TIMEOUT_MS),
    });
    const body = (await response.json()) as { access_token?: unknown; expires_in?: unknown };
    if (!response.ok || typeof body.access_token !== 'string') {
      throw new Error(`the issuer answered ${response.status} to the gateway's client credentials`);
    }
    const lifetimeMs = typeof body.expires_in === 'number' ? body.expires_in * 1000 : 300_000;
    current = {
      token: body.access_token,
      renewAt: Date.now() + Math.max(lifetimeMs - OWN_TOKEN_RENEW_BEFORE_MS, lifetimeMs / 2),
    };
  };
  return async () => {
    const now = Date.now();
    if ((current === undefined || now >= current.renewAt) && now - failedAt >= OWN_TOKEN_RETRY_MS) {
      fetching ??= fetchToken()
        .catch((error: unknown) => {
          failedAt = Date.now();
          // Never the secret: the message names the issuer's answer at most.
          console.warn(
            `gateway: no token of its own, requests go on without it: ${(error as Error).message}`,
          );
        })
        .finally(() => (fetching = undefined));
      // A token still valid serves while its successor is fetched; none yet waits for it.
      if (current === undefined) await fetching;
    }
    return current?.token;
  };
}

/** The token of an `Authorization` header: `Bearer <token>`. */
function headerToken({ request }: { request: Request }): BearerToken | undefined {
  return bearerToken(request.headers.get('authorization') ?? undefined);
}

/**
 * The token of graphql-ws's `connection_init` payload: `Authorization` (or `authorization`), as
 * the facade reads it. A value that is not `Bearer <token>` (or not a string) counts as a wrong
 * token, never as none, so the upgrade request's header cannot stand in for it.
 */
function connectionParamsToken({
  serverContext,
}: {
  serverContext: Record<string, unknown>;
}): BearerToken | undefined {
  const params = serverContext.connectionParams;
  if (typeof params !== 'object' || params === null) return undefined;
  for (const name of ['Authorization', 'authorization']) {
    const value = (params as Record<string, unknown>)[name];
    if (value === undefined || value === null) continue;
    return (
      bearerToken(typeof value === 'string' ? value : '') ?? { token: 'not-a-bearer-token', prefix: 'Bearer' }
    );
  }
  return undefined;
}

function bearerToken(authorization: string | undefined): BearerToken | undefined {
  const match = /^Bearer +(\S+)$/i.exec(authorization?.trim() ?? '');
  return match === null ? undefined : { token: match[1]!, prefix: 'Bearer' };
}

/**
 * The public key (PEM) of a token's key id, from the issuer's key set: fetched on first use, and
 * again for an unknown key id (a rotation) at most every {@link KEY_SET_REFRESH_MS}. Keys already
 * fetched keep working while the issuer is unreachable. Nothing a caller sends makes it throw.
 */
function createKeySetProvider(edge: EdgeOptions): (kid?: string) => Promise<string> {
  const url = edge.jwksUrl ?? (edge.issuer === undefined ? undefined : `${edge.issuer}/jwks`);
  let keys = new Map<string, string>();
  let fetchedAt = 0;
  let fetching: Promise<void> | undefined;
  const refresh = async (): Promise<void> => {
    if (url === undefined) throw new Error('AUTH_ISSUER and AUTH_AUDIENCE are not set: no token is accepted');
    // Counted from the attempt: a rotation is looked for at most every refresh interval.
    fetchedAt = Date.now();
    const response = await fetch(url, { signal: AbortSignal.timeout(KEY_SET_TIMEOUT_MS) });
    if (!response.ok) throw new Error(`the key set at ${url} answered ${response.status}`);
    const { keys: published } = (await response.json()) as {
      keys?: (JsonWebKey & { kid?: string; use?: string })[];
    };
    const next = new Map<string, string>();
    for (const key of published ?? []) {
      if (key.kid === undefined || (key.use !== undefined && key.use !== 'sig')) continue;
      next.set(
        key.kid,
        createPublicKey({ key, format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString(),
      );
    }
    keys = next;
  };
  return async (kid) => {
    if (url === undefined || kid === undefined) return NO_KEY_OF_THE_ISSUER;
    // Until a key set has been read, every request may try (one fetch at a time); after, an unknown
    // key id fetches again at most every refresh interval.
    if (!keys.has(kid) && (keys.size === 0 || Date.now() - fetchedAt >= KEY_SET_REFRESH_MS)) {
      fetching ??= refresh().finally(() => (fetching = undefined));
      // An unreachable issuer fails the request (the plugin answers 500) unless the key is known.
      await fetching.catch((error: unknown) => {
        if (keys.size === 0) throw error;
      });
    }
    return keys.get(kid) ?? NO_KEY_OF_THE_ISSUER;
  };
}

/** The default of `GATEWAY_CACHE_KEY_PREFIX`: the facade's default too. */
const DEFAULT_CACHE_KEY_PREFIX = 'gateway-cache:';

/**
 * `config` with the response cache when `GATEWAY_CACHE_REDIS_URL` names its Redis: the CLI's Redis
 * cache storage (the connection the cache uses) and the plugin of gateway-response-cache.ts, after
 * `config`'s own plugins (the JWT plugin has verified the token it keys by). Without it, `config`.
 */
export function withResponseCache(config: EdgeGatewayConfig, env: NodeJS.ProcessEnv): EdgeGatewayConfig {
  const url = env.GATEWAY_CACHE_REDIS_URL?.trim();
  if (url === undefined || url === '') return config;
  const givenPrefix = env.GATEWAY_CACHE_KEY_PREFIX?.trim();
  const keyPrefix = givenPrefix === undefined || givenPrefix === '' ? DEFAULT_CACHE_KEY_PREFIX : givenPrefix;
  const plugins = config.plugins;
  return {
    ...config,
    // The CLI's own storage option (the runtime's type names only a storage object): it opens the
    // connection at start, which the cache's scripts then run on.
    cache: { type: 'redis', url, lazyConnect: false } as unknown as EdgeGatewayConfig['cache'],
    plugins: (context) => [
      ...(plugins?.(context) ?? []),
      useFacadeResponseCache(context, { keyPrefix, tokenField: JWT_CONTEXT_FIELD }),
    ],
  };
}

/**
 * `config` serving subscriptions over Apollo's multipart protocol too (gateway-multipart-subscriptions.ts),
 * as Apollo Client's `HttpLink` asks for them, after `config`'s own plugins.
 */
export function withMultipartSubscriptions(config: EdgeGatewayConfig): EdgeGatewayConfig {
  const plugins = config.plugins;
  return {
    ...config,
    plugins: (context) => [...(plugins?.(context) ?? []), useApolloMultipartSubscriptions()],
  };
}

/** What the image's CLI loads: the edge configured from its environment (compose.yaml's). */
export const gatewayConfig: EdgeGatewayConfig = withResponseCache(
  withMultipartSubscriptions(createGatewayConfig(edgeOptionsFromEnv(process.env))),
  process.env,
);
