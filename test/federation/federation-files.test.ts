/**
 * The committed federation files: supergraph.yaml (Rover's composition config) names the subgraphs
 * `npm run supergraph` composes, with the same routing URLs and the same SDL; router.yaml (Apollo
 * Router) has the shape the Router's documentation gives, names only those subgraphs, and enforces
 * at the edge what deploy/gateway.config.ts enforces (test/federation/hive-gateway-edge.test.ts runs
 * that one live), and expands, as the Router's own `${env.NAME:-default}` expansion does, with no
 * variable set (npm start's issuer) or with each one set. The Router binary cannot run here, so its
 * configuration is checked, not executed.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  composeSupergraph,
  FACADE_SUBGRAPH_NAME,
  loadRepositorySubgraphs,
  SUPPORT_NOTES_SUBGRAPH_NAME,
} from '../../scripts/compose-supergraph.ts';
import { ASSUMED_LIST_SIZE, DEFAULT_MAX_COST } from '../../deploy/gateway.config.ts';
import { GATEWAY_AUTHORIZATION_HEADER } from '../../src/auth/gateway-credential.ts';
import { DEFAULT_AUDIENCE, startDevIssuer } from '../../dev-issuer/index.ts';
import { useStack } from '../support/harness/stack.ts';

const ROOT = resolve(import.meta.dirname, '../..');
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const readYaml = (file: string): any => parse(readFileSync(resolve(ROOT, file), 'utf8'));

type RoverSubgraph = { routing_url: string; schema: { file?: string; subgraph_url?: string } };

const stack = useStack();

describe('supergraph.yaml', () => {
  const config = readYaml('supergraph.yaml') as {
    federation_version: string;
    subgraphs: Record<string, RoverSubgraph>;
  };

  it('names the subgraphs npm run supergraph composes, with the same routing URLs', () => {
    const composed = loadRepositorySubgraphs();
    expect(
      Object.fromEntries(
        Object.entries(config.subgraphs).map(([name, subgraph]) => [name, subgraph.routing_url]),
      ),
    ).toEqual(Object.fromEntries(composed.map(({ name, url }) => [name, url])));
  });

  it('pins the federation version of @apollo/composition', () => {
    const { version } = JSON.parse(
      readFileSync(resolve(ROOT, 'node_modules/@apollo/composition/package.json'), 'utf8'),
    ) as { version: string };
    expect(config.federation_version).toBe(`=${version}`);
  });

  it('composes, from the SDL it points to, the very supergraph npm run supergraph writes', async () => {
    const facade = config.subgraphs[FACADE_SUBGRAPH_NAME]!;
    const notes = config.subgraphs[SUPPORT_NOTES_SUBGRAPH_NAME]!;
    // Rover introspects the running facade: do the same against a real one.
    expect(facade.schema.subgraph_url).toBe(facade.routing_url);
    const introspected = await stack.query<{ _service: { sdl: string } }>('{ _service { sdl } }');
    const facadeSdl = introspected.body.data!._service.sdl;
    const notesSdl = readFileSync(resolve(ROOT, notes.schema.file!), 'utf8');

    const fromConfig = composeSupergraph([
      { name: FACADE_SUBGRAPH_NAME, url: facade.routing_url, typeDefs: facadeSdl },
      { name: SUPPORT_NOTES_SUBGRAPH_NAME, url: notes.routing_url, typeDefs: notesSdl },
    ]);
    expect(fromConfig.supergraphSdl).toBe(composeSupergraph().supergraphSdl);
  });
});

describe('router.yaml', () => {
  const router = readYaml('router.yaml');

  it('serves the supergraph at /graphql, on a port none of the local services takes', () => {
    expect(router.supergraph).toEqual({ listen: '0.0.0.0:4080', path: '/graphql' });
    // The facade, the example subgraph, facade-b, the emulator, npm start's OpenID provider, compose's.
    const taken = [4000, 4001, 4002, 4010, 4100, 4200];
    expect(taken).not.toContain(Number((router.supergraph.listen as string).split(':')[1]));
  });

  it("verifies the caller's JWT with the facade's own issuer, audience and key set variables", () => {
    expect(router.authentication).toEqual({
      router: {
        jwt: {
          header_name: 'authorization',
          header_value_prefix: 'Bearer',
          jwks: [
            {
              url: '${env.AUTH_JWKS_URL:-http://127.0.0.1:4100/jwks}',
              issuers: ['${env.AUTH_ISSUER:-http://127.0.0.1:4100}'],
              audiences: ['${env.AUTH_AUDIENCE:-platform-graphql-facade}'],
              algorithms: ['RS256', 'PS256', 'ES256'],
            },
          ],
        },
      },
    });
  });

  it("expands with no variable set but the cache's shared key to npm start's OpenID provider: its issuer, audience and key set", async () => {
    const expanded = expandLikeTheRouter(router, SHARED_KEY_SET);
    expect(JSON.stringify(expanded)).not.toContain('${');
    // npm start's provider listens on 127.0.0.1:4100 (DEV_ISSUER_PORT's default); a real one on
    // another port shows how its issuer, key set and audience are formed.
    const devIssuer = await startDevIssuer({ port: 0 });
    try {
      const issuer = devIssuer.issuer.replace(/:\d+$/, ':4100');
      expect(devIssuer.jwksUrl).toBe(`${devIssuer.issuer}/jwks`);
      expect(devIssuer.audience).toBe(DEFAULT_AUDIENCE);
      expect(expanded.authentication.router.jwt.jwks).toEqual([
        {
          url: `${issuer}/jwks`,
          issuers: [issuer],
          audiences: [DEFAULT_AUDIENCE],
          algorithms: ['RS256', 'PS256', 'ES256'],
        },
      ]);
    } finally {
      await devIssuer.close();
    }
  });

  it('expands each variable that is set, as it is', () => {
    const env = {
      AUTH_ISSUER: 'https://id.example.com/realms/platform',
      AUTH_AUDIENCE: 'platform-api',
      AUTH_JWKS_URL: 'https://id.example.com/realms/platform/protocol/openid-connect/certs',
    };
    expect(expandLikeTheRouter(router, { ...SHARED_KEY_SET, ...env }).authentication.router.jwt.jwks).toEqual(
      [
        {
          url: env.AUTH_JWKS_URL,
          issuers: [env.AUTH_ISSUER],
          audiences: [env.AUTH_AUDIENCE],
          algorithms: ['RS256', 'PS256', 'ES256'],
        },
      ],
    );
    // An unset variable without a default stops the Router: none is left without one.
    expect(() => expandLikeTheRouter({ url: '${env.AUTH_JWKS_URL}' }, {})).toThrow(/AUTH_JWKS_URL/);
  });

  it('refuses anonymous callers and any operation reaching a field beyond its scopes', () => {
    expect(router.authorization).toEqual({
      require_authentication: true,
      directives: { enabled: true, reject_unauthorized: true },
    });
  });

  it("enforces the same estimated cost limit as Hive Gateway's configuration", () => {
    expect(router.demand_control).toEqual({
      enabled: true,
      mode: 'enforce',
      strategy: { static_estimated: { list_size: ASSUMED_LIST_SIZE, max: DEFAULT_MAX_COST } },
    });
  });

  it("routes to the supergraph's own routing URLs: it overrides none", () => {
    // `npm run supergraph` writes them (localhost:4000 and :4001 unless told otherwise).
    expect(router).not.toHaveProperty('override_subgraph_url');
    expect(loadRepositorySubgraphs().map(({ url }) => url)).toEqual([
      'http://localhost:4000/graphql',
      'http://localhost:4001/graphql',
    ]);
  });

  it('propagates the bearer token and the request id to every subgraph, and the API key to the facade only', () => {
    expect(router.headers.all.request).toEqual([
      { propagate: { named: 'authorization' } },
      { propagate: { named: 'x-request-id' } },
    ]);
    expect(router.headers.subgraphs).toEqual({
      [FACADE_SUBGRAPH_NAME]: {
        request: [
          { propagate: { named: 'x-api-key' } },
          { insert: { name: GATEWAY_AUTHORIZATION_HEADER, value: 'Bearer ${env.GATEWAY_TOKEN:-none}' } },
          { insert: { name: 'x-gateway-cache', value: 'tags' } },
        ],
      },
    });
  });

  it("sends the router's own gateway-role token to the facade, never a client's, and no token when unset", () => {
    const insert = (env: Record<string, string>) =>
      expandLikeTheRouter(router, { ...SHARED_KEY_SET, ...env }).headers.subgraphs[FACADE_SUBGRAPH_NAME]
        .request[1].insert.value;
    expect(insert({ GATEWAY_TOKEN: 'eyJ.router.token' })).toBe('Bearer eyJ.router.token');
    // "none" is no token the facade accepts: no trace, nothing else changes.
    expect(insert({})).toBe('Bearer none');
    const propagated = [
      ...router.headers.all.request,
      ...router.headers.subgraphs[FACADE_SUBGRAPH_NAME].request,
    ]
      .map((rule: { propagate?: { named: string } }) => rule.propagate?.named)
      .filter(Boolean);
    expect(propagated).not.toContain(GATEWAY_AUTHORIZATION_HEADER);
  });

  it("shows subgraph errors, which carry the facade's codes and problems", () => {
    expect(router.include_subgraph_errors).toEqual({ all: true });
  });

  it("keeps the facade's private answers per caller in Redis, invalidated through a shared key it cannot start without", () => {
    expect(router.response_cache).toEqual({
      enabled: true,
      invalidation: { listen: '0.0.0.0:4090', path: '/invalidation' },
      subgraph: {
        all: { enabled: false },
        subgraphs: {
          [FACADE_SUBGRAPH_NAME]: {
            enabled: true,
            ttl: '30s',
            private_id: 'facade_caller',
            redis: { urls: ['${env.ROUTER_CACHE_REDIS_URL:-redis://127.0.0.1:6379}'] },
            invalidation: { enabled: true, shared_key: '${env.ROUTER_INVALIDATION_SHARED_KEY}' },
          },
        },
      },
    });
    // No default key: an unset one stops the Router rather than accept a guessable one.
    expect(() => expandLikeTheRouter(router, {})).toThrow(/ROUTER_INVALIDATION_SHARED_KEY is not set/);
    // `private_id` is written by the Rhai script the configuration loads, from the verified token.
    expect(router.rhai).toEqual({ scripts: 'router', main: 'response-cache.rhai' });
    const script = readFileSync(resolve(ROOT, 'router', 'response-cache.rhai'), 'utf8');
    expect(script).toContain('request.context["facade_caller"] = json::encode(identity)');
    for (const claim of ['exp', 'iat', 'nbf', 'jti', 'auth_time'])
      expect(script).toContain(`name != "${claim}"`);
  });

  it("passes subscriptions through to the facade's graphql-ws endpoint", () => {
    expect(router.subscription).toEqual({
      enabled: true,
      mode: {
        passthrough: { subgraphs: { [FACADE_SUBGRAPH_NAME]: { path: '/graphql', protocol: 'graphql_ws' } } },
      },
    });
  });
});

/** The one variable the Router cannot start without: the response cache's invalidation key. */
const SHARED_KEY_SET = { ROUTER_INVALIDATION_SHARED_KEY: 'a-shared-key-of-the-deployment' };

