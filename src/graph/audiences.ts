/**
 * Which schema each caller is served: its audience. A token names a contract in its contract
 * claim (`AUTH_CONTRACT_CLAIM`, default `contract`); a caller whose token names none is served
 * `CONTRACT_DEFAULT`'s, or the whole schema when that is unset. A contract is a filtered schema
 * (`contracts.ts`), built once at start with the same resolvers as the whole one, so for its
 * callers introspection, validation and execution know nothing else: a field it hides is unknown,
 * as if it did not exist. A token naming a contract this deployment does not serve is refused,
 * never served the whole schema.
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import type { Caller } from '../auth/caller.ts';
import { contractTypeDefs, isWholeSchema, type ContractsConfig } from './contracts.ts';
import { createSchema, loadTypeDefs } from './schema.ts';

/** One audience: a contract's name and the schema its callers are served. */
export interface Audience {
  /** Undefined for the whole schema served to a caller whose token names no contract (none by default). */
  readonly contract: string | undefined;
  readonly schema: GraphQLSchema;
}

export interface Audiences {
  /**
   * The audience of `caller` (undefined: anonymous): the contract its token names, else the
   * default one, else the whole schema. Undefined when the token names a contract not served.
   */
  of(caller: Pick<Caller, 'contract'> | undefined): Audience | undefined;
  /** Every schema served, the whole one first, each once. */
  readonly schemas: readonly GraphQLSchema[];
  /** The contract a schema of {@link schemas} is served for (undefined: the whole schema's). */
  contractOf(schema: GraphQLSchema): string | undefined;
}

/**
 * The audiences of `config` over `schema`, the whole one. A contract that filters something gets a
 * schema of its own, built from `typeDefs` (the SDL `schema` was built from); one that filters
 * nothing is served `schema` itself.
 */
export function createAudiences(
  schema: GraphQLSchema,
  config: ContractsConfig,
  typeDefs: () => DocumentNode = loadTypeDefs,
): Audiences {
  const byName = new Map<string, Audience>();
  const contractOfSchema = new Map<GraphQLSchema, string | undefined>([[schema, undefined]]);
  for (const contract of config.contracts) {
    const contractSchema = isWholeSchema(contract)
      ? schema
      : createSchema(contractTypeDefs(typeDefs(), contract));
    byName.set(contract.name, { contract: contract.name, schema: contractSchema });
    if (contractSchema !== schema) contractOfSchema.set(contractSchema, contract.name);
  }
  const { defaultContract } = config;
  const fallback: Audience | undefined =
    defaultContract === undefined ? { contract: undefined, schema } : byName.get(defaultContract);
  if (fallback === undefined)
    throw new Error(`CONTRACT_DEFAULT names no contract: ${String(defaultContract)}`);
  return {
    of(caller) {
      const named = caller?.contract;
      return named === undefined ? fallback : byName.get(named);
    },
    schemas: [...contractOfSchema.keys()],
    contractOf: (served) => contractOfSchema.get(served),
  };
}

/** The audiences of a facade serving one schema to everyone (no contract). */
export function singleAudience(schema: GraphQLSchema): Audiences {
  const audience: Audience = { contract: undefined, schema };
  return { of: () => audience, schemas: [schema], contractOf: () => undefined };
}
