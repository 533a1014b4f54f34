/**
 * Federated inline traces (`ftv1`) for a trusted gateway only. Apollo Router and GraphOS show each
 * field's timing from them, and so which REST call made an operation slow; but a trace is the
 * facade's inner timing and shape, not something any caller should learn by sending
 * `apollo-federation-include-trace: ftv1`. Apollo's own plugin traces whoever sends that header;
 * this one runs it only for a caller whose token holds the {@link GATEWAY_ROLE} role (and who
 * asked with the header, as Router and Hive Gateway do). Errors in a trace stay masked.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginInlineTrace } from '@apollo/server/plugin/inlineTrace';
import type { Caller } from '../auth/caller.ts';
import type { GraphContext } from '../graph/context.ts';

/** The role (in `AUTH_ROLES_CLAIM`) of a gateway's token that may receive inline traces. */
const GATEWAY_ROLE = 'gateway';

/** Whether `caller` may receive an inline trace of its operations. */
function mayReceiveInlineTraces(caller: Caller | undefined): boolean {
  return caller?.roles.includes(GATEWAY_ROLE) === true;
}

/**
 * Apollo's inline trace plugin, run only for a gateway-role caller. It keeps Apollo's internal id
 * of the plugin, so Apollo does not add its own (which would trace every caller of a subgraph).
 */
export function createGatewayInlineTracePlugin(): ApolloServerPlugin<GraphContext> {
  const inlineTrace = ApolloServerPluginInlineTrace() as ApolloServerPlugin<GraphContext>;
  return {
    ...inlineTrace,
    async requestDidStart(requestContext) {
      if (!mayReceiveInlineTraces(requestContext.contextValue.caller)) return undefined;
      return inlineTrace.requestDidStart?.(requestContext);
    },
  };
}
