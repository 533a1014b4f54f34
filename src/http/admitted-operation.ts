/**
 * Apollo Server runs what the door admitted, and nothing else. The HTTP adapter of the door
 * (src/edge/http.ts) admits each request before Apollo reads it; these hooks hand Apollo the door's
 * verdict for that very request:
 *
 * - an admitted operation: its document, parsed and validated by the door, so Apollo neither
 *   parses nor validates it again (its own document store is off), once Apollo's text, operation
 *   name and variables are the ones the door admitted; once Apollo resolved it, its call budget
 *   and cost estimate (after Apollo's own refusal of a mutation over GET);
 * - a document the door refused: at the operation checks, its valid document and the refusal,
 *   thrown once Apollo resolved the operation; at parse or validation, nothing, so Apollo words it
 *   with the door's own parser options and rules (the same answer, locations and record as any
 *   document Apollo refuses), and the door's refusal is thrown should Apollo's words differ;
 * - no operation (a request the door found none in): Apollo answers it as it reads it (the page,
 *   another method, a batch, a missing `query`, a persisted query it does not hold), and a text it
 *   finds anyway is never run.
 */
import { isDeepStrictEqual } from 'node:util';
import type { HTTPGraphQLRequest } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { StepRefusal } from '../edge/door/door.ts';
import type { OperationAdmission } from '../edge/door/requests.ts';
import { isRefusal, REFUSALS } from '../edge/refusal.ts';
import type { GraphContext } from '../graph/context.ts';
import { capCallBudget } from '../upstream/call-budget.ts';
import type { RequestHooksOf } from './request-hooks.ts';

/** The door's admissions of the HTTP requests Apollo is running, and the hooks that read them. */
export interface AdmittedOperations {
  /**
   * Registers the door's admission of one operation, as Apollo will see its request
   * (`request.http`: one per request, or one per operation of a batch).
   */
  readonly admit: (request: HTTPGraphQLRequest, admission: OperationAdmission) => void;
  readonly hooks: RequestHooksOf<GraphContext>;
}

export function createAdmittedOperations(): AdmittedOperations {
  const admissions = new WeakMap<HTTPGraphQLRequest, OperationAdmission>();
  return {
    admit: (request, admission) => void admissions.set(request, admission),
    hooks({ request }) {
      const admission = request.http === undefined ? undefined : admissions.get(request.http);
      const operation = admission?.operation;
      return {
        didResolveSource(requestContext) {
          if (admission === undefined || operation === undefined) {
            throw new Error('Apollo Server read an operation in a request where the door admitted none');
          }
          const same = requestContext.source === admission.query;
          if (isRefusal(operation)) {
            if (same && operation.document !== undefined) {
              Object.assign(requestContext, { document: operation.document });
            }
            return;
          }
          const { request: read } = requestContext;
          if (
            !same ||
            (read.operationName ?? undefined) !== operation.operationName ||
            !isDeepStrictEqual(read.variables ?? undefined, operation.variables)
          ) {
            throw new Error('Apollo Server read another operation than the one the door admitted');
          }
          // Apollo reads the document here before it would parse one: given, it parses nothing.
          Object.assign(requestContext, { document: operation.document });
        },
        didResolveOperation({ contextValue }) {
          if (operation === undefined) return;
          if (isRefusal(operation)) throw toApolloError(operation);
          // Its upstream calls: no more than its cost can need. Its estimate: for `extensions.cost` and metrics.
          capCallBudget(contextValue.upstream.callBudget, operation.callLimit);
          contextValue.cost.estimated = operation.measure.cost;
        },
      };
    },
  };
}

/** A refusal thrown inside Apollo: its status from the table (Apollo removes `http` from the body). */
function toApolloError(refusal: StepRefusal): GraphQLError {
  const status = REFUSALS[refusal.refused].http.status;
  const error = refusal.errors?.[0];
  return new GraphQLError(error?.message ?? refusal.message, {
    ...(error === undefined
      ? {}
      : { nodes: error.nodes, path: error.path, originalError: error.originalError }),
    extensions: {
      ...error?.extensions,
      code: REFUSALS[refusal.refused].code,
      ...refusal.extensions,
      http: { status },
    },
  });
}
