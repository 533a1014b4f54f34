/**
 * A real facade in the test process, on its own loopback port 0, against a given upstream: its
 * log lines collected, its lifecycle hooks watched, GraphQL requests sent with real fetch and real
 * tokens of the run's issuer, graphql-ws clients connected to it and disposed with it.
 */
import { createApp, type App, type AppDependencies } from '../../../src/app.ts';
import { loadConfig, type Config } from '../../../src/config.ts';
import { createLogger } from '../../../src/logger.ts';
import type { OperationCompleted } from '../../../src/observability/lifecycle.ts';
import { bearer, issuerEnv, tokenFor, type TestCallerName } from '../tokens.ts';
import { SANDBOX_KEY } from './emulator.ts';
import { watchLifecycle, type LifecycleWatch } from './lifecycle-watch.ts';
import { connectLive, type LiveClient } from './live-client.ts';

export interface FacadeOptions {
  /** Facade environment variables, over {@link facadeTestEnv}. */
  env?: Record<string, string>;
  /** Extra app dependencies (plugins, a schema). */
  app?: Omit<AppDependencies, 'logger'>;
}

export interface GraphQLResult<T = Record<string, unknown>> {
  status: number;
  body: {
    data?: T | null;
    errors?: {
      message: string;
      path?: (string | number)[];
      locations?: { line: number; column: number }[];
      extensions?: Record<string, unknown> & { code?: string };
    }[];
    /** The answer's own extensions (`cost`, `stale`, `live`, a gateway's cache tags). */
    extensions?: Record<string, unknown>;
  };
  headers: Headers;
}

export interface RunningFacade {
  app: App;
  config: Config;
  /** Base URL, no path. */
  url: string;
  /** `${url}/graphql` */
  graphqlUrl: string;
  /** graphql-ws at `/graphql`. */
  wsUrl: string;
  /** Where the upstream delivers webhooks. */
  webhookUrl: string;
  /** Where `/metrics` is served: `METRICS_PORT`'s server (a free port in tests). */
  metricsUrl: string;
  /** Every line the facade logged so far (JSON strings), audit lines included. */
  logs(): readonly string[];
  /** The facade's lifecycle hooks, counted since it started. */
  lifecycle: LifecycleWatch;
  /**
   * POSTs a GraphQL request with real fetch, as the operator (a real token of the run's issuer)
   * unless `headers` carry an `authorization` of their own.
   */
  query<T = Record<string, unknown>>(
    document: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ): Promise<GraphQLResult<T>>;
  /** POSTs a GraphQL request as `caller` (see test/support/test-clients.ts). */
  queryAs<T = Record<string, unknown>>(
    caller: TestCallerName,
    document: string,
    variables?: Record<string, unknown>,
  ): Promise<GraphQLResult<T>>;
  /** POSTs a GraphQL request with a caller's own platform key (`X-API-Key`) and no token. */
  queryWithKey<T = Record<string, unknown>>(
    apiKey: string,
    document: string,
    variables?: Record<string, unknown>,
  ): Promise<GraphQLResult<T>>;
  /** POSTs a GraphQL request without any credentials. */
  queryAnonymously<T = Record<string, unknown>>(
    document: string,
    variables?: Record<string, unknown>,
  ): Promise<GraphQLResult<T>>;
  /**
   * A graphql-ws client on the facade, disposed when the facade closes; it connects as the operator
   * unless `connectionParams` say otherwise.
   */
  connect(connectionParams?: Record<string, unknown>): LiveClient;
  /** Resolves once `total` subscriptions have started (listen) on this facade since it started. */
  subscriptionsStarted(total: number): Promise<void>;
  /** Resolves once `total` subscriptions have completed on this facade since it started. */
  subscriptionsCompleted(total: number): Promise<void>;
  /** The next HTTP operation the facade completes from now on (that `matching` accepts). */
  nextOperationCompleted(matching?: (operation: OperationCompleted) => boolean): Promise<OperationCompleted>;
  /** Disposes its graphql-ws clients, then closes the app. */
  close(): Promise<void>;
}

/**
 * The facade environment every test facade starts from: the emulator's sandbox key, the run's
 * OpenID provider, loopback, port 0, fast upstream retries and debug logs. Callers spread their
 * own variables over it.
 */
