/**
 * Assembles the facade's one GraphQL schema: every SDL file of `schema/graph/` and every resolver
 * map of `resolvers.ts`, built as an Apollo Federation 2 subgraph. The same schema object serves
 * HTTP, subscriptions, and composition into a supergraph.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { buildSubgraphSchema, type GraphQLResolverMap } from '@apollo/subgraph';
import { concatAST, GraphQLScalarType, parse, Source, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { guardEntities } from './entities.ts';
import { withIdArgumentsChecked } from './id-arguments.ts';
import { withIdempotencyKeyOnErrors } from './mutation-errors.ts';
import { resolverMaps } from './resolvers.ts';

/** Where the SDL lives, relative to this file, so the schema loads from any working directory. */
const SCHEMA_DIR = new URL('../../schema/graph/', import.meta.url);

/**
 * Parses every `*.graphql` file of `schema/graph/`, `base.graphql` first (it declares the
 * `@link`, the scalars and the root types the other files extend), the rest in name order.
 */
export function loadTypeDefs(directory: URL = SCHEMA_DIR): DocumentNode {
  const files = readdirSync(directory)
    .filter((name) => name.endsWith('.graphql'))
    .sort((a, b) => (a === 'base.graphql' ? -1 : b === 'base.graphql' ? 1 : a.localeCompare(b)));
  return concatAST(
    files.map((name) =>
      parse(new Source(readFileSync(new URL(name, directory), 'utf8'), `schema/graph/${name}`)),
    ),
  );
}

/**
 * Merges resolver maps type by type. Two maps defining the same field of the same type is a
 * programming error, reported at start rather than letting the later map win silently.
 */
export function mergeResolverMaps(maps: readonly Resolvers[]): Resolvers {
  const merged: Record<string, unknown> = {};
  for (const map of maps) {
    for (const [typeName, typeResolvers] of Object.entries(map)) {
      const existing = merged[typeName];
      if (existing === undefined || typeResolvers instanceof GraphQLScalarType) {
        merged[typeName] = typeResolvers instanceof GraphQLScalarType ? typeResolvers : { ...typeResolvers };
        continue;
      }
      const target = existing as Record<string, unknown>;
      for (const [fieldName, resolver] of Object.entries(typeResolvers as Record<string, unknown>)) {
        if (fieldName in target) throw new Error(`Two resolver maps define ${typeName}.${fieldName}.`);
        target[fieldName] = resolver;
      }
    }
  }
  return merged;
}

/**
 * Builds the subgraph schema of `typeDefs` (by default the whole SDL; a contract's filtered SDL for
 * its audience, `audiences.ts`). Call it once per process and audience, and share the result.
 */
export function createSchema(typeDefs: DocumentNode = loadTypeDefs()): GraphQLSchema {
  return guardEntities(
    buildSubgraphSchema([
      {
        typeDefs,
        resolvers: withIdempotencyKeyOnErrors(
          withIdArgumentsChecked(mergeResolverMaps(resolverMaps)),
        ) as GraphQLResolverMap<unknown>,
      },
    ]),
  );
}
