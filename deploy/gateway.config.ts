/**
 * Hive Gateway's configuration for compose.yaml (mounted as /gateway/gateway.config.ts into the
 * official image, ghcr.io/graphql-hive/gateway) and for its scripted twin
 * (scripts/compose-twin.ts), which runs the same object with the gateway runtime in process.
 *
 * Forwards what the facade reads from a caller: its request id (so upstream correlation ids tie
 * back to the client's request), its bearer token and a server-side caller's own upstream key.
 */
import type { GatewayConfigSupergraph } from '@graphql-hive/gateway-runtime';

/** Headers passed from the client request to every subgraph request. */
export const FORWARDED_HEADERS = ['authorization', 'x-request-id', 'x-api-key'] as const;

export const gatewayConfig: Omit<GatewayConfigSupergraph, 'supergraph'> = {
  propagateHeaders: {
    fromClientToSubgraphs({ request }) {
      const headers: Record<string, string> = {};
      for (const name of FORWARDED_HEADERS) {
        const value = request.headers.get(name);
        if (value !== null) headers[name] = value;
      }
      return headers;
    },
  },
};
