/**
 * Builds the app without listening, in one pass, each part from parts already built: the parts that
 * know nothing of routes (logger, metrics, schema, the upstream environments with their event
 * pipelines, the door), then every transport (`transports.ts`: HTTP's adapter of the door with
 * Apollo Server as its executor on `/graphql`, and the live wing's graphql-ws on the same path, SSE
 * on `/graphql/stream` and Apollo's multipart protocol on `/graphql`), then the gauges that read
 * them, then express 5's routes on one http.Server (the webhook route, `/healthz`, `/readyz`;
 * `/metrics` on a port of its own). No access rule is written here. Tests build it in process;
 * main.ts listens.
 */
import http from 'node:http';
import express from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Config } from './config.ts';
import { createConfiguredDoor } from './edge/configured-door.ts';
import { createFormatError } from './errors/format-error.ts';
import { createEnvironmentStacks } from './environments.ts';
import { createSchema } from './graph/schema.ts';
import { createAudiences, singleAudience } from './graph/audiences.ts';
import { createTransports, type Transports } from './transports.ts';
import { createAnswerCache } from './graph/answer-cache.ts';
import { clientAddress } from './http/client-address.ts';
import { cors } from './http/cors.ts';
import { createExplorerRoutes, prepareExplorer } from './http/explorer.ts';
import { handleHttpError, handleNotFound } from './http/fallback.ts';
import { handleHealth, handleReadiness } from './http/health.ts';
import { RedisReachability } from './http/redis-reachability.ts';
import { frameProtection } from './http/frame-protection.ts';
import { createHostAllowList } from './http/host-allow-list.ts';
import {
  closeConnectionsWhileShuttingDown,
  listenOn,
  watchHttpConnections,
  type HttpConnections,
} from './http/listen.ts';
import { serverTimeoutOptions } from './http/server-timeouts.ts';
import { assignRequestId } from './http/request-id.ts';
import { createLogger, type Logger } from './logger.ts';
import { createLifecycle, type Lifecycle } from './observability/lifecycle.ts';
import { createMemoryRelease } from './observability/memory-release.ts';
import type { Metrics } from './observability/metrics.ts';
import { createObservability } from './observability/observability.ts';
import { eventMetrics, gatewayInvalidationObserver } from './observability/work-observers.ts';
import { createGatewayCaches } from './events/gateway-caches/gateway-caches.ts';
import { createFieldUsage, USAGE_PATH, usageListing } from './observability/usage-export.ts';
import { DEAD_LETTERS_PATH, deadLetterListing } from './events/receiving/dead-letter-listing.ts';
import { createTracingAndLogger } from './observability/tracing-and-logger.ts';
import { OperationCancellation } from './upstream/cancellation.ts';
import type { ResponseCache } from './upstream/response-cache.ts';
import type { KeyReload } from './upstream/key-source.ts';

/** Parts a caller may supply instead of the defaults built from the config. */
export interface AppDependencies {
  /** Default: JSON lines on stdout at `config.logLevel`, the configured key redacted. */
  logger?: Logger;
  /**
   * Default: `createSchema()`, the facade's federated subgraph schema, with a schema per contract of
   * `schema/contracts.json`. Given, it is every caller's, whatever contract its token names.
   */
  schema?: GraphQLSchema;
  /** Default: JSON lines on stdout with `"log":"audit"`, whatever `config.logLevel` says. */
  auditLogger?: Logger;
  /** Default: new metrics in a registry of this app's own. */
  metrics?: Metrics;
}

export interface App {
  readonly logger: Logger;
  /** Prometheus metrics (served on `/metrics`). */
  readonly metrics: Metrics;
  /** The upstream response cache (its counts, for tests and tools); undefined with `CACHE_ENABLED=false`. */
  readonly responseCache: ResponseCache | undefined;
  /**
   * Operations started and completed (HTTP), subscriptions started and completed (every live transport),
   * webhook events published: `app.lifecycle.on('subscriptionStarted', listener)`. See
   * src/observability/lifecycle.ts.
   */
  readonly lifecycle: Lifecycle;
  /**
   * Starts listening; resolves with the base URL (no path), the bound port, and the base URL of the
   * metrics server when `METRICS_PORT` gives it a port of its own.
   */
  listen(port?: number, host?: string): Promise<{ url: string; port: number; metricsUrl: string }>;
  /**
   * Reads the `TRUSTED_DOCUMENTS` manifest again (src/main.ts does on SIGHUP): a manifest that
   * parses replaces the old one at once; one that does not is logged and the old one stays. Answers
   * undefined when no manifest is configured. Never rejects.
   */
  reloadTrustedDocuments(): Promise<{ ok: true; size: number } | { ok: false; problem: string } | undefined>;
  /**
   * Reads `UPSTREAM_API_KEY_FILE` again (src/main.ts does on SIGHUP; a change in the file's
   * directory does too): a new key the upstream accepts is used from the next attempt of every
   * call; anything else keeps the current key and logs why. Answers `fixed` when the key came from
   * `UPSTREAM_API_KEY`. Never rejects.
   */
  reloadUpstreamKey(): Promise<KeyReload>;
  /** Stops accepting requests, lets in-flight ones finish, then closes upstream connections. */
  close(): Promise<void>;
}

