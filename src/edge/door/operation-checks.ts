/**
 * The door's `operation-checks` step: what is checked once the operation and its variables are
 * known, before execution and before any upstream call, whatever the transport. The operation type
 * is one the transport serves; with introspection off, `_service` (the SDL) only for its readers;
 * every variable fits its type, no variable or literal holds a string the upstream must never see,
 * and the connection-aware cost measured with the variables' values (validation could only count
 * them at their smallest) is within `QUERY_MAX_COST`. What it answers also sets the operation's
 * upstream call budget.
 */
import {
  getOperationAST,
  getVariableValues,
  OperationTypeNode,
  type DocumentNode,
  type GraphQLError,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import type { Caller } from '../../auth/caller.ts';
import { findEmptyIdLiteral, findMalformedVariable } from '../../graph/input-strings.ts';
import { checkOperationCost, type OperationMeasure, type QueryLimits } from '../../graph/query-limits.ts';
import { mayReadServiceSdl, SERVICE_SDL_FORBIDDEN } from '../../graph/service-sdl-access.ts';
import { isLiveQuery } from '../../live-directive.ts';
import { isRefusal, refuse, type Refusal } from '../refusal.ts';
import { schemaReachOf } from './documents.ts';
import type { AdmittedOperation, OperationRequest, TransportRules } from './door.ts';

/** What the step is built from (the door's options). */
export interface OperationCheckOptions {
  /** `QUERY_MAX_*`: `maxCost` is the ceiling of the cost with the variables. */
  queryLimits: QueryLimits;
  /** `INTROSPECTION=off`: only operators and schema readers read `_service`. */
  introspectionOff?: boolean;
  /** `UPSTREAM_MAX_CALLS_PER_OPERATION`: the ceiling of every operation's call budget. */
  maxCallsPerOperation: number;
  /** Retries one operation may spend (`UPSTREAM_RETRY_BUDGET`): each is one more call. */
  retriesPerOperation: number;
}

/**
 * The step for `document` (parsed and valid against `schema`, the caller's) as `request` names its
 * operation and variables.
 */
export function checkOperationOf(
  options: OperationCheckOptions,
  schema: GraphQLSchema,
  caller: Caller | undefined,
  query: string,
  document: DocumentNode,
  request: Pick<OperationRequest, 'operationName' | 'variables'>,
  transport: TransportRules,
): Omit<AdmittedOperation, 'trustedDocument'> | Refusal {
  const { operationName } = request;
  const operation = getOperationAST(document, operationName);
  if (operation === null || operation === undefined) {
    return refuse(
      'validation-failed',
      operationName
        ? `Unknown operation named "${operationName}".`
        : 'Must provide operation name if query contains multiple operations.',
    );
  }
  const variables = request.variables ?? undefined;
  const { maxCost } = options.queryLimits;
  const measure = checkOperation(schema, document, operation, variables, maxCost, transport);
  if (isRefusal(measure)) return measure;
  if (options.introspectionOff === true) {
    const hidden = checkServiceReader(document, caller, schema);
    if (hidden !== undefined) return hidden;
  }
  return {
    schema,
    query,
    document,
    operation,
    operationName: operationName ?? undefined,
    variables,
    measure,
    callLimit: callLimitOf(measure, options.retriesPerOperation, options.maxCallsPerOperation),
  };
}

/**
 * With introspection off, `_service` (the whole schema as SDL) is read only by a caller with the
 * operator or schema-reader role: without a credential the answer is 401, with another one 403.
 */
function checkServiceReader(
  document: DocumentNode,
  caller: Caller | undefined,
  schema: GraphQLSchema,
): Refusal | undefined {
  if (!schemaReachOf(document, schema).service) return undefined;
  if (caller === undefined)
    return refuse('unauthenticated', 'Reading the schema needs a service credential.');
  return mayReadServiceSdl(caller) ? undefined : refuse('forbidden', SERVICE_SDL_FORBIDDEN);
}

/**
 * Checks `operation` of `document` with its `variables`: its measure, or the refusal. The measure's
 * cost is the most field resolutions the operation can make, so it also bounds its upstream calls.
 */
function checkOperation(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | undefined,
  maxCost: number,
  transport: TransportRules,
): OperationMeasure | Refusal {
  // A live query is long-lived like a subscription: a transport that serves subscriptions serves
  // it; one that serves queries alone refuses it, saying where it updates (HTTP), or answers it once
  // as the query it also is (MCP's tools).
  const live = isLiveQuery(schema, operation, variables);
  if (live && !transport.serves.has(OperationTypeNode.SUBSCRIPTION) && transport.liveQueryElsewhere)
    return refuse('wrong-transport', transport.liveQueryElsewhere);
  const type =
    live && transport.serves.has(OperationTypeNode.SUBSCRIPTION)
      ? OperationTypeNode.SUBSCRIPTION
      : operation.operation;
  if (!transport.serves.has(type)) return refuse('wrong-transport', transport.elsewhere);
  const malformed = findMalformedVariable(schema, operation, variables);
  if (malformed) return badInput(malformed);
  // Variables their types cannot hold are the client's mistake over every transport: refused here,
  // as Apollo refuses them over HTTP, rather than left to the executor, whose error graphql-ws
  // would send as the facade's own INTERNAL_SERVER_ERROR.
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], variables ?? {}, {
    maxErrors: 1,
  });
  if (coerced.errors !== undefined) {
    const [first] = coerced.errors;
    if (first !== undefined) return badInput(first);
  }
  const emptyId = findEmptyIdLiteral(schema, document);
  if (emptyId) return badInput(emptyId);
  const { measure, error } = checkOperationCost(schema, document, operation, variables, maxCost);
  if (error) return refuse('validation-failed', error.message, { errors: [error] });
  return measure;
}

/**
 * The upstream calls an operation of `measure` may make: one field resolution makes at most one
 * call, and each retry one more. Never more than the configured ceiling per operation.
 */
function callLimitOf(measure: OperationMeasure, retries: number, ceiling: number): number {
  return Math.min(ceiling, Math.max(1, measure.cost + retries));
}

function badInput(error: GraphQLError): Refusal {
  return refuse('bad-input', error.message, { errors: [error] });
}
