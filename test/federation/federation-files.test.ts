/**
 * The committed federation files: supergraph.yaml (Rover's composition config) names the subgraphs
 * `npm run supergraph` composes, with the same routing URLs and the same SDL; router.yaml (Apollo
 * Router) has the shape the Router's documentation gives, names only those subgraphs, and enforces
 * at the edge what deploy/gateway.config.ts enforces (test/federation/hive-gateway-edge.test.ts runs
 * that one live). The Router binary cannot run here, so its configuration is checked, not executed.
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
  const subgraphNames = loadRepositorySubgraphs().map(({ name }) => name);

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
              url: '${env.AUTH_JWKS_URL}',
              issuers: ['${env.AUTH_ISSUER}'],
              audiences: ['${env.AUTH_AUDIENCE}'],
              algorithms: ['RS256', 'PS256', 'ES256'],
            },
          ],
        },
      },
    });
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

  it('overrides the URL of exactly the composed subgraphs', () => {
    expect(Object.keys(router.override_subgraph_url).sort()).toEqual([...subgraphNames].sort());
    for (const url of Object.values(router.override_subgraph_url))
      expect(() => new URL(url as string)).not.toThrow();
  });

  it('propagates the bearer token and the request id to every subgraph, and the API key to the facade only', () => {
    expect(router.headers.all.request).toEqual([
      { propagate: { named: 'authorization' } },
      { propagate: { named: 'x-request-id' } },
    ]);
    expect(router.headers.subgraphs).toEqual({
      [FACADE_SUBGRAPH_NAME]: { request: [{ propagate: { named: 'x-api-key' } }] },
    });
  });

  it("shows subgraph errors, which carry the facade's codes and problems", () => {
    expect(router.include_subgraph_errors).toEqual({ all: true });
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
