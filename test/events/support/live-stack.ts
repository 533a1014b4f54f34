/**
 * Real pieces for the subscription tests: an emulator, facades against it (several may share one
 * emulator and one Redis), graphql-ws clients on Node's global WebSocket, and signed deliveries.
 */
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll } from 'vitest';
import { createEmulator, type EmulatorOptions } from '../../../emulator/index.ts';
import { signWebhook } from '../../../emulator/webhooks/signature.ts';
import { createApp, type App } from '../../../src/app.ts';
import { loadConfig } from '../../../src/config.ts';
import { createLogger } from '../../../src/logger.ts';
import { facadeTestEnv, SANDBOX_KEY } from '../../support/stack.ts';
import { watchLifecycle, type LifecycleWatch } from '../../support/harness/lifecycle-watch.ts';
import { tokenFor } from '../../support/tokens.ts';

// Response bodies and results are asserted with toMatchObject; a loose type keeps the tests readable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

export { SANDBOX_KEY };
export const LIVE_KEY = 'sk_live_emulator';

export interface RunningEmulator {
  url: string;
  /** Calls the emulator's REST API like any client would. The body is parsed JSON, left untyped for tests. */
  rest(
    method: string,
    path: string,
    options?: { key?: string; body?: unknown },
  ): Promise<{ status: number; body: Json }>;
  close(): Promise<void>;
}

/** Starts an emulator on a free loopback port; fast webhook retries unless told otherwise. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emulator = createEmulator({ data: 'demo', webhookRetryBaseMs: 50, ...options });
  const { url } = await emulator.listen(0, '127.0.0.1');
  let request = 0;
  return {
    url,
    async rest(method, path, { key = SANDBOX_KEY, body } = {}) {
      request += 1;
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          'x-api-key': key,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(method === 'GET' ? {} : { 'idempotency-key': `test-${process.pid}-${Date.now()}-${request}` }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
    },
    close: () => emulator.close(),
  };
}

export interface RunningFacade {
  app: App;
  url: string;
  wsUrl: string;
  webhookUrl: string;
  logs: string[];
  /** The facade's lifecycle hooks, counted since it started. */
  lifecycle: LifecycleWatch;
  /** Resolves once `count` subscriptions have started on this facade since it started. */
  subscriptionsStarted(count: number): Promise<void>;
  /** Resolves once `count` subscriptions have completed on this facade since it started. */
  subscriptionsCompleted(count: number): Promise<void>;
  close(): Promise<void>;
}

/** Starts a facade against `emulatorUrl` with the given extra environment. */
export async function startFacade(
  emulatorUrl: string,
  env: Record<string, string> = {},
): Promise<RunningFacade> {
  const config = loadConfig({ ...facadeTestEnv(emulatorUrl), ...env });
  const logs: string[] = [];
  const app = await createApp(config, {
    logger: createLogger({ level: 'debug', write: (line) => logs.push(line) }),
    auditLogger: createLogger({ level: 'info', write: (line) => logs.push(line) }).child({ log: 'audit' }),
  });
  const lifecycle = watchLifecycle(app.lifecycle);
  const { url } = await app.listen(0, '127.0.0.1');
  return {
    app,
    url,
    wsUrl: `${url.replace(/^http/, 'ws')}/graphql`,
    webhookUrl: `${url}/webhooks/platform`,
    logs,
    lifecycle,
    subscriptionsStarted: (count) =>
      lifecycle.reached('subscriptionStarted', count, `${count} subscription(s) to start`),
    subscriptionsCompleted: (count) =>
      lifecycle.reached('subscriptionCompleted', count, `${count} subscription(s) to complete`),
    async close() {
      await app.close();
      lifecycle.close();
    },
  };
}

/** One emulator and one facade for a test file, with the graphql-ws clients its tests open. */
export interface LiveStack {
  readonly emulator: RunningEmulator;
  readonly facade: RunningFacade;
  /**
   * A graphql-ws client on the facade (see {@link connectLive}), disposed after the file's tests;
   * it connects as the operator unless `connectionParams` say otherwise.
   */
  connect(connectionParams?: Record<string, unknown>): LiveClient;
  /** Resolves once `more` subscriptions have started on the facade since the last call. */
  subscriptionsStarted(more: number): Promise<void>;
  /** Resolves once `more` subscriptions have completed on the facade since the last call. */
  subscriptionsCompleted(more: number): Promise<void>;
}

