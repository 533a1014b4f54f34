/**
 * Environment → typed, validated configuration. Every bad value is reported at once, one line per
 * variable, and a secret's value is never part of a message.
 */
import { readAuthConfig, type AuthConfig } from './auth/config.ts';
import { readEventsConfig, type EventsConfig } from './events/config.ts';
import { readGatewayCachesConfig, type GatewayCachesConfig } from './events/gateway-caches/config.ts';
import { readEdgeConfig, type EdgeConfig } from './edge/config.ts';
import { readMcpConfig, type McpConfig } from './edge/mcp/config.ts';
import { EXPLORER_MODES, type ExplorerMode } from './http/explorer.ts';
import type { QueryLimits } from './graph/query-limits.ts';
import { readContractsConfig, type ContractsConfig } from './graph/contracts.ts';
import { EnvReader, type Env } from './env-reader.ts';
import type { UpstreamConfig } from './upstream/client.ts';
import {
  readOutageConfig,
  readUpstreamConfig,
  UPSTREAM_CONFIG_DEFAULTS,
  type OutageConfig,
} from './upstream/config.ts';
import { LOG_LEVELS, type LogLevel } from './logger.ts';
import { tracingRequested } from './observability/tracing-config.ts';
import { DEFAULT_SERVER_TIMEOUTS, type ServerTimeouts } from './http/server-timeouts.ts';
import type { MemoryReleaseConfig } from './observability/memory-release.ts';
import { readUsageConfig, type UsageConfig } from './observability/usage-recorder.ts';

export const NODE_ENVS = ['development', 'production', 'test'] as const;

export const INTROSPECTION_MODES = ['authenticated', 'public', 'off'] as const;

export type IntrospectionMode = (typeof INTROSPECTION_MODES)[number];

export type NodeEnv = (typeof NODE_ENVS)[number];

export interface Config {
  port: number;
  host: string;
  nodeEnv: NodeEnv;
  logLevel: LogLevel;
  /**
   * `EXPLORER`: what a browser opening `/graphql` gets: Apollo Sandbox (`sandbox`, the default; its
   * code comes from Apollo's CDN), GraphiQL served by the facade from its own files (`graphiql`,
   * for networks where the CDN cannot be reached), or nothing (`off`).
   */
  explorer: ExplorerMode;
  /** Serve Apollo Sandbox to a browser GET on `/graphql` (`explorer === 'sandbox'`). */
  landingPage: boolean;
  /**
   * Who may introspect (Sandbox needs it): `authenticated` callers (the default), everyone
   * (`public`), or nobody (`off`, which also drops "Did you mean" suggestions from errors).
   */
  introspection: IntrospectionMode;
  /** Who the callers are: OpenID Connect access tokens, callers' own keys, or nobody checked. */
  auth: AuthConfig;
  /** The contracts served (`schema/contracts.json`) and `CONTRACT_DEFAULT` (src/graph/audiences.ts). */
  contracts: ContractsConfig;
  /** Browser origins, trusted proxies, rate limits and trusted documents (docs/security.md). */
  edge: EdgeConfig;
  /** The MCP endpoint at `/mcp` (`MCP_*`; docs/mcp.md). */
  mcp: McpConfig;
  /** Documents over these limits are refused before execution (see docs/security.md). */
  queryLimits: QueryLimits;
  /**
   * Total time one operation (or one subscription event) may take (`OPERATION_TIMEOUT_MS`): upstream
   * calls still running then are cancelled and their fields answer `UPSTREAM_TIMEOUT`.
   */
  operationTimeoutMs: number;
  /**
   * How long a shutdown lets in-flight operations finish (`SHUTDOWN_DRAIN_MS`) before their upstream
   * calls are cancelled and they answer `SHUTTING_DOWN`.
   */
  shutdownDrainMs: number;
  /**
   * How long a kept-alive connection left idle at a shutdown is left to its client before it is
   * closed (`SHUTDOWN_IDLE_RELEASE_MS`, within the drain window): see `src/http/listen.ts`.
   */
  shutdownIdleReleaseMs: number;
  upstream: UpstreamConfig;
  /** What an upstream outage does (`UPSTREAM_CIRCUIT_*`, `CACHE_STALE_IF_ERROR_SECONDS`; docs/operations.md). */
  outage: OutageConfig;
  /** Webhooks, Redis and subscriptions (variables documented in `src/events/config.ts`). */
  events: EventsConfig;
  /** The gateways' response caches the facade invalidates (`src/events/gateway-caches/config.ts`). */
  gatewayCaches: GatewayCachesConfig;
  metrics: MetricsConfig;
  /** Field usage per client for the schema check (`USAGE_*`; src/observability/usage-recorder.ts). */
  usage: UsageConfig;
  /** Traces (docs/operations.md): on when the standard OTEL_* variables ask for an exporter. */
  tracing: TracingConfig;
  /** Host names served besides the defaults (`ALLOWED_HOSTS`; src/http/host-allow-list.ts). */
  allowedHosts: readonly string[];
  /** How long a client has to send a request's head and the whole request (src/http/server-timeouts.ts). */
  serverTimeouts: ServerTimeouts;
  /**
   * How long a `/readyz` answer is reused (`READINESS_CACHE_MS`; 0 asks the upstream every time), and
   * how long it waits for an upstream's probe (`READINESS_UPSTREAM_DEADLINE_MS`; src/http/health.ts).
   */
  readiness: { cacheMs: number; upstreamDeadlineMs: number };
  /**
   * How long Redis may stay out of reach without a break before `/readyz` answers 503
   * (`READINESS_REDIS_GRACE_SECONDS`); 0 counts it at once. See `src/http/health.ts`.
   */
  readinessRedisGraceSeconds: number;
  /**
   * One memory-reducing collection once the process has been idle for a while after its memory grew
   * (`MEMORY_RELEASE_*`; src/observability/memory-release.ts). Needs node's `--expose-gc`.
   */
  memoryRelease: MemoryReleaseConfig;
  /** What the start logs as a warning: a setting read under its old name. */
  warnings: readonly string[];
}

