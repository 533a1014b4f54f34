/**
 * Hive Gateway's configuration for compose.yaml (mounted as /gateway/gateway.config.ts into the
 * official image, ghcr.io/graphql-hive/gateway) and for its scripted twin
 * (scripts/compose-twin.ts), which runs the same object with the gateway runtime in process.
 *
 * Forwards what the facade reads from a caller: its request id (so upstream correlation ids tie
 * back to the client's request), its bearer token and a server-side caller's own upstream key; and
 * appends the address it saw to `X-Forwarded-For`, which the facade believes one hop deep
 * (`TRUST_PROXY=1`), so its per-address budgets count the clients rather than the gateway.
 * Subscriptions go to the facade over graphql-ws, on its `/graphql` path; the gateway resolves the
 * other subgraphs' fields of each event (e.g. `Customer.openSupportNoteCount`) as in a query.
 */
import type { GatewayConfigSupergraph } from '@graphql-hive/gateway-runtime';

/** Headers passed from the client request to every subgraph request. */
export const FORWARDED_HEADERS = ['authorization', 'x-request-id', 'x-api-key'] as const;

export const gatewayConfig: Omit<GatewayConfigSupergraph, 'supergraph'> = {
  transportEntries: {
    platform: { options: { subscriptions: { kind: 'ws', location: '/graphql' } } },
  },
  propagateHeaders: {
    fromClientToSubgraphs({ request, context }) {
      const headers: Record<string, string> = {};
      for (const name of FORWARDED_HEADERS) {
        const value = request.headers.get(name);
        if (value !== null) headers[name] = value;
      }
      const seen = (context as { req?: { socket?: { remoteAddress?: string } } }).req?.socket?.remoteAddress;
      if (seen !== undefined) {
        const earlier = request.headers.get('x-forwarded-for');
        headers['x-forwarded-for'] = earlier === null ? seen : `${earlier}, ${seen}`;
      }
      return headers;
    },
  },
};
