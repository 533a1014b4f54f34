/**
 * A real stack for the tests: the emulator and one or more facades against it, each on its own
 * port 0 on loopback, talking over HTTP; with `redis`, the facades share the run's real Redis
 * (started by test/support/redis-global-setup.ts) under a key prefix of the stack's own, as
 * replicas do. Composes emulator/ and src/, which never import each other.
 *
 * The first facade's URLs and helpers are the stack's own (`stack.query`, `stack.connect`, ...), so
 * most tests never name a facade; `stack.facades` holds every one.
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import type { App } from '../../../src/app.ts';
import type { Config } from '../../../src/config.ts';
import {
  startEmulator,
  type EmulatorOptions,
  type FaultSpec,
  type RunningEmulator,
  type UpstreamCalls,
} from './emulator.ts';
import { startFacade, type FacadeOptions, type RunningFacade } from './facade.ts';
import { requireRedisUrl, uniqueRedisPrefix } from './redis.ts';

export interface StackOptions extends FacadeOptions {
  /** Options of the emulator (default: demo data, fast webhook retries). */
  emulator?: EmulatorOptions;
  /** How many facades to start against the emulator, each with the same options. Default 1. */
  facades?: number;
  /**
   * The facades use the run's real Redis (`REDIS_URL`) under a prefix of this stack's own
   * (`REDIS_KEY_PREFIX`): their event log, de-duplication and rate limits are shared, and no other
   * test's are.
   */
  redis?: boolean;
  /** Variables of one facade only (by its index), over the others: e.g. a replica's own REDIS_URL. */
  facadeEnv?: (index: number) => Record<string, string>;
}

type FacadeHelpers = Pick<
  RunningFacade,
  | 'query'
  | 'queryAs'
  | 'queryWithKey'
  | 'queryAnonymously'
  | 'connect'
  | 'logs'
  | 'lifecycle'
  | 'nextOperationCompleted'
>;

export interface Stack extends FacadeHelpers {
  readonly emulator: RunningEmulator;
  /** The first facade. */
  readonly facade: RunningFacade;
  /** Every facade, in the order they started. */
  readonly facades: readonly RunningFacade[];
  emulatorUrl: string;
  /** The first facade's base URL (no path). */
  facadeUrl: string;
  /** `${facadeUrl}/graphql` */
  graphqlUrl: string;
  /** Where the first facade serves `/metrics`: on its port, or on `METRICS_PORT`'s server. */
  metricsUrl: string;
  config: Config;
  app: App;
  /** Counts of `/v3` requests the emulator received since the last reset. */
  upstreamCalls(): Promise<UpstreamCalls>;
  resetUpstreamCalls(): Promise<void>;
  setFaults(spec: FaultSpec): Promise<void>;
  clearFaults(): Promise<void>;
  /**
   * Resolves once `more` subscriptions have started (listen) on the first facade since the last
   * call: call it after subscribing and before making the change the subscription waits for.
   */
  subscriptionsStarted(more: number): Promise<void>;
  /** Resolves once `more` subscriptions have completed on the first facade since the last call. */
  subscriptionsCompleted(more: number): Promise<void>;
  /** Closes the facades (last started first, their clients first), then the emulator. */
  close(): Promise<void>;
}

/** Starts an emulator and the facades configured against it. Always `close()` it (afterAll). */
export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const emulator = await startEmulator(options.emulator);
  const facades: RunningFacade[] = [];
  const close = async (): Promise<void> => {
    for (const facade of facades.splice(0).reverse()) await facade.close();
    await emulator.close();
  };
  try {
    const env = {
      ...(options.redis === true
        ? { REDIS_URL: requireRedisUrl(), REDIS_KEY_PREFIX: uniqueRedisPrefix() }
        : {}),
      ...options.env,
    };
    // One after the other: each registers its own webhook endpoint at start, when asked to.
    for (let started = 0; started < (options.facades ?? 1); started += 1) {
      const own = { ...env, ...options.facadeEnv?.(started) };
      facades.push(
        await startFacade(emulator.url, { env: own, ...(options.app ? { app: options.app } : {}) }),
      );
    }
  } catch (error) {
    await close();
    throw error;
  }
  const facade = facades[0]!;
  let started = 0;
  let completed = 0;

  return {
    emulator,
    facade,
    facades: [...facades],
    emulatorUrl: emulator.url,
    facadeUrl: facade.url,
    graphqlUrl: facade.graphqlUrl,
    metricsUrl: facade.metricsUrl,
    config: facade.config,
    app: facade.app,
    query: (document, variables, headers) => facade.query(document, variables, headers),
    queryAs: (caller, document, variables) => facade.queryAs(caller, document, variables),
    queryWithKey: (apiKey, document, variables) => facade.queryWithKey(apiKey, document, variables),
    queryAnonymously: (document, variables) => facade.queryAnonymously(document, variables),
    connect: (connectionParams) => facade.connect(connectionParams),
    logs: () => facade.logs(),
    lifecycle: facade.lifecycle,
    nextOperationCompleted: (matching) => facade.nextOperationCompleted(matching),
    upstreamCalls: () => emulator.upstreamCalls(),
    resetUpstreamCalls: () => emulator.resetUpstreamCalls(),
    setFaults: (spec) => emulator.setFaults(spec),
    clearFaults: () => emulator.clearFaults(),
    async subscriptionsStarted(more) {
      started += more;
      await facade.subscriptionsStarted(started);
    },
    async subscriptionsCompleted(more) {
      completed += more;
      await facade.subscriptionsCompleted(completed);
    },
    close,
  };
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