/**
 * The Router's configuration expansion, for what these tests feed it: every string value, one pass
 * left to right; `${env.NAME}` is the variable (unset: the Router refuses to start),
 * `${env.NAME:-default}` the variable when set, else the default taken literally up to the first
 * `}` (not expanded again). Router 2.13.1 does this with shellexpand 3.1 over each YAML value.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function expandLikeTheRouter(value: any, env: Record<string, string>): any {
  if (Array.isArray(value)) return value.map((item) => expandLikeTheRouter(item, env));
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, expandLikeTheRouter(item, env)]),
    );
  if (typeof value !== 'string') return value;
  let result = '';
  let rest = value;
  for (let start = rest.indexOf('${'); start !== -1; start = rest.indexOf('${')) {
    const end = rest.indexOf('}', start);
    if (end === -1) break;
    const inner = rest.slice(start + 2, end);
    const split = inner.indexOf(':-');
    const name = split > 0 ? inner.slice(0, split) : inner;
    if (!name.startsWith('env.')) throw new Error(`unknown expansion mode in ${name}`);
    const variable = env[name.slice('env.'.length)];
    if (variable === undefined && split <= 0) throw new Error(`${name.slice('env.'.length)} is not set`);
    result += rest.slice(0, start) + (variable ?? inner.slice(split + 2));
    rest = rest.slice(end + 1);
  }
  return result + rest;
}
