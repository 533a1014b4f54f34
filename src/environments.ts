/**
 * Sandbox and live in one deployment. Everything that holds an environment's state is built once
 * per environment from one factory: the key source, the upstream client with its response cache,
 * and the event pipeline (its webhook route, secrets and registration, event log, de-duplication,
 * reconciler, Redis keys). An operation reaches the parts of the one environment the door bound
 * its caller to, so nothing of one environment is seen, invalidated, resumed into or charged in the
 * other. With `UPSTREAM_API_KEY` alone there is one such stack, exactly today's facade.
 */
import type { Config } from './config.ts';
import {
  createEventsRuntime,
  type EventsRuntime,
  type EventsRuntimeOptions,
} from './events/events-runtime.ts';
import type { PlatformEnvironment } from './platform-environment.ts';
import { newestFirst } from './events/receiving/dead-letters.ts';
import type { LiveSessions, LiveSubscriber } from './events/delivery/live-sessions.ts';
import type { Logger } from './logger.ts';
import type { ResponseCacheStats } from './upstream/response-cache.ts';
import { createUpstreamClient, type UpstreamClientOptions, type UpstreamClient } from './upstream/client.ts';
import {
  ENVIRONMENT_KEY_VARIABLES,
  configuredEnvironments,
  type ConfiguredKey,
} from './upstream/environment-keys.ts';
import { createKeyEnvironments, probeKey, type KeyEnvironments } from './upstream/key-environments.ts';
import { createKeySource, type KeyReload, type UpstreamKeySource } from './upstream/key-source.ts';

/** The parts of one environment. */
export interface EnvironmentStack {
  /** Undefined for the one stack of `UPSTREAM_API_KEY`. */
  readonly environment: PlatformEnvironment | undefined;
  readonly key: UpstreamKeySource;
  readonly client: UpstreamClient;
  readonly keyEnvironments: KeyEnvironments;
  readonly events: EventsRuntime;
}

/** Every environment's stack, and what the rest of the app sees of them together. */
export interface EnvironmentStacks {
  /** One stack per configured environment (one stack with `UPSTREAM_API_KEY`). */
  readonly all: readonly EnvironmentStack[];
  /** Whether callers are bound to an environment (a key per environment). */
  readonly bindsEnvironments: boolean;
  /** The stack of `environment`; the first one when undefined or not configured. */
  of(environment: PlatformEnvironment | undefined): EnvironmentStack;
  /** The probe of a key (the facade's own of `environment`'s stack when undefined). */
  readonly keyEnvironments: KeyEnvironments;
  /** Every stack's event pipeline as one. */
  readonly events: EventsRuntime;
  /** Every environment's response cache, summed (metrics); undefined when caching is off. */
  cacheStats(): ResponseCacheStats | undefined;
  /** Reads every key file again; the most telling outcome (kept, rotated, unchanged, fixed). */
  reloadKeys(): Promise<KeyReload>;
}

/** What every stack is built with besides its environment. */
export interface EnvironmentStackParts {
  config: Config;
  logger: Logger;
  /** Told of every key taken, before it is used (log redaction). */
  onKey: (apiKey: string) => void;
  upstream: Pick<UpstreamClientOptions, 'observer' | 'tracer'>;
  events: Omit<
    EventsRuntimeOptions,
    'config' | 'defaultApiKey' | 'keyEnvironments' | 'upstreamClient' | 'logger'
  >;
}

/** Builds one stack per configured environment (or the one stack of `UPSTREAM_API_KEY`). */
export function createEnvironmentStacks(parts: EnvironmentStackParts): EnvironmentStacks {
  const keys = parts.config.upstream.environmentKeys;
  const all =
    keys === undefined
      ? [createEnvironmentStack(parts, undefined, parts.config.upstream)]
      : (configuredEnvironments(keys) ?? []).map((environment) =>
          createEnvironmentStack(parts, environment, keys[environment]!),
        );
  const byEnvironment = new Map(all.map((stack) => [stack.environment, stack]));
  const of = (environment: PlatformEnvironment | undefined): EnvironmentStack =>
    byEnvironment.get(environment) ?? all[0]!;
  return {
    all,
    bindsEnvironments: keys !== undefined,
    of,
    keyEnvironments: { probe: (apiKey, environment) => of(environment).keyEnvironments.probe(apiKey) },
    events: keys === undefined ? all[0]!.events : combineEvents(all),
    cacheStats: () => sumStats(all.map((stack) => stack.client.cache?.stats())),
    async reloadKeys() {
      const outcomes = await Promise.all(all.map((stack) => stack.key.reload('signal')));
      const rank = { kept: 0, rotated: 1, unchanged: 2, fixed: 3 } as const;
      return outcomes.reduce((telling, outcome) =>
        rank[outcome.outcome] < rank[telling.outcome] ? outcome : telling,
      );
    },
  };
}