/**
 * Largest GraphQL request body accepted, the same as a graphql-ws message: a document is cut at
 * QUERY_MAX_TOKENS anyway, and a larger body would cost more to receive and decode than any
 * ordinary operation (a larger one is answered 413 from its Content-Length, unread).
 */
const MAX_BODY = '64kb';

/** Builds the app (Apollo Server is started, nothing listens yet), each part from parts built before it. */
export async function createApp(config: Config, deps: AppDependencies = {}): Promise<App> {
  const parts = await createAppParts(config, deps);
  const { logger, lifecycle, observability, environments, edge, events, memoryRelease, answers } = parts;
  const app = express();
  app.disable('x-powered-by');
  const httpServer = http.createServer(serverTimeoutOptions(config.serverTimeouts), app);
  memoryRelease.watch(httpServer);
  const connections = watchHttpConnections(httpServer);
  // Aborted when the drain window of a shutdown has passed: every operation still waiting on the
  // upstream is cancelled and answers SHUTTING_DOWN instead of being cut by a reset.
  const shutdown = new AbortController();
  const transports = await createTransports(config, parts, httpServer, shutdown.signal);
  // The gauges read, at each scrape, the parts that hold their numbers: every one is built by now.
  observability.watch({
    live: () => transports.live.stats(),
    eventLog: () => events.logStats(),
    responseCache: () => environments.cacheStats(),
    answerCache: () => answers?.stats(),
    redisUnreachableSeconds: config.events.redis && (() => parts.redisReachability.unreachableSeconds()),
  });
  observability.serveOperatorRoute(
    DEAD_LETTERS_PATH,
    deadLetterListing({ list: (limit) => events.deadLetters.list(limit) }),
  );
  observability.serveOperatorRoute(USAGE_PATH, usageListing(parts.usage.reader, config.usage.days));
  let shuttingDown = false;
  mountRoutes(app, config, parts, { ...transports, isShuttingDown: () => shuttingDown });
  parts.hostAllowList.guardUpgrades(httpServer);

  let closing: Promise<void> | undefined;
  return {
    logger,
    metrics: observability.metrics,
    // The first environment's (the one with one key).
    responseCache: environments.all[0]!.client.cache,
    lifecycle,
    reloadTrustedDocuments: async () => edge.trustedDocuments?.reload(),
    reloadUpstreamKey: () => environments.reloadKeys(),
    async listen(port = config.port, host = config.host) {
      const listening = await listenOn(httpServer, port, host);
      const metricsUrl = await observability.listen(host);
      // The webhook endpoint is registered once the facade can receive deliveries.
      await events.start(listening.url);
      for (const stack of environments.all) stack.key.watch();
      memoryRelease.start();
      return { ...listening, metricsUrl };
    },
    close() {
      shuttingDown = true;
      closing ??= closeApp(config, parts, transports, { shutdown, connections });
      return closing;
    },
  };
}

/** What the app is made of besides HTTP: built in {@link createAppParts}. */
type AppParts = Awaited<ReturnType<typeof createAppParts>>;

/**
 * The parts that know nothing of routes, each from those before it: the explorer's build, tracing
 * and the logger, the Host allow-list, the lifecycle, metrics and the audit trail, the memory
 * release, the schema and its error formatting, the answer cache, the upstream environments with
 * their event pipelines, the gateways' caches they invalidate, and the door.
 */
