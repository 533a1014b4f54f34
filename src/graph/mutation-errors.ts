/**
 * Gives every error of a mutation the idempotency key it was sent with. A client that sees an
 * error (a 502 after retries, a deadline, a shutdown, a refusal) can send the same mutation again
 * with the same key: the upstream then replays the first execution's result if there was one,
 * and executes it once if there was none.
 */
import { GraphQLError, type GraphQLFieldResolver } from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { MutationFailure } from '../errors/mutation-failure.ts';

/**
 * `resolvers` with each `Mutation` field wrapped: an error thrown by the resolver carries
 * `input.idempotencyKey`. A GraphQLError raised on purpose keeps its message and code and gains
 * `extensions.idempotencyKey`; anything else is wrapped in a {@link MutationFailure}, which
 * `toGraphQLError` maps as it would the error itself.
 */
export function withIdempotencyKeyOnErrors(resolvers: Resolvers): Resolvers {
  const mutation = resolvers.Mutation as Record<string, GraphQLFieldResolver<unknown, unknown>> | undefined;
  if (!mutation) return resolvers;
  const wrapped: Record<string, GraphQLFieldResolver<unknown, unknown>> = {};
  for (const [field, resolve] of Object.entries(mutation)) {
    wrapped[field] = async (parent, args: { input?: { idempotencyKey?: unknown } }, context, info) => {
      const key = args.input?.idempotencyKey;
      try {
        return await resolve(parent, args, context, info);
      } catch (error) {
        if (typeof key !== 'string') throw error;
        if (error instanceof GraphQLError) {
          throw new GraphQLError(error.message, {
            nodes: error.nodes,
            originalError: error.originalError,
            extensions: { ...error.extensions, idempotencyKey: key },
          });
        }
        throw new MutationFailure(key, error);
      }
    };
  }
  return { ...resolvers, Mutation: wrapped as Resolvers['Mutation'] };
}
