/**
 * Hands each HTTP operation to the one operation recorder (src/observability/operation-record.ts), which
 * writes its `graphql operation` line, counts its metrics and tells the lifecycle, as it does for
 * every live transport: Apollo Server stays HTTP's executor, and its hooks only gather what the
 * record needs (name, type, status, error codes, loader and upstream counts, the door's estimate).
 * It also logs the real cause of every error the client only sees masked. Never logs variables,
 * headers or keys. An operation the door admitted carries what it used, for the field usage: its
 * document, the schema it ran with, and the client's own name and version headers.
 */
import type { OperationRecorder } from '../observability/operation-record.ts';
import { CLIENT_NAME_HEADER, CLIENT_VERSION_HEADER } from '../observability/field-usage.ts';
import { isUnexpectedError, toGraphQLError } from '../errors/to-graphql-error.ts';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import type { RequestHooksOf } from './request-hooks.ts';

/**
 * The hooks (for `createRequestHooksPlugin`); `isTrustedDocument` tells a listed document, whose
 * name may become a label.
 */
export function operationRecordHooks(
  record: OperationRecorder,
  logger: Logger,
  isTrustedDocument: (query: string) => boolean,
): RequestHooksOf<GraphContext> {
  return ({ request, contextValue }) => {
    const startedAt = performance.now();
    // The context is absent when it was never built (a request refused before it).
    const context = contextValue as Partial<GraphContext> | undefined;
    record.httpStarted(context?.upstream?.requestId ?? '', request.operationName ?? null);
    const errorCodes: unknown[] = [];
    return {
      didEncounterErrors({ errors, contextValue: built }) {
        for (const error of errors) {
          errorCodes.push(toGraphQLError(error).extensions.code);
          if (isUnexpectedError(error)) {
            logger.error('unexpected error', {
              requestId: built.upstream.requestId,
              path: error.path,
              error: error.originalError ?? error,
            });
          }
        }
      },
      willSendResponse({
        operation,
        operationName,
        contextValue: built,
        response,
        source,
        document,
        schema,
      }) {
        const answered = built as Partial<GraphContext>;
        const single = response.body.kind === 'single' ? response.body.singleResult : undefined;
        // Admitted by the door (its estimate is set once Apollo resolved it), so it ran.
        const ran = answered.cost?.estimated !== undefined && document !== undefined;
        const headers = request.http?.headers;
        record.httpCompleted({
          requestId: answered.upstream?.requestId ?? '',
          operationName: operationName ?? null,
          parsed:
            operation === undefined ? undefined : { type: operation.operation, name: operation.name?.value },
          nameSource: {
            fromOperator: answered.caller?.operator === true,
            trustedDocument: operation !== undefined && isTrustedDocument(source),
          },
          status: response.http.status ?? 200,
          startedAt,
          errorCodes,
          answerErrors: single?.errors,
          answerHasData: single?.data !== undefined && single.data !== null,
          loaderStats: answered.loaderStats,
          upstreamCalls: answered.upstream?.callBudget.sent ?? 0,
          estimatedCost: answered.cost?.estimated,
          environment: answered.upstream?.environment,
          usage: ran
            ? {
                schema,
                document,
                operationName,
                variables: request.variables,
                caller: answered.caller,
                clientName: headers?.get(CLIENT_NAME_HEADER),
                clientVersion: headers?.get(CLIENT_VERSION_HEADER),
              }
            : undefined,
        });
      },
    };
  };
}
