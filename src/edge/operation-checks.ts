/**
 * What is checked once the operation and its variables are known, before execution and before any
 * upstream call, whatever the transport: the operation type is one the transport serves, every
 * variable fits its type, no variable or literal holds a string the upstream must never see, and
 * the connection-aware cost measured with the variables' values (validation could only count them
 * at their smallest) is within `QUERY_MAX_COST`. What it answers also sets the operation's
 * upstream call budget.
 */
import {
  getVariableValues,
  OperationTypeNode,
  type DocumentNode,
  type GraphQLError,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';
import { findEmptyIdLiteral, findMalformedVariable } from '../graph/input-strings.ts';
import { checkOperationCost, type OperationMeasure } from '../graph/query-limits.ts';
import { isLiveQuery } from '../live-directive.ts';
import { refuse, type Refusal } from './refusal.ts';

/** What a transport serves, and how to say so to a client that sent something else. */
export interface TransportRules {
  /** For logs and metrics: `http`, `graphql-ws`, `sse`. */
  readonly name: string;
  /** The operation types the transport runs; any other is refused as `wrong-transport`. */
  readonly serves: ReadonlySet<OperationTypeNode>;
  /** The message of that refusal: where the operation should go instead. */
  readonly elsewhere: string;
}

/**
 * Checks `operation` of `document` with its `variables`: its measure, or the refusal. The measure's
 * cost is the most field resolutions the operation can make, so it also bounds its upstream calls.
 */
export function checkOperation(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Readonly<Record<string, unknown>> | undefined,
  maxCost: number,
  transport: TransportRules,
): OperationMeasure | Refusal {
  // A live query is long-lived like a subscription: a transport that serves subscriptions serves
  // it; one that serves queries alone (HTTP) answers it once, as the query it also is.
  const type =
    transport.serves.has(OperationTypeNode.SUBSCRIPTION) && isLiveQuery(schema, operation, variables)
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
export function callLimitOf(measure: OperationMeasure, retries: number, ceiling: number): number {
  return Math.min(ceiling, Math.max(1, measure.cost + retries));
}

function badInput(error: GraphQLError): Refusal {
  return refuse('bad-input', error.message, { errors: [error] });
}