/** The key source, upstream client and event pipeline of one environment. */
function createEnvironmentStack(
  parts: EnvironmentStackParts,
  environment: PlatformEnvironment | undefined,
  key: ConfiguredKey,
): EnvironmentStack {
  const { config, logger } = parts;
  const { circuit, staleIfErrorSeconds } = config.outage;
  const client = createUpstreamClient({
    ...config.upstream,
    ...parts.upstream,
    logger,
    environment,
    ...(config.upstream.cache === undefined
      ? {}
      : { cache: { ...config.upstream.cache, staleIfErrorSeconds } }),
    circuit,
    // The environment's own key (this stack's source, read at each probe), not the first one's.
    probeKey: () => source.current(),
  });
  const source = createKeySource({
    name: environment === undefined ? 'UPSTREAM_API_KEY' : ENVIRONMENT_KEY_VARIABLES[environment],
    initial: key.apiKey,
    file: key.apiKeyFile,
    check: (apiKey) => probeKey(client, apiKey),
    logger,
    onKey: parts.onKey,
  });
  const keyEnvironments = createKeyEnvironments(client, source);
  const events = createEventsRuntime({
    ...parts.events,
    config: environment === undefined ? config.events : eventsConfigOf(config.events, environment),
    defaultApiKey: source,
    keyEnvironments,
    upstreamClient: client,
    logger,
    ...(environment === undefined ? {} : { environment }),
  });
  return { environment, key: source, client, keyEnvironments, events };
}

/**
 * An environment's event settings: its own webhook secrets, and its own Redis keys (event log,
 * de-duplication, reconciliation state, cache invalidations) under `<REDIS_KEY_PREFIX><environment>:`.
 */
function eventsConfigOf(config: Config['events'], environment: PlatformEnvironment): Config['events'] {
  return {
    ...config,
    redisKeyPrefix: `${config.redisKeyPrefix}${environment}:`,
    webhooks: { ...config.webhooks, secrets: config.webhooks.secretsByEnvironment?.[environment] ?? [] },
  };
}

/** Every stack's pipeline as one: a subscriber lives in its own environment's. */
function combineEvents(stacks: readonly EnvironmentStack[]): EventsRuntime {
  const runtimes = stacks.map((stack) => stack.events);
  const runtimeOf = (environment: PlatformEnvironment): EventsRuntime =>
    (stacks.find((stack) => stack.environment === environment) ?? stacks[0]!).events;
  const live: LiveSessions = {
    subscriber: (caller, apiKey, environment) =>
      runtimeOf(environment).live.subscriber(caller, apiKey, environment),
    session: (subscriber: LiveSubscriber, ...rest) =>
      runtimeOf(subscriber.environment).live.session(subscriber, ...rest),
    cursors: (environment) => runtimeOf(environment).live.cursors(environment),
    revoke: (subscriber, timeoutMs) => runtimeOf(subscriber.environment).live.revoke(subscriber, timeoutMs),
    endAll: () => {
      for (const runtime of runtimes) runtime.live.endAll();
    },
  };
  const combined: EventsRuntime = {
    live,
    deadLetters: {
      async list(limit) {
        const lists = await Promise.all(runtimes.map((runtime) => runtime.deadLetters.list(limit)));
        return newestFirst(lists.flat(), limit);
      },
    },
    apolloPlugin: {
      async serverWillStart() {
        return {
          async drainServer() {
            await combined.drain();
          },
        };
      },
    },
    attach: (host) => {
      for (const runtime of runtimes) runtime.attach(host);
    },
    async start(baseUrl) {
      for (const runtime of runtimes) await runtime.start(baseUrl);
    },
    async drain() {
      await Promise.all(runtimes.map((runtime) => runtime.drain()));
    },
    async close() {
      await Promise.all(runtimes.map((runtime) => runtime.close()));
    },
    // Each pipeline's log holds its own environment's events only.
    async logStats() {
      const stats = await Promise.all(
        stacks.map(async (stack) =>
          (await stack.events.logStats()).filter((entry) => entry.environment === stack.environment),
        ),
      );
      return stats.flat();
    },
    async checkRedis(timeoutMs) {
      const checks = await Promise.all(runtimes.map((runtime) => runtime.checkRedis(timeoutMs)));
      return checks.find((check) => check?.reachable === false) ?? checks[0];
    },
  };
  return combined;
}

function sumStats(stats: readonly (ResponseCacheStats | undefined)[]): ResponseCacheStats | undefined {
  const present = stats.filter((entry) => entry !== undefined);
  if (present.length === 0) return undefined;
  const sum: ResponseCacheStats = {
    hits: 0,
    misses: 0,
    evictions: 0,
    invalidations: 0,
    expirations: 0,
    staleServed: 0,
    bytes: 0,
    entries: 0,
  };
  for (const entry of present) {
    for (const name of Object.keys(sum) as (keyof ResponseCacheStats)[]) sum[name] += entry[name];
  }
  return sum;
}
