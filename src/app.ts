/**
 * Builds the app without listening: express 5 and one http.Server, the door (src/edge/) with its
 * adapters mounted at `/graphql` (HTTP through Apollo Server, graphql-ws on the same port), the
 * webhook route, `/healthz` and `/readyz`. Parts are built elsewhere; no access rule is written
 * here. Tests build it in process; main.ts listens.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Config } from './config.ts';
import { createConfiguredDoor } from './edge/configured-door.ts';
import { graphQLWebSocket } from './edge/graphql-ws.ts';
import { httpTransport, type HttpExecutor } from './edge/http.ts';
import { createLiveWing, type LiveWing } from './edge/live.ts';
import { multipartSubscriptions } from './edge/multipart.ts';
import { createOperationRecorder, type OperationRecorder } from './observability/operation-record.ts';
import { serverSentEvents } from './edge/sse.ts';
import { createFormatError } from './errors/format-error.ts';
import { cursorOf, subscribeWithEventContexts } from './events/delivery/execute-live-event.ts';
import type { EventsRuntimeOptions } from './events/events-runtime.ts';
import { createEnvironmentStacks } from './environments.ts';
import { createOperationContexts } from './graph/operation-context.ts';
import { createSchema } from './graph/schema.ts';
import { createAnswerCache } from './graph/answer-cache.ts';
import { createAdmittedOperations } from './http/admitted-operation.ts';
import { createApolloServer } from './http/apollo-server.ts';
import { createPersistedQueries, type PersistedQueries } from './http/persisted-queries.ts';
import { clientAddress } from './http/client-address.ts';
import { cors } from './http/cors.ts';
import { createExplorerRoutes, prepareExplorer } from './http/explorer.ts';
import { handleHttpError, handleNotFound } from './http/fallback.ts';
import { createGraphQLHandler } from './http/graphql-handler.ts';
import { handleHealth, handleReadiness } from './http/health.ts';
import { frameProtection } from './http/frame-protection.ts';
import { createHostAllowList } from './http/host-allow-list.ts';
import { serverTimeoutOptions } from './http/server-timeouts.ts';
import { assignRequestId } from './http/request-id.ts';
import { createLogger, type Logger } from './logger.ts';
import { createLifecycle, type Lifecycle } from './observability/lifecycle.ts';
import { createMemoryRelease, type MemoryRelease } from './observability/memory-release.ts';
import type { LiveTransportNumbers, Metrics } from './observability/metrics.ts';
import { createObservability } from './observability/observability.ts';
import { tracingStarted } from './observability/tracing-config.ts';
import { OperationCancellation } from './upstream/cancellation.ts';
import type { ResponseCache } from './upstream/response-cache.ts';
import type { KeyReload } from './upstream/key-source.ts';

/** Parts a caller may supply instead of the defaults built from the config. */
export interface AppDependencies {
  /** Default: JSON lines on stdout at `config.logLevel`, the configured key redacted. */
  logger?: Logger;
  /** Default: `createSchema()`, the facade's federated subgraph schema. */
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

/** Builds the app (Apollo Server is started, nothing listens yet). */
export async function createApp(config: Config, deps: AppDependencies = {}): Promise<App> {
  // The gauges read the live wing at each scrape, once it is built below.
  const parts = await createAppParts(config, deps, () => live.stats());
  const { logger, lifecycle, observability, environments, edge, events, tracing } = parts;
  const { memoryRelease } = parts;
  const { metrics } = observability;
  const { door } = edge;

  const app = express();
  app.disable('x-powered-by');
  const httpServer = http.createServer(serverTimeoutOptions(config.serverTimeouts), app);
  memoryRelease.watch(httpServer);
  // Aborted when the drain window of a shutdown has passed: every operation still waiting on the
  // upstream is cancelled and answers SHUTTING_DOWN instead of being cut by a reset.
  const shutdown = new AbortController();
  // One recorder for every transport: each operation's `graphql operation` line, metrics and lifecycle.
  const record = touchingOnEachOperation(
    createOperationRecorder({
      logger,
      metrics,
      lifecycle,
      bindsEnvironments: environments.bindsEnvironments,
    }),
    memoryRelease,
  );
  // The door's admission of each HTTP request, handed to Apollo's hooks; Apollo's persisted
  // queries, which the door reads too.
  const admitted = createAdmittedOperations();
  const persistedQueries = createPersistedQueries();
  const apollo = await createApolloServer({
    config,
    schema: parts.schema,
    httpServer,
    door,
    admitted,
    persistedQueries,
    logger,
    record,
    isTrustedDocument: (query) => edge.trustedDocuments?.isTrustedBody(query) === true,
    formatError: parts.formatError,
    answers: parts.answers,
    plugins: [...observability.plugins, events.apolloPlugin],
  });
  const createContext = createOperationContexts({
    upstreamOf: (environment) => environments.of(environment),
    bindsEnvironments: environments.bindsEnvironments,
    operationTimeoutMs: config.operationTimeoutMs,
    shutdown: shutdown.signal,
  });
  const addressOf = (req: http.IncomingMessage): string => clientAddress(req, config.edge.trustProxy);
  // Every live transport, one kind: graphql-ws upgrades `/graphql`, SSE streams `/graphql/stream`,
  // and a request to `/graphql` whose Accept asks for multipart subscriptions is streamed there.
  const live = createLiveWing({
    transports: [
      graphQLWebSocket({
        ...config.events.webSocket,
        stalledWriteTimeoutMs: config.events.stalledWriteTimeoutMs,
      }),
      serverSentEvents({ stalledWriteTimeoutMs: config.events.stalledWriteTimeoutMs }),
      multipartSubscriptions({ stalledWriteTimeoutMs: config.events.stalledWriteTimeoutMs }),
    ],
    door,
    schema: parts.schema,
    execute: subscribeWithEventContexts,
    cursorOf,
    live: events.live,
    record,
    createContext,
    httpServer,
    addressOf,
    formatError: parts.formatError,
    logger,
  });
  let shuttingDown = false;
  mountRoutes(app, config, parts, {
    live,
    persistedQueries,
    graphQLHandler: createGraphQLHandler(apollo, {
      admit: admitted.admit,
      context: async ({ req, res, admission }) =>
        createContext({
          connection: admission.connection,
          requestId: res.locals.requestId as string,
          facadeRequestId: res.locals.facadeRequestId as string,
          callerRequestId: res.locals.callerRequestId as string | undefined,
          // `Cache-Control: no-cache` on the request: this operation reads through the response cache.
          readThrough: /(?:^|[\s,])no-cache(?:$|[\s,=])/i.test(req.headers['cache-control'] ?? ''),
          recordAnswerSources: parts.answers !== undefined,
        }),
    }),
    addressOf,
    isShuttingDown: () => shuttingDown,
  });
  parts.hostAllowList.guardUpgrades(httpServer);

  let closing: Promise<void> | undefined;
  return {
    logger,
    metrics,
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
      closing ??= (async () => {
        shuttingDown = true;
        memoryRelease.close();
        for (const stack of environments.all) stack.key.close();
        const cutOff = setTimeout(
          () => shutdown.abort(new OperationCancellation('shutdown')),
          config.shutdownDrainMs,
        );
        try {
          // Live transports first: webhooks stop, every subscriber's queue ends, the subscriptions
          // complete and the sockets close with 1001. The HTTP drain ends every socket without a
          // request in flight, upgraded ones included.
          await events.drain();
          await live.drain();
          // Apollo's drain plugin closes the http.Server and waits for in-flight requests; those
          // still waiting on the upstream after the drain window answer SHUTTING_DOWN.
          await apollo.stop();
        } finally {
          clearTimeout(cutOff);
        }
        await events.close();
        await edge.close();
        await observability.close();
        await Promise.all(environments.all.map((stack) => stack.client.close()));
        // The last operations' spans leave before the process exits.
        await tracing?.flush().catch((error: unknown) => logger.warn('exporting traces failed', { error }));
      })();
      return closing;
    },
  };
}

