/**
 * Real gateways over a supergraph SDL, each on its own loopback port 0: Apollo Gateway served by
 * Apollo Server, and Hive Gateway's runtime served by node:http. Both forward the caller's
 * `Authorization`, `X-Request-Id` and `X-API-Key` to the subgraphs, as docs/federation.md shows.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { createGatewayRuntime, type GatewayConfigSupergraph } from '@graphql-hive/gateway-runtime';
import type { EdgeOptions } from '../../../deploy/gateway.config.ts';
import { inProcessGatewayConfig } from '../../../scripts/compose-twin.ts';

/** A gateway listening on loopback. */
export type RunningGateway = {
  /** Its GraphQL endpoint. */
  url: string;
  close(): Promise<void>;
};

/** Headers a gateway passes from the client request on to every subgraph request. */
export const FORWARDED_HEADERS = ['authorization', 'x-request-id', 'x-api-key'] as const;

type GatewayContext = { incomingHeaders: IncomingHttpHeaders };

/** Apollo Gateway over `supergraphSdl`, one `RemoteGraphQLDataSource` per subgraph URL. */
export async function startApolloGateway(supergraphSdl: string): Promise<RunningGateway> {
  const gateway = new ApolloGateway({
    supergraphSdl,
    buildService: ({ url }) =>
      new RemoteGraphQLDataSource<GatewayContext>({
        url,
        willSendRequest({ request, context }) {
          for (const name of FORWARDED_HEADERS) {
            const value = context.incomingHeaders?.[name];
            if (typeof value === 'string') request.http?.headers.set(name, value);
          }
        },
      }),
  });
  const server = new ApolloServer<GatewayContext>({
    gateway,
    plugins: [ApolloServerPluginInlineTraceDisabled()],
  });
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => ({ incomingHeaders: req.headers }),
  });
  return {
    url: new URL('/graphql', url).toString(),
    close: () => server.stop(),
  };
}

/** Hive Gateway's runtime over `supergraphSdl`, served by node:http, forwarding the caller's headers only. */
export async function startHiveGateway(supergraphSdl: string): Promise<RunningGateway> {
  return serveHiveGateway({
    supergraph: supergraphSdl,
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
  });
}

/**
 * Hive Gateway's runtime over `supergraphSdl` with deploy/gateway.config.ts for `edge`, as the
 * official image runs it: its `jwt` option becomes the JWT plugin, as the image's CLI does it, and
 * subscriptions go to the facade through `@graphql-mesh/transport-ws`, which the runtime loads.
 */
export async function startEdgeHiveGateway(
  supergraphSdl: string,
  edge: EdgeOptions,
): Promise<RunningGateway> {
  return serveHiveGateway({ ...inProcessGatewayConfig(edge), supergraph: supergraphSdl });
}

async function serveHiveGateway(config: GatewayConfigSupergraph): Promise<RunningGateway> {
  const runtime = createGatewayRuntime({ ...config, logging: false });
  const server = createServer(runtime.requestListener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${runtime.graphqlEndpoint}`,
    async close() {
      await runtime.dispose();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
