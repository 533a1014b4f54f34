/**
 * Every GraphQL document the documentation shows (each ```graphql block of README.md, docs/*.md and
 * examples/web/README.md) is valid against the schema a client sends it to: the composed
 * supergraph's API schema (the facade and the example subgraph, as the gateways serve it), with the
 * directives the shipped endpoints accept beside it (`@live` at the facade, `@defer` and `@stream`
 * at Hive Gateway with `deferStream`). A field renamed or removed in the schema fails here, naming
 * the document and the line, rather than in a reader's client.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { composeServices } from '@apollo/composition';
import { extendSchema, parse, Source, validate, type GraphQLSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { loadRepositorySubgraphs } from '../../scripts/compose-supergraph.ts';
import { DOCUMENTS, ROOT } from './documents.ts';

/** The directives the shipped endpoints accept beyond the API schema's own. */
const SERVED_DIRECTIVES = /* GraphQL */ `
  directive @defer(label: String, if: Boolean! = true) on FRAGMENT_SPREAD | INLINE_FRAGMENT
  directive @stream(label: String, if: Boolean! = true, initialCount: Int = 0) on FIELD
`;

/** The API schema of the composed supergraph, with the served directives; `@live` from the facade's SDL. */
function clientSchema(): GraphQLSchema {
  const services = loadRepositorySubgraphs().map(({ name, url, typeDefs }) => ({
    name,
    url,
    typeDefs: typeof typeDefs === 'string' ? parse(typeDefs) : typeDefs,
  }));
  const composed = composeServices(services);
  if (composed.errors) throw new Error(composed.errors.map((error) => error.message).join('\n'));
  const api = composed.schema.toAPISchema().toGraphQLJSSchema();
  const live = readFileSync(join(ROOT, 'schema/graph/live.graphql'), 'utf8');
  const liveDirective = /directive @live[\s\S]*?on QUERY/.exec(live)?.[0];
  if (liveDirective === undefined) throw new Error('schema/graph/live.graphql declares no @live');
  return extendSchema(api, parse(`${SERVED_DIRECTIVES}\n${liveDirective}`));
}

/** Each ```graphql block of a markdown document, with the line it starts on. */
function graphqlBlocks(path: string): { at: string; text: string }[] {
  const lines = readFileSync(join(ROOT, path), 'utf8').split('\n');
  const blocks: { at: string; text: string }[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!/^```graphql\s*$/.test(lines[index]!)) continue;
    const end = lines.findIndex((line, after) => after > index && /^```\s*$/.test(line));
    blocks.push({ at: `${path}:${index + 2}`, text: lines.slice(index + 1, end).join('\n') });
    index = end;
  }
  return blocks;
}

const schema = clientSchema();
const blocks = DOCUMENTS.flatMap(graphqlBlocks);

/** The validation errors of `text`, each with its place in the document. */
function problemsOf(text: string, at: string): string[] {
  return validate(schema, parse(new Source(text, at))).map((error) => {
    const [location] = error.locations ?? [];
    return `${at}${location === undefined ? '' : ` (block line ${location.line})`}: ${error.message}`;
  });
}

describe('GraphQL in the documentation', () => {
  it('finds the documents to check', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    expect(blocks.map(({ at }) => at.split(':')[0])).toContain('docs/defer.md');
  });

  it.each(blocks.map(({ at, text }) => [at, text]))(
    '%s is valid against the schema it is sent to',
    (at, text) => {
      expect(problemsOf(text, at)).toEqual([]);
    },
  );

  it('refuses a field the schema does not have, as docs/defer.md once asked for', () => {
    const problems = problemsOf(
      'query { customer(id: "cus_acme") { accounts(first: 1) { nodes { name } } } }',
      'x',
    );
    expect(problems).toEqual(['x (block line 1): Cannot query field "name" on type "Account".']);
  });

  it('checks against both subgraphs and the served directives', () => {
    expect(schema.getType('SupportNote')).toBeDefined();
    expect(schema.getDirective('defer')).toBeDefined();
    expect(schema.getDirective('live')).toBeDefined();
  });
});
