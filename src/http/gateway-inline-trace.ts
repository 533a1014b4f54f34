/**
 * Federated inline traces (`ftv1`) for a trusted gateway only. Apollo Router and GraphOS show each
 * field's timing from them, and so which REST call made an operation slow; but a trace is the
 * facade's inner timing and shape, not something any caller should learn by sending
 * `apollo-federation-include-trace: ftv1`. Apollo's own plugin traces whoever sends that header;
 * this one runs it only for a request that asked with the header (as Router and Hive Gateway do)
 * and comes from a trusted gateway: its `X-Gateway-Authorization` token, or the caller's own token,
 * holds the gateway role (src/auth/gateway-credential.ts). Errors in a trace stay masked.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginInlineTrace } from '@apollo/server/plugin/inlineTrace';
import { GATEWAY_AUTHORIZATION_HEADER, holdsGatewayRole } from '../auth/gateway-credential.ts';
import type { GraphContext } from '../graph/context.ts';

/**
 * Apollo's inline trace plugin, run only for a gateway: the caller's token holds the gateway role,
 * or `isGatewayCredential` accepts the request's `X-Gateway-Authorization`. It keeps Apollo's
 * internal id of the plugin, so Apollo does not add its own (which would trace every caller of a
 * subgraph).
 */
export function createGatewayInlineTracePlugin(
  isGatewayCredential: (header: string | undefined) => Promise<boolean> = async () => false,
): ApolloServerPlugin<GraphContext> {
  const inlineTrace = ApolloServerPluginInlineTrace() as ApolloServerPlugin<GraphContext>;
  return {
    ...inlineTrace,
    async requestDidStart(requestContext) {
      const headers = requestContext.request.http?.headers;
      // Nothing is verified for a request that does not ask for a trace.
      if (headers?.get('apollo-federation-include-trace') !== 'ftv1') return undefined;
      const gateway =
        holdsGatewayRole(requestContext.contextValue.caller) ||
        (await isGatewayCredential(headers.get(GATEWAY_AUTHORIZATION_HEADER) ?? undefined));
      if (!gateway) return undefined;
      return inlineTrace.requestDidStart?.(requestContext);
    },
  };
}
