/**
 * Hands the operation recorder (src/edge/operation-record.ts, which writes the one
 * `graphql operation` line of every transport) each HTTP operation's name, request id, status,
 * duration and error codes, and logs the real cause of every error the client only sees masked.
 * Never logs variables, headers or keys.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { isUnexpectedError, toGraphQLError } from '../errors/to-graphql-error.ts';
import type { Logger } from '../logger.ts';

/** What the plugin needs from the request context. */
export interface LoggableContext {
  readonly upstream: { readonly requestId: string };
}

/** The `graphql operation` line of one HTTP operation, as the operation recorder writes it. */
export interface HttpOperationLine {
  transport: 'http';
  operationName: string | null;
  requestId: string;
  status: number;
  durationMs: number;
  errorCodes: unknown[];
}

/** Builds the operation-logging plugin; `recordLine` is the operation recorder's `line`. */
export function createOperationLoggingPlugin<TContext extends LoggableContext>(
  logger: Logger,
  recordLine: (line: HttpOperationLine) => void,
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
          recordLine({
            transport: 'http',
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
