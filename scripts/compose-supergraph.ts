/**
 * Composes the facade subgraph and the support-notes example subgraph into one Federation 2
 * supergraph with @apollo/composition.
 *
 * As a command (`npm run supergraph`) it writes `supergraph/supergraph.graphql` (a generated file,
 * not committed: tests compose from source every run, so a stale copy can never be what is tested)
 * and exits non-zero with every composition error (code, message, locations) when composition fails.
 * `-- --contract <name>` composes a contract of `schema/contracts.json` instead: each subgraph's SDL
 * filtered by the contract's tags (src/graph/contracts.ts), as the facade serves that contract's
 * callers, into `supergraph/supergraph.<name>.graphql`, for a gateway serving that audience.
 * As a module it exports {@link composeSupergraph}, which the federation tests use.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { composeServices } from '@apollo/composition';
import {
  getLocation,
  GraphQLError,
  Kind,
  parse,
  Source,
  visit,
  type ArgumentNode,
  type DocumentNode,
} from 'graphql';
import { supportNotesTypeDefs } from '../examples/support-notes/server.ts';
import { contractTypeDefs, readContracts, type Contract } from '../src/graph/contracts.ts';
import { loadTypeDefs } from '../src/graph/schema.ts';

/**
 * One subgraph to compose: its name in the supergraph, the URL the gateway routes to, and its SDL
 * (text, or a document parsed from named sources so errors can point at files).
 */
export type SubgraphSource = {
  name: string;
  url: string;
  typeDefs: string | DocumentNode;
};

/** Routing URLs written into the supergraph for each subgraph. */
export type SubgraphUrls = {
  /** The facade's GraphQL endpoint; `http://localhost:4000/graphql` by default (`npm start`). */
  facadeUrl?: string;
  /** The support-notes example's endpoint; `http://localhost:4001/graphql` by default. */
  supportNotesUrl?: string;
};

/** One composition error, flattened for printing and for assertions. */
export type CompositionProblem = {
  /** Composition's error code, e.g. `FIELD_TYPE_MISMATCH`. */
  code: string;
  message: string;
  /** Where in which subgraph's SDL, as `subgraph:line:column`; empty when composition gave none. */
  locations: string[];
};

/** Thrown by {@link composeSupergraph} when the subgraphs do not compose. */
export class SupergraphCompositionError extends Error {
  readonly problems: CompositionProblem[];

  constructor(problems: CompositionProblem[]) {
    super(
      `The subgraphs do not compose (${problems.length} error${problems.length === 1 ? '' : 's'}):\n` +
        problems.map(formatCompositionProblem).join('\n'),
    );
    this.name = 'SupergraphCompositionError';
    this.problems = problems;
  }
}

/** A successful composition. */
export type ComposedSupergraph = {
  /** The supergraph SDL, for `ApolloGateway({ supergraphSdl })`, Apollo Router or Hive Gateway. */
  supergraphSdl: string;
  /** Composition hints (not errors): `CODE: message`. */
  hints: string[];
};

/** The subgraph names used in the supergraph (`join__Graph` values). */
export const FACADE_SUBGRAPH_NAME = 'platform';
export const SUPPORT_NOTES_SUBGRAPH_NAME = 'support-notes';

/**
 * The two subgraphs of this repository, read from their SDL files: the facade's through
 * `loadTypeDefs()`, the very documents its `createSchema()` builds from, so a composition error
 * points at a file and line under `schema/graph/`.
 */
export function loadRepositorySubgraphs(urls: SubgraphUrls = {}): SubgraphSource[] {
  return [
    {
      name: FACADE_SUBGRAPH_NAME,
      url: urls.facadeUrl ?? 'http://localhost:4000/graphql',
      typeDefs: loadTypeDefs(),
    },
    {
      name: SUPPORT_NOTES_SUBGRAPH_NAME,
      url: urls.supportNotesUrl ?? 'http://localhost:4001/graphql',
      typeDefs: parse(new Source(supportNotesTypeDefs, 'examples/support-notes/schema.graphql')),
    },
  ];
}