/** What the app is made of besides HTTP: built in {@link createAppParts}. */
type AppParts = Awaited<ReturnType<typeof createAppParts>>;

/**
 * The parts that know nothing of routes: tracing and the logger, the Host allow-list, the
 * lifecycle, metrics and the audit trail, the upstream client and the facade's own key, the schema
 * and its error formatting, the door, and the events runtime. `liveStats` is read at each scrape.
 */
async function createAppParts(
  config: Config,
  deps: AppDependencies,
  liveStats: () => readonly LiveTransportNumbers[],
) {
  // First: the explorer's build is made where missing or stale (a fresh clone), or refused where it
  // cannot be, before anything starts.
  if (config.explorer === 'graphiql') await prepareExplorer();
  const explorerRoutes = createExplorerRoutes(config.explorer);
  // Whole answers of repeated HTTP queries, served while the response cache holds what they read.
  const cache = config.upstream.cache;
  const answers =
    cache?.enabled === true && cache.answersMaxBytes > 0
      ? createAnswerCache({ maxBytes: cache.answersMaxBytes })
      : undefined;
  // Every key the facade has held is redacted from its own lines: a rotation adds the new one.
  // With a key per environment, `config.upstream.apiKey` is the first environment's: listed once.
  const environmentKeys = config.upstream.environmentKeys;
  const redactedKeys: string[] =
    environmentKeys === undefined
      ? [config.upstream.apiKey]
      : Object.values(environmentKeys).map((key) => key.apiKey);
  const { tracing, logger } = await createTracingAndLogger(config, deps.logger, redactedKeys);
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
    live: liveStats,
    eventLog: () => events.logStats(),
    hostCheck: hostAllowList.middleware,
    responseCache: () => environments.cacheStats(),
    answerCache: () => answers?.stats(),
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
  const formatError = createFormatError({ includeStacktrace: config.nodeEnv === 'development' });
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
  // Every transport admits callers and operations through this door, and through nothing else.
  const edge = await createConfiguredDoor(config, {
    schema,
    keyEnvironments: environments.keyEnvironments,
    metrics,
    logger,
    onStep: (step) => {
      if (lifecycle.observed('admissionStep')) lifecycle.emit('admissionStep', { step });
    },
  });
  const events = environments.events;
  return {
    explorerRoutes,
    tracing,
    logger,
    hostAllowList,
    lifecycle,
    observability,
    schema,
    formatError,
    environments,
    edge,
    events,
    answers,
    memoryRelease,
  };
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
  { hostAllowList, logger, events, explorerRoutes, edge, environments }: AppParts,
  served: {
    live: LiveWing;
    persistedQueries: PersistedQueries;
    graphQLHandler: HttpExecutor;
    addressOf: (req: express.Request) => string;
    isShuttingDown: () => boolean;
  },
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
      checkRedis: () => events.checkRedis(),
      cacheMs: config.readinessCacheMs,
      // With a key per environment, ready only when every environment's upstream takes its key.
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
  app.use(
    '/graphql',
    httpTransport({
      door: edge.door,
      execute: served.graphQLHandler,
      addressOf: served.addressOf,
      landingPage: config.landingPage,
      persistedQuery: served.persistedQueries.textOf,
    }),
  );
  const routes = express.Router();
  events.attach({ routes });
  app.use(routes);
  app.use(handleNotFound());
  app.use(handleHttpError(logger));
}

