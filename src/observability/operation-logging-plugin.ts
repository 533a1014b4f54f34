/**
 * Logs one line per GraphQL operation (name, request id, duration, error codes) and the real cause
 * of every error the client only sees masked. Never logs variables, headers or keys.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { isUnexpectedError, toGraphQLError } from '../errors/to-graphql-error.ts';
import type { Logger } from '../logger.ts';

/** What the plugin needs from the request context. */
export interface LoggableContext {
  readonly upstream: { readonly requestId: string };
}

/** Builds the operation-logging plugin. */
export function createOperationLoggingPlugin<TContext extends LoggableContext>(
  logger: Logger,
): ApolloServerPlugin<TContext> {
  return {
    async requestDidStart() {
      const started = performance.now();
      const errorCodes: unknown[] = [];
      return {
        async didEncounterErrors({ errors, contextValue }) {
          for (const error of errors) {
            errorCodes.push(toGraphQLError(error).extensions.code);
            if (isUnexpectedError(error)) {
              logger.error('unexpected error', {
                requestId: contextValue.upstream.requestId,
                path: error.path,
                error: error.originalError ?? error,
              });
            }
          }
        },
        async willSendResponse({ operationName, contextValue, response }) {
          logger.info('graphql operation', {
            operationName: operationName ?? null,
            requestId: contextValue.upstream.requestId,
            status: response.http.status ?? 200,
            durationMs: Math.round(performance.now() - started),
            errorCodes,
          });
        },
      };
    },
  };
}
