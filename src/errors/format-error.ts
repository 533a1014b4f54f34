/**
 * Apollo Server's `formatError`: every error of every response goes through {@link toGraphQLError},
 * and nothing here may throw (a throwing formatError would replace the whole response).
 */
import type { GraphQLFormattedError } from 'graphql';
import { MASKED_MESSAGE, toGraphQLError, type ToGraphQLErrorOptions } from './to-graphql-error.ts';

/** Builds the `formatError` option of Apollo Server. */
export function createFormatError(
  options: ToGraphQLErrorOptions = {},
): (formattedError: GraphQLFormattedError, error: unknown) => GraphQLFormattedError {
  return (formattedError, error) => {
    try {
      return toGraphQLError(error, options).toJSON();
    } catch {
      return {
        message: MASKED_MESSAGE,
        ...(formattedError.locations ? { locations: formattedError.locations } : {}),
        ...(formattedError.path ? { path: formattedError.path } : {}),
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      };
    }
  };
}
