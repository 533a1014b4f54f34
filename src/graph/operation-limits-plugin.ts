/**
 * What is checked once the operation and its variables are known, before execution and before any
 * upstream call: a subscription sent over HTTP, malformed strings in the variables, empty ID literals, the connection-aware cost with the variables'
 * values (validation could only count them at their smallest), and the operation's upstream call
 * budget, lowered to what its cost can need.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { GraphQLError, OperationTypeNode } from 'graphql';
import { capCallBudget } from '../upstream/call-budget.ts';
import type { GraphContext } from './context.ts';
import { findEmptyIdLiteral, findMalformedVariable } from './input-strings.ts';
import { checkOperationCost } from './query-limits.ts';

export interface OperationLimitsOptions {
  /** `QUERY_MAX_COST`. */
  maxCost: number;
}

/**
 * Builds the plugin. A refusal answers like a validation failure (HTTP 400 for
 * `application/graphql-response+json` clients): `BAD_USER_INPUT` for a malformed string,
 * `GRAPHQL_VALIDATION_FAILED` for the cost.
 */
export function createOperationLimitsPlugin(
  options: OperationLimitsOptions,
): ApolloServerPlugin<GraphContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ schema, document, operation, request, contextValue }) {
          if (!operation) return;
          // Apollo Server would answer a subscription over HTTP with a 200 and an execution error;
          // it is the client's mistake of transport, so it is refused as a bad request.
          if (operation.operation === OperationTypeNode.SUBSCRIPTION) {
            throw new GraphQLError(
              'Subscriptions are served over WebSocket (the graphql-transport-ws protocol) on /graphql, not over HTTP: connect with a graphql-ws client.',
              { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } },
            );
          }
          const malformed = findMalformedVariable(schema, operation, request.variables);
          if (malformed) throw malformed;
          const emptyId = findEmptyIdLiteral(schema, document);
          if (emptyId) throw emptyId;
          const { measure, error } = checkOperationCost(
            schema,
            document,
            operation,
            request.variables,
            options.maxCost,
          );
          if (error) throw error;
          // One field resolution makes at most one upstream call, and a retry is one more.
          const upstream = contextValue.upstream;
          capCallBudget(upstream.callBudget, Math.max(1, measure.cost + upstream.retryBudget.remaining));
        },
      };
    },
  };
}