export function facadeTestEnv(emulatorUrl: string): Record<string, string> {
  return {
    ...issuerEnv(),
    UPSTREAM_BASE_URL: emulatorUrl,
    UPSTREAM_API_KEY: SANDBOX_KEY,
    HOST: '127.0.0.1',
    PORT: '0',
    // Metrics have a port of their own: a free one, so facades side by side never collide.
    METRICS_PORT: '0',
    NODE_ENV: 'test',
    LOG_LEVEL: 'debug',
    UPSTREAM_RETRY_BASE_DELAY_MS: '5',
    UPSTREAM_RETRY_MAX_DELAY_MS: '20',
    // The suite's exact upstream counts describe reads made afresh; the response cache's own tests
    // (test/cache/) switch it on.
    CACHE_ENABLED: 'false',
    // A test's clients are done with the facade when it closes: no idle connection is waited for
    // (test/integration/shutdown-keep-alive.test.ts tests the wait itself).
    SHUTDOWN_IDLE_RELEASE_MS: '0',
  };
}

/** Starts a facade against `emulatorUrl`, listening once this resolves. Always `close()` it. */
export async function startFacade(emulatorUrl: string, options: FacadeOptions = {}): Promise<RunningFacade> {
  const config = loadConfig({ ...facadeTestEnv(emulatorUrl), ...options.env });
  // Connections are the operator's unless a test brings its own `connection_init` payload.
  const operatorParams = { Authorization: `Bearer ${await tokenFor('operator')}` };
  const lines: string[] = [];
  // Deliberately no redaction here: tests assert that no key reaches a log line at all.
  const logger = createLogger({ level: config.logLevel, write: (line) => lines.push(line) });
  // Audit lines join the same collection (they carry `"log":"audit"`), not the test's stdout.
  const auditLogger = createLogger({ level: 'info', write: (line) => lines.push(line) }).child({
    log: 'audit',
  });
  const app = await createApp(config, { auditLogger, ...options.app, logger });
  // Watched before it listens, so every count starts at the facade's first request.
  const lifecycle = watchLifecycle(app.lifecycle);
  let listening: Awaited<ReturnType<App['listen']>>;
  try {
    listening = await app.listen(0, '127.0.0.1');
  } catch (error) {
    lifecycle.close();
    await app.close();
    throw error;
  }
  const url = listening.url;
  const graphqlUrl = `${url}/graphql`;
  const wsUrl = `${url.replace(/^http/, 'ws')}/graphql`;
  const clients: LiveClient[] = [];

  return {
    app,
    config,
    url,
    graphqlUrl,
    wsUrl,
    webhookUrl: `${url}/webhooks/platform`,
    metricsUrl: `${listening.metricsUrl}/metrics`,
    logs: () => lines,
    lifecycle,
    async query<T>(
      document: string,
      variables?: Record<string, unknown>,
      headers: Record<string, string> = {},
    ) {
      const authorized = Object.keys(headers).some((name) => name.toLowerCase() === 'authorization');
      return postGraphQL<T>(graphqlUrl, document, variables, {
        ...(authorized ? {} : await bearer('operator')),
        ...headers,
      });
    },
    async queryAs<T>(caller: TestCallerName, document: string, variables?: Record<string, unknown>) {
      return postGraphQL<T>(graphqlUrl, document, variables, await bearer(caller));
    },
    async queryWithKey<T>(apiKey: string, document: string, variables?: Record<string, unknown>) {
      return postGraphQL<T>(graphqlUrl, document, variables, { 'x-api-key': apiKey });
    },
    async queryAnonymously<T>(document: string, variables?: Record<string, unknown>) {
      return postGraphQL<T>(graphqlUrl, document, variables, {});
    },
    connect(connectionParams) {
      const client = connectLive(wsUrl, connectionParams ?? operatorParams);
      clients.push(client);
      return client;
    },
    subscriptionsStarted: (total) =>
      lifecycle.reached('subscriptionStarted', total, `${total} subscription(s) to start`),
    subscriptionsCompleted: (total) =>
      lifecycle.reached('subscriptionCompleted', total, `${total} subscription(s) to complete`),
    nextOperationCompleted: (matching) => lifecycle.next('operationCompleted', matching),
    async close() {
      await Promise.all(clients.splice(0).map((client) => client.dispose()));
      await app.close();
      lifecycle.close();
    },
  };
}

/** POSTs a GraphQL request to `url` and reads its JSON answer. */
async function postGraphQL<T>(
  url: string,
  document: string,
  variables: Record<string, unknown> | undefined,
  headers: Record<string, string>,
): Promise<GraphQLResult<T>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...headers,
    },
    body: JSON.stringify({ query: document, variables }),
  });
  const text = await response.text();
  let body: GraphQLResult<T>['body'];
  try {
    body = JSON.parse(text) as GraphQLResult<T>['body'];
  } catch {
    throw new Error(`The facade answered ${response.status} with a non-JSON body: ${text.slice(0, 500)}`);
  }
  return { status: response.status, body, headers: response.headers };
}