/** Federation's directives that let a router refuse unauthorised requests at the edge. */
const EDGE_AUTHORIZATION_DIRECTIVES = new Set(['authenticated', 'requiresScopes', 'policy']);

/**
 * `subgraphs` without the edge-authorization directives (`@authenticated`, `@requiresScopes`,
 * `@policy`) and their imports. Apollo Gateway refuses a supergraph that links those `for: SECURITY`
 * features it cannot enforce; the facade enforces the same rules itself, so a supergraph for Apollo
 * Gateway loses no protection without them. Apollo Router and Hive Gateway take the full one.
 */
export function withoutEdgeAuthorization(subgraphs: SubgraphSource[]): SubgraphSource[] {
  return subgraphs.map((subgraph) => {
    const document =
      typeof subgraph.typeDefs === 'string'
        ? parseSubgraph(subgraph.name, subgraph.typeDefs)
        : subgraph.typeDefs;
    const stripped = visit(document, {
      Directive: (node) => (EDGE_AUTHORIZATION_DIRECTIVES.has(node.name.value) ? null : undefined),
      Argument: (node: ArgumentNode) => {
        if (node.name.value !== 'import' || node.value.kind !== Kind.LIST) return undefined;
        const values = node.value.values.filter(
          (value) => !(value.kind === Kind.STRING && EDGE_AUTHORIZATION_DIRECTIVES.has(value.value.slice(1))),
        );
        return { ...node, value: { ...node.value, values } };
      },
    });
    return { ...subgraph, typeDefs: stripped };
  });
}

/**
 * `subgraphs` as `contract`'s audience sees them: every subgraph's SDL filtered by the contract's
 * tags, the facade's exactly as it serves that contract's callers (`_service` included).
 */
export function contractSubgraphs(
  subgraphs: SubgraphSource[],
  contract: Pick<Contract, 'exclude' | 'include'>,
): SubgraphSource[] {
  return subgraphs.map((subgraph) => {
    const document =
      typeof subgraph.typeDefs === 'string'
        ? parseSubgraph(subgraph.name, subgraph.typeDefs)
        : subgraph.typeDefs;
    return { ...subgraph, typeDefs: contractTypeDefs(document, contract) };
  });
}

/**
 * Composes the given subgraphs (by default this repository's two, routed to `urls`) into a
 * supergraph. Throws {@link SupergraphCompositionError} listing every error when they do not compose.
 */
export function composeSupergraph(
  subgraphs: SubgraphSource[] = loadRepositorySubgraphs(),
): ComposedSupergraph {
  const services = subgraphs.map(({ name, url, typeDefs }) => ({
    name,
    url,
    typeDefs: typeof typeDefs === 'string' ? parseSubgraph(name, typeDefs) : typeDefs,
  }));
  const result = composeServices(services);
  if (result.errors) throw new SupergraphCompositionError(result.errors.map(toCompositionProblem));
  return {
    supergraphSdl: result.supergraphSdl,
    hints: result.hints
      .filter((hint) => !isFacadeOwnLiveDirective(hint))
      .map((hint) => `${hint.definition.code}: ${hint.message}`),
  };
}

/**
 * The hint that `@live` stays out of the supergraph. That is intended: live queries are served by
 * the facade's own live transports (graphql-ws, SSE), which clients reach directly as they do for
 * subscriptions through Apollo Gateway; a gateway serves queries over HTTP, where `@live` would
 * only be answered once.
 */
function isFacadeOwnLiveDirective(hint: { definition: { code: string }; message: string }): boolean {
  return (
    hint.definition.code === 'INCONSISTENT_EXECUTABLE_DIRECTIVE_PRESENCE' && hint.message.includes('"@live"')
  );
}

function parseSubgraph(name: string, typeDefs: string) {
  try {
    // Naming the source after the subgraph makes every location say which subgraph it is in.
    return parse(new Source(typeDefs, name));
  } catch (error) {
    if (error instanceof GraphQLError) throw new SupergraphCompositionError([toSyntaxProblem(error)]);
    throw error;
  }
}

