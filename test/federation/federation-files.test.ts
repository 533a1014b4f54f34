/**
 * The committed federation files: supergraph.yaml (Rover's composition config) names the subgraphs
 * `npm run supergraph` composes, with the same routing URLs and the same SDL; router.yaml (Apollo
 * Router) has the shape the Router's documentation gives and names only those subgraphs. The Router
 * binary cannot run here, so its configuration is checked, not executed.
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

  it('serves the supergraph at /graphql', () => {
    expect(router.supergraph).toEqual({ listen: expect.stringMatching(/^[\w.]+:\d+$/), path: '/graphql' });
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
