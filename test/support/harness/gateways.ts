/**
 * Real gateways over a supergraph SDL: Apollo Gateway served by Apollo Server and Hive Gateway's
 * runtime served by node:http, each in this process on its own loopback port 0, and the Hive Gateway
 * CLI (`hive-gateway`, what the official image runs) as a child process started through the test's
 * `useProcesses()` (test/support/processes.ts), serving HTTP, SSE and graphql-ws with
 * deploy/gateway.config.ts. All forward the caller's
 * `Authorization`, `X-Request-Id` and `X-API-Key` to the subgraphs, as docs/federation.md shows.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ApolloGateway, RemoteGraphQLDataSource } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginInlineTraceDisabled } from '@apollo/server/plugin/disabled';
import { startStandaloneServer } from '@apollo/server/standalone';
import { createGatewayRuntime, type GatewayConfigSupergraph } from '@graphql-hive/gateway-runtime';
import type { EdgeOptions } from '../../../deploy/gateway.config.ts';
import { inProcessGatewayConfig } from '../../../scripts/compose-twin.ts';
import { type Processes, stopProcess, waitUntilReady } from '../processes.ts';

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
  // Idle connections kept 10 s past the advertised 5 s, as the facade keeps them
  // (src/http/server-timeouts.ts): a test in this process sends on a connection its timers still
  // call fresh, and after a busy stretch the expired idle timer would otherwise reset it.
  const server = createServer({ keepAliveTimeoutBuffer: 10_000 }, runtime.requestListener);
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

const ROOT = resolve(import.meta.dirname, '../../..');

/** The directory holding deploy/gateway.config.ts: the CLI reads `gateway.config.ts` from its working directory. */
export const GATEWAY_CONFIG_DIR = join(ROOT, 'deploy');

/** The Hive Gateway CLI's entry point, as `npx hive-gateway` runs it. */
const HIVE_GATEWAY_BIN = join(ROOT, 'node_modules/@graphql-hive/gateway/dist/bin.js');

/** A Hive Gateway CLI process serving the supergraph. */
export type RunningGatewayProcess = RunningGateway & {
  /** The same endpoint over WebSocket (graphql-ws). */
  wsUrl: string;
  /** Every line the CLI wrote so far, stdout and stderr. */
  lines(): readonly string[];
  /** The process, for a test that watches it. */
  child: ChildProcess;
};

export type HiveGatewayCliOptions = (
  | {
      /** The supergraph SDL, written to a file of its own that the CLI serves. */
      supergraphSdl: string;
    }
  | {
      /** A supergraph file the CLI serves as it is (e.g. the one `npm run supergraph` wrote). */
      supergraphPath: string;
    }
) & {
  /** The CLI's environment (AUTH_ISSUER, AUTH_AUDIENCE, GATEWAY_MAX_COST ...), over PATH and HOME only. */
  env: Record<string, string>;
  /** Where it reads `gateway.config.ts`. Default: deploy/, the shipped configuration. */
  cwd?: string;
  /**
   * How long it may take to answer `/readiness` on a quiet machine, stretched by the load
   * (test/support/load-budget.ts). Default 20 s: it loads ~600 packages, about 10 s on a busy machine.
   */
  readyQuietMs?: number;
  /** Called with each line it writes. */
  onLine?: (line: string) => void;
  /** Its port. Default: a free one (another is tried if it was taken before the CLI bound it). */
  port?: number;
};

/**
 * Starts `hive-gateway supergraph <file> --host 127.0.0.1 --port <free port>` through `processes`
 * (its own process group, stopped after the test or the file that started it however it ended), with
 * `options.cwd` (deploy/) as its working directory, and resolves once `/readiness` answers 200. A
 * port taken between the probe and the CLI's bind is retried with another one. `close()` stops it
 * sooner.
 */
export async function startHiveGatewayCli(
  processes: Processes,
  options: HiveGatewayCliOptions,
): Promise<RunningGatewayProcess> {
  const workDir = mkdtempSync(join(tmpdir(), 'hive-gateway-'));
  let supergraphPath: string;
  if ('supergraphPath' in options) supergraphPath = resolve(options.supergraphPath);
  else {
    supergraphPath = join(workDir, 'supergraph.graphql');
    writeFileSync(supergraphPath, options.supergraphSdl);
  }
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const port = options.port ?? (await freePort());
        const started = await spawnHiveGatewayCli(processes, supergraphPath, port, options);
        return {
          ...started,
          async close() {
            await started.close();
            rmSync(workDir, { recursive: true, force: true });
          },
        };
      } catch (error) {
        if (options.port !== undefined || attempt >= 3 || !String(error).includes('EADDRINUSE')) throw error;
      }
    }
  } catch (error) {
    rmSync(workDir, { recursive: true, force: true });
    throw error;
  }
}

async function spawnHiveGatewayCli(
  processes: Processes,
  supergraphPath: string,
  port: number,
  options: HiveGatewayCliOptions,
): Promise<RunningGatewayProcess> {
  const child = processes.spawn(
    process.execPath,
    [HIVE_GATEWAY_BIN, 'supergraph', supergraphPath, '--host', '127.0.0.1', '--port', String(port)],
    {
      cwd: options.cwd ?? GATEWAY_CONFIG_DIR,
      // Only what the caller gives, plus what finds programs: not this test process's NODE_ENV=test
      // (with which the CLI accepts unknown options) nor its AUTH_* variables.
      env: {
        PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
        HOME: process.env.HOME ?? tmpdir(),
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const lines: string[] = [];
  let partial = '';
  const collect = (chunk: Buffer): void => {
    const text = partial + chunk.toString('utf8');
    const complete = text.split('\n');
    partial = complete.pop() ?? '';
    for (const line of complete) {
      if (line === '') continue;
      lines.push(line);
      options.onLine?.(line);
    }
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const close = () => stopProcess(child);

  const base = `http://127.0.0.1:${port}`;
  try {
    await waitUntilReady(
      child,
      () => answersReady(`${base}/readiness`),
      'hive-gateway to answer /readiness',
      {
        quietMs: options.readyQuietMs ?? 20_000,
        output: () => lines.slice(-30).join('\n'),
      },
    );
  } catch (error) {
    await close();
    throw error;
  }
  return {
    url: `${base}/graphql`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    lines: () => lines,
    child,
    close,
  };
}

async function answersReady(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** A loopback port free at the time of asking. */
export async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, 'close');
  return port;
}
