/**
 * A `ws` transport for Hive Gateway's runtime: carries subscription operations to a subgraph over
 * graphql-ws (the facade's protocol), one connection per subscription so each carries its own
 * caller's credentials. The official image (the CLI) ships `@graphql-mesh/transport-ws` for this;
 * the gateway runtime this repository runs in process (compose's twin, the tests) does not, so
 * `transports: gatewayTransports` supplies this one and leaves every other kind to the runtime.
 */
import type { GatewayConfigSupergraph } from '@graphql-hive/gateway-runtime';
import { print, type DocumentNode, type ExecutionResult } from 'graphql';
import { createClient } from 'graphql-ws';
import { FORWARDED_HEADERS } from './gateway.config.ts';

/** The part of Hive Gateway's transport entry this transport reads. */
interface WsTransportEntry {
  /** The subgraph's subscription URL (http(s) or ws(s)). */
  location?: string;
}

/** The part of a gateway execution request this transport reads. */
interface WsExecutionRequest {
  document: DocumentNode;
  variables?: Record<string, unknown>;
  operationName?: string;
  context?: { request?: { headers?: { get(name: string): string | null } } };
}

type WsExecutor = (request: WsExecutionRequest) => AsyncIterableIterator<ExecutionResult>;

/** Connection params the facade reads: the caller's headers under their usual names. */
function connectionParamsOf(request: WsExecutionRequest): Record<string, string> {
  const params: Record<string, string> = {};
  for (const name of FORWARDED_HEADERS) {
    const value = request.context?.request?.headers?.get(name);
    if (value !== null && value !== undefined) params[name === 'x-api-key' ? 'X-API-Key' : name] = value;
  }
  return params;
}

/** The transport: `getSubgraphExecutor` as Hive Gateway's runtime calls it. */
export const graphqlWsTransport = {
  getSubgraphExecutor({ transportEntry }: { transportEntry: WsTransportEntry }): WsExecutor {
    if (transportEntry.location === undefined) throw new Error('the ws transport needs a location');
    const url = transportEntry.location.replace(/^http/, 'ws');
    return (request) => {
      const client = createClient({
        url,
        webSocketImpl: WebSocket,
        lazy: true,
        retryAttempts: 0,
        connectionParams: connectionParamsOf(request),
      });
      const results = client.iterate({
        query: print(request.document),
        ...(request.variables === undefined ? {} : { variables: request.variables }),
        ...(request.operationName === undefined ? {} : { operationName: request.operationName }),
      }) as AsyncIterableIterator<ExecutionResult>;
      // The connection lives as long as the subscription: closed when it ends by any path.
      const close = () => void client.dispose();
      const stream: AsyncIterableIterator<ExecutionResult> = {
        async next() {
          const next = await results.next();
          if (next.done) close();
          return next;
        },
        async return() {
          await results.return?.();
          close();
          return { value: undefined, done: true };
        },
        async throw(error?: unknown) {
          close();
          throw error;
        },
        [Symbol.asyncIterator]() {
          return stream;
        },
      };
      return stream;
    };
  },
};

/**
 * Hive Gateway runtime's `transports` option: this `ws` transport, and the runtime's own loading
 * (by package name) for every other kind.
 */
export const gatewayTransports = ((kind: string) =>
  kind === 'ws' ? { default: graphqlWsTransport } : import(`@graphql-mesh/transport-${kind}`)) as NonNullable<
  GatewayConfigSupergraph['transports']
>;
