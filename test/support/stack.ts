/**
 * A real stack for integration tests: the emulator and the facade, each on its own port 0 on
 * loopback, talking over HTTP. Composes emulator/ and src/, which never import each other.
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { createEmulator } from '../../emulator/index.ts';
import { createApp, type App, type AppDependencies } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import type { OperationCompleted } from '../../src/observability/lifecycle.ts';
import { watchLifecycle, type LifecycleWatch } from './harness/lifecycle-watch.ts';
import { bearer, issuerEnv, type TestCallerName } from './tokens.ts';

export type EmulatorOptions = NonNullable<Parameters<typeof createEmulator>[0]>;

/** The emulator's default sandbox key (read_write). */
export const SANDBOX_KEY = 'sk_sandbox_emulator';
/** The emulator's default sandbox key with the read_only scope. */
export const READ_ONLY_KEY = 'sk_sandbox_emulator_readonly';

export interface StackOptions {
  /** Options of `createEmulator` (default: demo data). */
  emulator?: EmulatorOptions;
  /** Facade environment variables, over the stack's defaults (fast retries, debug logs). */
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
  };
  headers: Headers;
}

export interface UpstreamCalls {
  total: number;
  byRoute: Record<string, number>;
}

/** A fault configuration of the emulator (`PUT /_emulator/faults`). */
export interface FaultSpec {
  latency?: { fixedMs: number; jitterMs: number };
  rules?: {
    route?: string;
    kind: 'internal_error' | 'request_failed' | 'reset' | 'stall';
    rate: number;
    times?: number;
  }[];
}

export interface Stack {
  emulatorUrl: string;
  /** The facade's base URL (no path). */
  facadeUrl: string;
  /** `${facadeUrl}/graphql` */
  graphqlUrl: string;
  /** Where `/metrics` is served: on the facade's port, or on `METRICS_PORT`'s server. */
  metricsUrl: string;
  config: Config;
  app: App;
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
  /** Counts of `/v3` requests the emulator received since the last reset. */
  upstreamCalls(): Promise<UpstreamCalls>;
  resetUpstreamCalls(): Promise<void>;
  setFaults(spec: FaultSpec): Promise<void>;
  clearFaults(): Promise<void>;
  /** Every line the facade logged so far (JSON strings). */
  logs(): readonly string[];
  /** The facade's lifecycle hooks, counted since it started. */
  lifecycle: LifecycleWatch;
  /** Resolves once `count` subscriptions have started on the facade since it started. */
  subscriptionsStarted(count: number): Promise<void>;
  /** The next HTTP operation the facade completes from now on (that `matching` accepts). */
  nextOperationCompleted(matching?: (operation: OperationCompleted) => boolean): Promise<OperationCompleted>;
  close(): Promise<void>;
}

/**
 * The facade environment every test stack starts from: the emulator's sandbox key, the run's
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
    NODE_ENV: 'test',
    LOG_LEVEL: 'debug',
    UPSTREAM_RETRY_BASE_DELAY_MS: '5',
    UPSTREAM_RETRY_MAX_DELAY_MS: '20',
  };
}

/** Starts an emulator and a facade configured against it. Always `close()` it (afterAll). */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const emulator = createEmulator({ data: 'demo', ...options.emulator } as EmulatorOptions);
  const { url: emulatorUrl } = await emulator.listen(0, '127.0.0.1');
  const lines: string[] = [];
  let app: App | undefined;
  try {
    const config = loadConfig({ ...facadeTestEnv(emulatorUrl), ...options.env });
    // Deliberately no redaction here: tests assert that no key reaches a log line at all.
    const logger = createLogger({ level: config.logLevel, write: (line) => lines.push(line) });
    // Audit lines join the same collection (they carry `"log":"audit"`), not the test's stdout.
    const auditLogger = createLogger({ level: 'info', write: (line) => lines.push(line) }).child({
      log: 'audit',
    });
    app = await createApp(config, { auditLogger, ...options.app, logger });
    const lifecycle = watchLifecycle(app.lifecycle);
    const listening = await app.listen(0, '127.0.0.1');
    const facadeUrl = listening.url;
    const graphqlUrl = `${facadeUrl}/graphql`;
    const started = app;

    const control = async (method: string, path: string, body?: unknown): Promise<Response> => {
      const response = await fetch(`${emulatorUrl}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (!response.ok) {
        throw new Error(
          `Emulator control ${method} ${path} failed: ${response.status} ${await response.text()}`,
        );
      }
      return response;
    };

    return {
      emulatorUrl,
      facadeUrl,
      graphqlUrl,
      metricsUrl: `${listening.metricsUrl ?? facadeUrl}/metrics`,
      config,
      app,
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
      async upstreamCalls() {
        const counts = (await (await control('GET', '/_emulator/requests')).json()) as UpstreamCalls;
        return { total: counts.total, byRoute: counts.byRoute };
      },
      async resetUpstreamCalls() {
        await control('DELETE', '/_emulator/requests');
      },
      async setFaults(spec) {
        await control('PUT', '/_emulator/faults', {
          latency: spec.latency ?? { fixedMs: 0, jitterMs: 0 },
          rules: spec.rules ?? [],
        });
      },
      async clearFaults() {
        await control('DELETE', '/_emulator/faults');
      },
      logs: () => lines,
      lifecycle,
      subscriptionsStarted: (count) =>
        lifecycle.reached('subscriptionStarted', count, `${count} subscription(s) to start`),
      nextOperationCompleted: (matching) => lifecycle.next('operationCompleted', matching),
      async close() {
        await started.close();
        lifecycle.close();
        await emulator.close();
      },
    };
  } catch (error) {
    await app?.close();
    await emulator.close();
    throw error;
  }
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

/**
 * Starts a stack for the enclosing `describe` (or file): started in `beforeAll`, closed in
 * `afterAll`, and before each test its faults cleared and its upstream counts reset, so every test
 * starts from the same state. Returns the stack, usable from inside the tests.
 */
export function useStack(options: StackOptions = {}): Stack {
  let current: Stack | undefined;
  beforeAll(async () => {
    current = await startStack(options);
  });
  afterAll(async () => {
    await current?.close();
  });
  beforeEach(async () => {
    await current?.clearFaults();
    await current?.resetUpstreamCalls();
  });
  return new Proxy({} as Stack, {
    get(_target, property) {
      if (!current) throw new Error('The stack is used before beforeAll has started it.');
      return Reflect.get(current, property) as unknown;
    },
  });
}