/**
 * From the start of a shutdown every answer closes its connection: a client's kept-alive
 * connection (a gateway's, a load balancer's, a browser's) ends cleanly after a response instead
 * of being cut when the server closes it, so the client's next request opens one to a replica that
 * stays. Answers begun before (an SSE stream the drain completes) end their connection too.
 */
function closeConnectionsWhileShuttingDown(isShuttingDown: () => boolean): express.RequestHandler {
  return (req, res, next) => {
    if (isShuttingDown()) res.setHeader('Connection', 'close');
    else
      res.once('finish', () => {
        if (isShuttingDown()) req.socket.end();
      });
    next();
  };
}

/**
 * What the events runtime tells the metrics: deliveries, latencies, overflows, replays,
 * reconciliations; each delivery is work for the memory release.
 */
function eventMetrics(
  metrics: Metrics,
  memoryRelease: MemoryRelease,
): Pick<EventsRuntimeOptions, 'onWebhookDelivery' | 'liveObserver' | 'onReconciled' | 'onReconcileFailed'> {
  return {
    // A pipeline has an environment only with a key per environment: one environment's series unchanged.
    onWebhookDelivery: (outcome, environment) =>
      metrics.webhookDeliveries.inc({ outcome, ...(environment === undefined ? {} : { environment }) }),
    liveObserver: {
      // Streams opening, deliveries and live queries' executions are waited on: no memory release under them.
      ...(memoryRelease.armed ? { working: () => memoryRelease.working() } : {}),
      delivered: (event) => {
        memoryRelease.touch();
        metrics.eventDeliveryLatency.observe(Math.max(0, (Date.now() - Date.parse(event.occurredAt)) / 1000));
      },
      overflowed: () => metrics.subscriberQueueOverflows.inc(),
      replayed: () => metrics.eventsReplayed.inc(),
    },
    onReconciled: (count) => metrics.eventsReconciled.inc(count),
    onReconcileFailed: () => metrics.eventsReconcileFailures.inc(),
  };
}

