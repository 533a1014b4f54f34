/**
 * The MCP endpoint's executor: an operation the door admitted for one request (a tool call, a
 * resource read) run with graphql-js `execute` and the operation context every transport builds
 * (the caller's scope, key and environment; the document's upstream call budget), its mutation
 * named in the audit trail with the tool, and recorded by the one operation recorder as HTTP's are
 * (`graphql operation` line, metrics with `transport="mcp"`, lifecycle). A refusal of the document
 * (from `parse` on) is recorded too and answered with the same errors and codes as over HTTP;
 * nothing of it reaches the upstream.
 */
import type { Caller } from '../../auth/caller.ts';
import {
  execute,
  GraphQLError,
  type ExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
} from 'graphql';
import { isUnexpectedError } from '../../errors/to-graphql-error.ts';
import type { GraphContext } from '../../graph/context.ts';
import type { OperationContextInput } from '../../graph/operation-context.ts';
import type { Logger } from '../../logger.ts';
import type { OperationRecorder } from '../../observability/operation-record.ts';
import { createCallBudget } from '../../upstream/call-budget.ts';
import type { AdmittedOperation, Connection, StepRefusal } from '../door/door.ts';
import { graphQLErrorsOf, isRefusal, REFUSALS } from '../refusal.ts';

/** The name of the transport in records and metrics. */
export const MCP_TRANSPORT = 'mcp';

/** The request ids of the HTTP request that carried the call (`src/http/request-id.ts`). */
export interface RequestIds {
  readonly requestId: string;
  readonly facadeRequestId: string;
  readonly callerRequestId: string | undefined;
}

/** What runs and records an admitted operation. */
export interface OperationRunnerParts {
  /** The whole schema: the tools' catalogue is read from it. */
  readonly schema: GraphQLSchema;
  /**
   * The schema a caller is served (its contract's, `src/graph/audiences.ts`): what it may see of the
   * tools and the schema, and what its operations run against. Undefined: a contract not served.
   */
  readonly schemaOf: (caller: Caller | undefined) => GraphQLSchema | undefined;
  readonly record: OperationRecorder;
  readonly createContext: (input: OperationContextInput) => GraphContext;
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  /** Names a mutation's upstream writes in the audit trail (with the tool that ran it). */
  readonly noteOperation: (
    context: GraphContext,
    admitted: AdmittedOperation,
    tool: string | undefined,
  ) => void;
  readonly logger: Logger;
}

/** An operation's answer as GraphQL over HTTP would give it: data, errors (formatted), extensions. */
export interface OperationAnswer {
  readonly data?: Record<string, unknown> | null;
  readonly errors?: readonly GraphQLFormattedError[];
}

/**
 * Runs `operation` (admitted for `connection`, or refused at its document) and records it; `tool`
 * names the tool for the audit trail. Never throws for what the operation meets: its answer holds it.
 */
export async function runOperation(
  parts: OperationRunnerParts,
  connection: Connection,
  ids: RequestIds,
  operation: AdmittedOperation | StepRefusal,
  tool: string | undefined,
): Promise<OperationAnswer> {
  const startedAt = performance.now();
  if (isRefusal(operation)) return refused(parts, ids, operation, startedAt);
  const context = parts.createContext({
    connection,
    ...ids,
    // The document's own budget: its cost plus its retries, at most the ceiling.
    callBudget: createCallBudget(operation.callLimit),
  });
  context.cost.estimated = operation.measure.cost;
  const name = operation.operation.name?.value;
  parts.record.httpStarted(context.upstream.requestId, name ?? null);
  parts.noteOperation(context, operation, tool);
  let result: ExecutionResult;
  try {
    result = await execute({
      // The door validated the document against the caller's schema; it runs against the same one,
      // so nothing the contract hides (introspection included) is reached through a tool either.
      schema: parts.schemaOf(connection.caller) ?? parts.schema,
      document: operation.document,
      operationName: operation.operationName,
      variableValues: operation.variables,
      contextValue: context,
    });
  } catch (error) {
    // graphql-js throws only for what the door already refused; answered as any unexpected error.
    result = { errors: [toError(error)] };
  }
  const errors = result.errors?.map((error) => {
    if (isUnexpectedError(error)) {
      parts.logger.error('unexpected error', {
        requestId: context.upstream.requestId,
        path: error.path,
        error,
      });
    }
    return parts.formatError(error.toJSON(), error);
  });
  const data = result.data ?? (errors === undefined ? undefined : null);
  parts.record.httpCompleted({
    transport: MCP_TRANSPORT,
    requestId: context.upstream.requestId,
    operationName: name ?? null,
    parsed: { type: operation.operation.operation, name },
    nameSource: {
      fromOperator: connection.caller?.operator === true,
      trustedDocument: operation.trustedDocument === true,
    },
    status: 200,
    startedAt,
    errorCodes: (errors ?? []).map((error) => error.extensions?.['code']),
    answerErrors: errors,
    answerHasData: data !== undefined && data !== null,
    loaderStats: context.loaderStats,
    upstreamCalls: context.upstream.callBudget.sent,
    estimatedCost: operation.measure.cost,
    environment: context.upstream.environment,
  });
  return { ...(data === undefined ? {} : { data }), ...(errors === undefined ? {} : { errors }) };
}

/** A document the door refused: its errors as HTTP words them, recorded as HTTP records them. */
function refused(
  parts: OperationRunnerParts,
  ids: RequestIds,
  refusal: StepRefusal,
  startedAt: number,
): OperationAnswer {
  // As HTTP's answer words them: `extensions.http` is the status, not part of the error.
  const errors = graphQLErrorsOf(refusal).map((error): GraphQLFormattedError => {
    const { http: _http, ...extensions } = error.extensions;
    return { ...error.toJSON(), extensions };
  });
  parts.record.httpCompleted({
    transport: MCP_TRANSPORT,
    requestId: ids.requestId,
    operationName: null,
    parsed: undefined,
    nameSource: { fromOperator: false, trustedDocument: false },
    status: REFUSALS[refusal.refused].http.status,
    startedAt,
    errorCodes: errors.map((error) => error.extensions?.['code']),
    answerErrors: errors,
    answerHasData: false,
    loaderStats: undefined,
    upstreamCalls: 0,
    estimatedCost: undefined,
    environment: undefined,
  });
  return { errors };
}

/** What graphql-js threw, as an error the formatting masks like any unexpected one. */
function toError(error: unknown): GraphQLError {
  return error instanceof GraphQLError
    ? error
    : new GraphQLError('Unexpected error.', { originalError: error instanceof Error ? error : undefined });
}