/**
 * Starts an emulator and a facade with `env` before the file's tests (beforeAll), and disposes
 * every client, then the facade, then the emulator after them (afterAll). Call at module level.
 */
export function useLiveStack(env: Record<string, string> = {}): LiveStack {
  let emulator: RunningEmulator | undefined;
  let facade: RunningFacade | undefined;
  const clients: LiveClient[] = [];
  let started = 0;
  let completed = 0;

  // Connections are the operator's unless a test brings its own `connection_init` payload.
  let operatorParams: Record<string, unknown> | undefined;
  beforeAll(async () => {
    operatorParams = { Authorization: `Bearer ${await tokenFor('operator')}` };
    emulator = await startEmulator();
    facade = await startFacade(emulator.url, env);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.dispose()));
    await facade?.close();
    await emulator?.close();
  });

  const running = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw new Error(`the ${name} is used before beforeAll started it`);
    return value;
  };
  return {
    get emulator() {
      return running(emulator, 'emulator');
    },
    get facade() {
      return running(facade, 'facade');
    },
    connect(connectionParams) {
      const client = connectLive(running(facade, 'facade').wsUrl, connectionParams ?? operatorParams);
      clients.push(client);
      return client;
    },
    async subscriptionsStarted(more) {
      started += more;
      await running(facade, 'facade').subscriptionsStarted(started);
    },
    async subscriptionsCompleted(more) {
      completed += more;
      await running(facade, 'facade').subscriptionsCompleted(completed);
    },
  };
}

/** What a subscription received, in order. */
export interface Received {
  data: Json[];
  errors: Json[];
  completed: boolean;
}

export interface LiveClient {
  client: Client;
  /** Starts a subscription and records what arrives; `stop()` ends it from the client side. */
  subscribe(
    query: string,
    variables?: Record<string, unknown>,
  ): Received & { stop(): void; done: Promise<void> };
  /** The close event of the socket, once it closed. */
  closed: Promise<{ code: number; reason: string }>;
  dispose(): Promise<void>;
}

/** A graphql-ws client (the real one, over Node's global WebSocket) that does not reconnect. */
export function connectLive(wsUrl: string, connectionParams?: Record<string, unknown>): LiveClient {
  let resolveClosed!: (event: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    resolveClosed = resolve;
  });
  const client = createClient({
    url: wsUrl,
    webSocketImpl: WebSocket,
    lazy: false,
    retryAttempts: 0,
    ...(connectionParams === undefined ? {} : { connectionParams }),
    on: {
      closed: (event) => {
        const { code, reason } = event as CloseEvent;
        resolveClosed({ code, reason });
      },
    },
    onNonLazyError: () => {},
  });
  return {
    client,
    closed,
    subscribe(query, variables) {
      const received: Received = { data: [], errors: [], completed: false };
      let finish!: () => void;
      const done = new Promise<void>((resolve) => {
        finish = resolve;
      });
      const stop = client.subscribe(
        { query, ...(variables === undefined ? {} : { variables }) },
        {
          next: (result) => {
            if (result.errors) received.errors.push(...result.errors);
            if (result.data) received.data.push(result.data);
          },
          error: (error) => {
            received.errors.push(error);
            finish();
          },
          complete: () => {
            received.completed = true;
            finish();
          },
        },
      );
      return Object.assign(received, { stop, done });
    },
    dispose: async () => {
      await client.dispose();
    },
  };
}

/** A Standard Webhooks delivery of `event`, signed with `secret`, posted to `url`. */
export async function postSignedEvent(url: string, secret: string, event: object & { id: string }) {
  const body = JSON.stringify(event);
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ secret, id: event.id, timestamp, body }),
    },
    body,
  });
  return { status: response.status, body: await response.json().catch(() => undefined) };
}