/**
 * `recorder`, telling `memoryRelease` of every operation started or ended on every transport; the
 * recorder itself when the release cannot run.
 */
function touchingOnEachOperation(
  recorder: OperationRecorder,
  memoryRelease: MemoryRelease,
): OperationRecorder {
  if (!memoryRelease.armed) return recorder;
  return {
    httpStarted(requestId, operationName) {
      memoryRelease.touch();
      recorder.httpStarted(requestId, operationName);
    },
    httpCompleted(operation) {
      memoryRelease.touch();
      recorder.httpCompleted(operation);
    },
    started(operation) {
      memoryRelease.touch();
      recorder.started(operation);
    },
    completed(operation, errorCodes, startedAt, listened) {
      memoryRelease.touch();
      recorder.completed(operation, errorCodes, startedAt, listened);
    },
  };
}

/**
 * Tracing (loaded only when it is on: with it off, nothing of OpenTelemetry is imported) and the
 * logger, whose lines carry the current trace id when tracing is on.
 */
async function createTracingAndLogger(config: Config, given: Logger | undefined, redact: readonly string[]) {
  const tracing = config.tracing.enabled
    ? (await import('./observability/tracing.ts')).createTracing()
    : undefined;
  const currentTrace =
    tracing === undefined
      ? undefined
      : () => {
          const traceId = tracing.traceId();
          return traceId === undefined ? undefined : { traceId };
        };
  const logger =
    given ??
    createLogger({
      level: config.logLevel,
      redact,
      ...(currentTrace === undefined ? {} : { current: currentTrace }),
    });
  if (config.tracing.enabled && !tracingStarted()) {
    logger.warn(
      'tracing is configured but the OpenTelemetry SDK was not started: start with `npm start` or ' +
        '`node --import ./src/observability/tracing-entry.ts src/main.ts`',
    );
  }
  return { tracing, logger };
}

/** Listens on `port` and `host`; resolves with the base URL (no path) and the bound port. */
function listenOn(
  httpServer: http.Server,
  port: number,
  host: string,
): Promise<{ url: string; port: number }> {
  return new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(port, host, () => {
      httpServer.off('error', reject);
      const bound = (httpServer.address() as AddressInfo).port;
      resolve({ url: `http://${formatHost(host)}:${bound}`, port: bound });
    });
  });
}

function formatHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}