async function createAppParts(config: Config, deps: AppDependencies) {
  // First: the explorer's build is made where missing or stale (a fresh clone), or refused where it
  // cannot be, before anything starts.
  if (config.explorer === 'graphiql') await prepareExplorer();
  const explorerRoutes = createExplorerRoutes(config.explorer);
  // Every key the facade has held is redacted from its own lines: a rotation adds the new one.
  // With a key per environment, `config.upstream.apiKey` is the first environment's: listed once.
  const environmentKeys = config.upstream.environmentKeys;
  const redactedKeys: string[] =
    environmentKeys === undefined
      ? [config.upstream.apiKey]
      : Object.values(environmentKeys).map((key) => key.apiKey);
  const { tracing, logger } = await createTracingAndLogger(config, deps.logger, redactedKeys);
  for (const warning of config.warnings) logger.warn(warning);
  // Refused before anything else, on every port and on WebSocket upgrades (DNS rebinding).
  const hostAllowList = createHostAllowList({
    listenHost: config.host,
    allowedHosts: config.allowedHosts,
    publicUrls: [config.events.webhooks.publicUrl],
  });
  // What tests and embedding code listen to (app.lifecycle); costs nothing while nobody does.
  const lifecycle = createLifecycle(logger.child({ component: 'lifecycle' }));
  // Metrics and the audit trail watch upstream calls, webhooks and subscriptions: src/observability/.
  const observability = createObservability({
    config: config.metrics,
    auditLogger:
      deps.auditLogger ?? createLogger({ level: 'info', redact: redactedKeys }).child({ log: 'audit' }),
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(tracing === undefined ? {} : { traceId: () => tracing.traceId() }),
    hostCheck: hostAllowList.middleware,
  });
  const { metrics } = observability;
  // One memory-reducing collection when the process turns idle after its memory grew: every
  // operation and delivery tells it that work ran (src/observability/memory-release.ts).
  const memoryRelease = createMemoryRelease({
    config: config.memoryRelease,
    logger: logger.child({ component: 'memory' }),
    onRelease: ({ rssBeforeBytes, rssAfterBytes }) => {
      metrics.memoryReleases.inc();
      metrics.memoryReleasedBytes.inc(Math.max(0, rssBeforeBytes - rssAfterBytes));
    },
  });
  metrics.memoryReleaseArmed.set(memoryRelease.armed ? 1 : 0);
  const schema = deps.schema ?? createSchema();
  // The schema each caller is served: its contract's (src/graph/audiences.ts).
  const audiences =
    deps.schema === undefined ? createAudiences(schema, config.contracts) : singleAudience(schema);
  const formatError = createFormatError({ includeStacktrace: config.nodeEnv === 'development' });
  // Whole answers of repeated HTTP queries, served while the response cache holds what they read.
  const cache = config.upstream.cache;
  const answers =
    cache?.enabled === true && cache.answersMaxBytes > 0
      ? createAnswerCache({ maxBytes: cache.answersMaxBytes })
      : undefined;
  // The key, upstream client and event pipeline of each environment (one with UPSTREAM_API_KEY).
  const environments = createEnvironmentStacks({
    config,
    logger,
    onKey: (apiKey) => {
      if (!redactedKeys.includes(apiKey)) redactedKeys.push(apiKey);
    },
    upstream: {
      observer: observability.upstreamObserver,
      ...(tracing === undefined ? {} : { tracer: tracing.upstreamTracer }),
    },
    events: {
      addressOf: (request) => clientAddress(request, config.edge.trustProxy),
      lifecycle,
      ...eventMetrics(metrics, memoryRelease),
      ...(tracing === undefined ? {} : { tracer: tracing.events }),
    },
  });
  // The gateways' response caches drop what each environment's cache drops (none configured: nothing).
  const gatewayCaches = createGatewayCaches({
    config: config.gatewayCaches,
    logger,
    observer: gatewayInvalidationObserver(metrics),
  });
  for (const { client, environment } of environments.all) {
    if (client.cache !== undefined) gatewayCaches?.follow(client.cache, environment);
  }
  // Which coordinates each client's operations use, per day, for the schema check against usage.
  const usage = createFieldUsage(config.usage, {
    redis: config.events.redis,
    redisKeyPrefix: config.events.redisKeyPrefix,
    contractOf: (caller) => audiences.of(caller)?.contract,
    logger,
  });
  // Every transport admits callers and operations through this door, and through nothing else.
  const edge = await createConfiguredDoor(config, {
    schema,
    audiences,
    keyEnvironments: environments.keyEnvironments,
    metrics,
    logger,
    onStep: (step) => {
      if (lifecycle.observed('admissionStep')) lifecycle.emit('admissionStep', { step });
    },
  });
  return {
    explorerRoutes,
    tracing,
    logger,
    hostAllowList,
    lifecycle,
    observability,
    memoryRelease,
    schema,
    audiences,
    usage,
    formatError,
    answers,
    environments,
    gatewayCaches,
    events: environments.events,
    edge,
    redisReachability: new RedisReachability(environments.events, config.readinessRedisGraceSeconds * 1000),
  };
}