/** A GraphQL syntax error (e.g. from reading an SDL file) as a problem, for printing. */
export function toSyntaxProblem(error: GraphQLError): CompositionProblem {
  return { code: 'GRAPHQL_SYNTAX_ERROR', message: error.message, locations: locationsOf(error) };
}

function toCompositionProblem(error: GraphQLError): CompositionProblem {
  const code = typeof error.extensions.code === 'string' ? error.extensions.code : 'COMPOSITION_ERROR';
  return { code, message: error.message, locations: locationsOf(error) };
}

function locationsOf(error: GraphQLError): string[] {
  const locations: string[] = [];
  if (error.source && error.positions) {
    for (const position of error.positions) locations.push(describeLocation(error.source, position));
  }
  for (const node of error.nodes ?? []) {
    if (node.loc) locations.push(describeLocation(node.loc.source, node.loc.start));
  }
  return [...new Set(locations)];
}

function describeLocation(source: Source, position: number): string {
  const { line, column } = getLocation(source, position);
  return `${source.name}:${line}:${column}`;
}

/** One problem as the command prints it: `[CODE] message` and an indented line per location. */
export function formatCompositionProblem(problem: CompositionProblem): string {
  return [`[${problem.code}] ${problem.message}`, ...problem.locations.map((at) => `    at ${at}`)].join(
    '\n',
  );
}

const OUTPUT_DIRECTORY = resolve(import.meta.dirname, '../supergraph');

function main(): number {
  const { values } = parseArgs({
    options: {
      out: { type: 'string' },
      // A contract of schema/contracts.json: its callers' supergraph.
      contract: { type: 'string' },
      'facade-url': { type: 'string', default: process.env.FACADE_SUBGRAPH_URL },
      'support-notes-url': { type: 'string', default: process.env.SUPPORT_NOTES_SUBGRAPH_URL },
      // `apollo-gateway`: without @authenticated/@requiresScopes, which Apollo Gateway refuses.
      for: { type: 'string', default: 'router' },
      quiet: { type: 'boolean', default: false },
    },
  });
  if (values.for !== 'router' && values.for !== 'apollo-gateway') {
    console.error(`--for must be router or apollo-gateway, got ${JSON.stringify(values.for)}`);
    return 1;
  }
  const contract =
    values.contract === undefined ? undefined : readContracts().find(({ name }) => name === values.contract);
  if (values.contract !== undefined && contract === undefined) {
    const names = readContracts().map(({ name }) => name);
    console.error(`--contract must name a contract of schema/contracts.json (${names.join(', ')})`);
    return 1;
  }
  let composed: ComposedSupergraph;
  try {
    const repository = loadRepositorySubgraphs({
      facadeUrl: values['facade-url'],
      supportNotesUrl: values['support-notes-url'],
    });
    const subgraphs = contract === undefined ? repository : contractSubgraphs(repository, contract);
    composed = composeSupergraph(
      values.for === 'apollo-gateway' ? withoutEdgeAuthorization(subgraphs) : subgraphs,
    );
  } catch (error) {
    if (error instanceof SupergraphCompositionError) {
      console.error(error.message);
      return 1;
    }
    // An SDL file that does not parse fails while loading, before composition starts.
    if (error instanceof GraphQLError) {
      console.error(`An SDL file does not parse:\n${formatCompositionProblem(toSyntaxProblem(error))}`);
      return 1;
    }
    throw error;
  }
  const out = resolve(
    values.out ??
      join(
        OUTPUT_DIRECTORY,
        contract === undefined ? 'supergraph.graphql' : `supergraph.${contract.name}.graphql`,
      ),
  );
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    composed.supergraphSdl.endsWith('\n') ? composed.supergraphSdl : `${composed.supergraphSdl}\n`,
  );
  if (!values.quiet) {
    for (const hint of composed.hints) console.warn(`hint ${hint}`);
  }
  const shown = relative(process.cwd(), out);
  // Relative only inside the working directory: `../../tmp/x` reads worse than the path given.
  console.log(
    `Wrote the supergraph to ${shown && !shown.startsWith('..') && !isAbsolute(shown) ? shown : out}`,
  );
  return 0;
}

if (import.meta.main) process.exitCode = main();