/** Whether OpenTelemetry traces are exported; the OTEL_* variables tune the rest. */
export interface TracingConfig {
  /** See `tracingRequested` in `src/observability/tracing-config.ts`. */
  enabled: boolean;
}

/** Where `/metrics` is served and how its labels are bounded. */
export interface MetricsConfig {
  /** `METRICS_PORT`: `/metrics` is served on this port (on `host`), never on the main port. */
  port: number;
  /** `METRICS_MAX_OPERATION_NAMES`: distinct operation names kept as labels before `other`. */
  maxOperationNames: number;
}

/** Thrown by {@link loadConfig} with one message per bad variable: one line when there is one. */
export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    // One problem is one line; several are listed one per line under the heading.
    super(
      problems.length === 1
        ? `Invalid configuration: ${problems.join('')}`
        : `Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Documented defaults, also shown in the README's configuration table. */
export const CONFIG_DEFAULTS = {
  PORT: 4000,
  HOST: '127.0.0.1',
  NODE_ENV: 'production',
  LOG_LEVEL: 'info',
  EXPLORER: 'sandbox',
  INTROSPECTION: 'authenticated',
  QUERY_MAX_DEPTH: 6,
  QUERY_MAX_ALIASES: 15,
  QUERY_MAX_DIRECTIVES: 50,
  QUERY_MAX_TOKENS: 1_000,
  QUERY_MAX_COST: 5_000,
  OPERATION_TIMEOUT_MS: 10_000,
  SHUTDOWN_DRAIN_MS: 10_000,
  // The advertised `Keep-Alive: timeout=5` and a second's slack for a loaded client.
  SHUTDOWN_IDLE_RELEASE_MS: 6_000,
  ...UPSTREAM_CONFIG_DEFAULTS,
  METRICS_PORT: 9464,
  METRICS_MAX_OPERATION_NAMES: 100,
  HTTP_HEADERS_TIMEOUT_MS: DEFAULT_SERVER_TIMEOUTS.headersTimeoutMs,
  HTTP_REQUEST_TIMEOUT_MS: DEFAULT_SERVER_TIMEOUTS.requestTimeoutMs,
  READINESS_CACHE_MS: 2_000,
  // A third of the shipped readiness probe's timeoutSeconds (3 s): Redis' PING is waited for 1 s too,
  // so /readyz answers within about 1 s whatever the upstream does, with room for a loaded node.
  READINESS_UPSTREAM_DEADLINE_MS: 1_000,
  // Twice a Sentinel failover as deploy/kubernetes/redis-ha.sh runs it: the Sentinels call the
  // primary down after 5 s of silence (REDIS_SENTINEL_DOWN_AFTER_MS), then vote and promote the
  // replica (the game day's promotion came 6.4 s after the kill), and the facade reconnects; the rest
  // is room for a loaded node. A replica cut off for longer is the one at fault (docs/operations.md).
  READINESS_REDIS_GRACE_SECONDS: 15,
  MEMORY_RELEASE_ENABLED: true,
  MEMORY_RELEASE_IDLE_MS: 15_000,
  MEMORY_RELEASE_MIN_GROWTH_PERCENT: 20,
} as const;

/**
 * Reads and validates the configuration from `env` (by default `process.env`).
 *
 * @throws {ConfigError} listing every invalid or missing variable, one line each.
 */
export function loadConfig(env: Env = process.env): Config {
  const reader = new EnvReader(env);
  const warnings: string[] = [];
  const config: Config = {
    port: reader.integer('PORT', CONFIG_DEFAULTS.PORT, 0, 65_535),
    host: reader.string('HOST', CONFIG_DEFAULTS.HOST),
    nodeEnv: reader.oneOf('NODE_ENV', NODE_ENVS, CONFIG_DEFAULTS.NODE_ENV),
    logLevel: reader.oneOf('LOG_LEVEL', LOG_LEVELS, CONFIG_DEFAULTS.LOG_LEVEL),
    ...readExplorer(reader),
    introspection: reader.oneOf('INTROSPECTION', INTROSPECTION_MODES, CONFIG_DEFAULTS.INTROSPECTION),
    queryLimits: {
      maxDepth: reader.integer('QUERY_MAX_DEPTH', CONFIG_DEFAULTS.QUERY_MAX_DEPTH, 1, 100),
      maxAliases: reader.integer('QUERY_MAX_ALIASES', CONFIG_DEFAULTS.QUERY_MAX_ALIASES, 0, 10_000),
      maxDirectives: reader.integer('QUERY_MAX_DIRECTIVES', CONFIG_DEFAULTS.QUERY_MAX_DIRECTIVES, 0, 10_000),
      // Beyond a few tens of thousands of tokens a nested document reaches the parser's recursion limit.
      maxTokens: reader.integer('QUERY_MAX_TOKENS', CONFIG_DEFAULTS.QUERY_MAX_TOKENS, 100, 50_000),
      maxCost: reader.integer('QUERY_MAX_COST', CONFIG_DEFAULTS.QUERY_MAX_COST, 1, 100_000_000),
    },
    operationTimeoutMs: reader.integer(
      'OPERATION_TIMEOUT_MS',
      CONFIG_DEFAULTS.OPERATION_TIMEOUT_MS,
      1,
      600_000,
    ),
    shutdownDrainMs: reader.integer('SHUTDOWN_DRAIN_MS', CONFIG_DEFAULTS.SHUTDOWN_DRAIN_MS, 0, 600_000),
    shutdownIdleReleaseMs: reader.integer(
      'SHUTDOWN_IDLE_RELEASE_MS',
      CONFIG_DEFAULTS.SHUTDOWN_IDLE_RELEASE_MS,
      0,
      600_000,
    ),
    upstream: readUpstreamConfig(reader),
    outage: readOutageConfig(reader),
    events: readEventsConfig(env, (name, problem) => reader.report(name, problem)),
    gatewayCaches: readGatewayCachesConfig(env, (name, problem) => reader.report(name, problem)),
    auth: readAuthConfig(env, (name, problem) => reader.report(name, problem)),
    contracts: readContractsConfig(env, (name, problem) => reader.report(name, problem)),
    edge: readEdgeConfig(
      env,
      (name, problem) => reader.report(name, problem),
      (warning) => warnings.push(warning),
    ),
    mcp: readMcpConfig(env, (name, problem) => reader.report(name, problem)),
    metrics: {
      port: reader.integer('METRICS_PORT', CONFIG_DEFAULTS.METRICS_PORT, 0, 65_535),
      maxOperationNames: reader.integer(
        'METRICS_MAX_OPERATION_NAMES',
        CONFIG_DEFAULTS.METRICS_MAX_OPERATION_NAMES,
        1,
        10_000,
      ),
    },
    usage: readUsageConfig(reader),
    tracing: { enabled: tracingRequested(env) },
    warnings,
    allowedHosts: (reader.trimmed('ALLOWED_HOSTS') ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => name !== ''),
    serverTimeouts: {
      headersTimeoutMs: reader.integer(
        'HTTP_HEADERS_TIMEOUT_MS',
        CONFIG_DEFAULTS.HTTP_HEADERS_TIMEOUT_MS,
        100,
        600_000,
      ),
      requestTimeoutMs: reader.integer(
        'HTTP_REQUEST_TIMEOUT_MS',
        CONFIG_DEFAULTS.HTTP_REQUEST_TIMEOUT_MS,
        100,
        600_000,
      ),
    },
    readiness: {
      cacheMs: reader.integer('READINESS_CACHE_MS', CONFIG_DEFAULTS.READINESS_CACHE_MS, 0, 600_000),
      upstreamDeadlineMs: reader.integer(
        'READINESS_UPSTREAM_DEADLINE_MS',
        CONFIG_DEFAULTS.READINESS_UPSTREAM_DEADLINE_MS,
        10,
        60_000,
      ),
    },
    readinessRedisGraceSeconds: reader.integer(
      'READINESS_REDIS_GRACE_SECONDS',
      CONFIG_DEFAULTS.READINESS_REDIS_GRACE_SECONDS,
      0,
      3_600,
    ),
    memoryRelease: {
      enabled: reader.boolean('MEMORY_RELEASE_ENABLED', CONFIG_DEFAULTS.MEMORY_RELEASE_ENABLED),
      idleMs: reader.integer(
        'MEMORY_RELEASE_IDLE_MS',
        CONFIG_DEFAULTS.MEMORY_RELEASE_IDLE_MS,
        100,
        86_400_000,
      ),
      minGrowthPercent: reader.integer(
        'MEMORY_RELEASE_MIN_GROWTH_PERCENT',
        CONFIG_DEFAULTS.MEMORY_RELEASE_MIN_GROWTH_PERCENT,
        0,
        10_000,
      ),
    },
  };
  checkEnvironmentBinding(reader, config);
  if (reader.problems.length > 0) throw new ConfigError(reader.problems);
  return config;
}

/** Both environments in one deployment need callers whose tokens say which one they are in. */
function checkEnvironmentBinding(reader: EnvReader, config: Config): void {
  const keys = config.upstream.environmentKeys;
  if (keys === undefined) return;
  if (config.auth.mode === 'none') {
    reader.report(
      'AUTH_MODE',
      'none cannot be used with UPSTREAM_API_KEY_SANDBOX or UPSTREAM_API_KEY_LIVE: an open facade cannot tell which environment a caller is in',
    );
  } else if (config.auth.allowCallerApiKey) {
    reader.report(
      'AUTH_ALLOW_CALLER_API_KEY',
      'cannot be used with UPSTREAM_API_KEY_SANDBOX or UPSTREAM_API_KEY_LIVE: callers are bound to an environment by their token',
    );
  }
}

/**
 * `EXPLORER`, or for configurations written before it, `LANDING_PAGE` (`false` meaning `off`).
 * Both set and disagreeing is refused rather than one silently winning.
 */
function readExplorer(reader: EnvReader): Pick<Config, 'explorer' | 'landingPage'> {
  const legacy =
    reader.trimmed('LANDING_PAGE') === undefined ? undefined : reader.boolean('LANDING_PAGE', true);
  const fromLegacy: ExplorerMode | undefined = legacy === undefined ? undefined : legacy ? 'sandbox' : 'off';
  const explorer =
    reader.trimmed('EXPLORER') === undefined
      ? (fromLegacy ?? CONFIG_DEFAULTS.EXPLORER)
      : reader.oneOf('EXPLORER', EXPLORER_MODES, CONFIG_DEFAULTS.EXPLORER);
  if (legacy === false && explorer !== 'off') {
    reader.report(
      'LANDING_PAGE',
      `false contradicts EXPLORER=${explorer}; set EXPLORER alone (sandbox, graphiql or off)`,
    );
  }
  return { explorer, landingPage: explorer === 'sandbox' };
}