/**
 * Stops the app: the memory release and the key watches, the live transports (webhooks stop, every
 * subscriber's queue ends), HTTP's drain within the window, then every connection and exporter.
 */
async function closeApp(
  config: Config,
  {
    memoryRelease,
    environments,
    gatewayCaches,
    events,
    edge,
    observability,
    tracing,
    logger,
    usage,
  }: AppParts,
  { live, apollo, mcp }: Transports,
  { shutdown, connections }: { shutdown: AbortController; connections: HttpConnections },
): Promise<void> {
  memoryRelease.close();
  for (const stack of environments.all) stack.key.close();
  const cutOff = setTimeout(
    () => shutdown.abort(new OperationCancellation('shutdown')),
    config.shutdownDrainMs,
  );
  // Meanwhile the kept-alive connections are released as their clients stop using them: each
  // answer closes its own, an idle one is closed once idle for `SHUTDOWN_IDLE_RELEASE_MS` (past
  // the advertised keep-alive time), never under a request its client may be sending.
  const released = connections.release(config.shutdownIdleReleaseMs, config.shutdownDrainMs);
  try {
    // Live transports first: webhooks stop, every subscriber's queue ends, the subscriptions
    // complete and the sockets close with 1001. The HTTP drain ends every socket without a
    // request in flight, upgraded ones included.
    await events.drain();
    await live.drain();
    await mcp?.close();
    await released;
    // Apollo's drain plugin closes the http.Server and waits for in-flight requests; those
    // still waiting on the upstream after the drain window answer SHUTTING_DOWN.
    await apollo.stop();
  } finally {
    clearTimeout(cutOff);
  }
  await events.close();
  await gatewayCaches?.close();
  // What the last operations used is stored before the connections close.
  await usage.close();
  await edge.close();
  await observability.close();
  await Promise.all(environments.all.map((stack) => stack.client.close()));
  // The last operations' spans leave before the process exits.
  await tracing?.flush().catch((error: unknown) => logger.warn('exporting traces failed', { error }));
}

/**
 * Mounts every route in its order: connections closed while shutting down, the Host allow-list and
 * frame protection, request ids, health and readiness, the explorer, CORS and JSON on `/graphql`,
 * the live transports over requests, HTTP's door and Apollo, the webhook route, then the answers
 * for unknown routes and errors.
 */
function mountRoutes(
  app: express.Express,
  config: Config,
  { hostAllowList, logger, events, explorerRoutes, environments, redisReachability }: AppParts,
  served: Pick<Transports, 'live' | 'graphQLOverHttp' | 'mcp'> & { isShuttingDown: () => boolean },
): void {
  app.use(closeConnectionsWhileShuttingDown(served.isShuttingDown));
  app.use(hostAllowList.middleware, frameProtection());
  app.use(assignRequestId());
  app.get('/healthz', handleHealth());
  // With one environment `/readyz` asks with its key (with a key per environment, each one below).
  const first = environments.all[0]!;
  app.get(
    '/readyz',
    handleReadiness({
      client: first.client,
      apiKey: first.key,
      logger,
      redis: redisReachability,
      isDraining: served.isShuttingDown,
      ...config.readiness,
      // With a key per environment, each environment's upstream is asked and reported.
      ...(environments.bindsEnvironments
        ? {
            environments: environments.all.flatMap(({ environment, client, key }) =>
              environment === undefined ? [] : [{ environment, client, apiKey: key }],
            ),
          }
        : {}),
    }),
  );
  app.use(explorerRoutes);
  app.use(
    '/graphql',
    cors({ origins: config.edge.corsOrigins, extraAllowedHeaders: config.edge.corsAllowedHeaders }),
    express.json({ limit: MAX_BODY }),
  );
  // Before HTTP's `/graphql`, whose prefix the request-based live transports share.
  app.use(served.live.routes);
  app.use('/graphql', served.graphQLOverHttp);
  if (served.mcp !== undefined) app.use(served.mcp.routes);
  const routes = express.Router();
  events.attach({ routes });
  app.use(routes);
  app.use(handleNotFound());
  app.use(handleHttpError(logger));
}
