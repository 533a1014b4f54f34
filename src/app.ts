/**
 * Builds the app without listening: express 5 and one http.Server, the door (src/edge/) with its
 * adapters mounted at `/graphql` (HTTP through Apollo Server, graphql-ws on the same port), the
 * webhook route, `/healthz` and `/readyz`. Parts are built elsewhere; no access rule is written
 * here. Tests build it in process; main.ts listens.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import express from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Config } from './config.ts';
import { createConfiguredDoor } from './edge/configured-door.ts';
import type { Connection } from './edge/door.ts';
import { attachGraphQLWebSocket, GRAPHQL_WS_TRANSPORT } from './edge/graphql-ws.ts';
import { connectionOf, createDoorPlugin, httpDoor } from './edge/http.ts';
import { createLiveConnections } from './edge/live-connections.ts';
import { createOperationRecorder } from './edge/operation-record.ts';
import { createFormatError } from './errors/format-error.ts';
import { createEventsRuntime } from './events/events-runtime.ts';
import { createGraphContext, type GraphContext } from './graph/context.ts';
import { createSchema } from './graph/schema.ts';
import { clientAddress } from './http/client-address.ts';
import { cors } from './http/cors.ts';
import { handleHttpError, handleNotFound } from './http/fallback.ts';
import { createGraphQLHandler } from './http/graphql-handler.ts';
import { handleHealth, handleReadiness } from './http/health.ts';
import { createJsonStatusPlugin } from './http/json-status-plugin.ts';
import { createNoStorePlugin } from './http/no-store-plugin.ts';
import { assignRequestId } from './http/request-id.ts';
import { createLogger, type Logger } from './logger.ts';
import { createLifecycle, type Lifecycle } from './observability/lifecycle.ts';
import { createLifecyclePlugin } from './observability/lifecycle-plugin.ts';
import type { Metrics } from './observability/metrics.ts';
import { createObservability } from './observability/observability.ts';
import { createOperationLoggingPlugin } from './observability/operation-logging-plugin.ts';
import { tracingStarted } from './observability/tracing-config.ts';
import { ANONYMOUS_SCOPE, scopeOf } from './upstream/access.ts';
import type { CallBudget } from './upstream/call-budget.ts';
import { createOperationSignal, OperationCancellation } from './upstream/cancellation.ts';
import { createUpstreamClient, type SharedReadCache } from './upstream/client.ts';
import { createUpstreamContext } from './upstream/context.ts';
import { createKeyEnvironments } from './upstream/key-environments.ts';

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

/** Who is calling and how an operation's context is built; see `createContext` in {@link createApp}. */
interface ContextInput {
  /** Who the door admitted (its caller undefined for an anonymous request). */
  connection: Pick<Connection, 'caller' | 'apiKey'>;
  /** The caller's request id; generated when absent or unusable. */
  requestId?: string | undefined;
  /** GET answers shared with operations that read alike (one event's subscribers); none when absent. */
  readCache?: SharedReadCache | undefined;
  /** The operation's call budget when the door set it already (live transports). */
  callBudget?: CallBudget | undefined;
}

export interface App {
  readonly logger: Logger;
  /** Prometheus metrics (served on `/metrics`). */
  readonly metrics: Metrics;
  /**
   * Operations started and completed (HTTP), subscriptions started and completed (graphql-ws),
   * webhook events published: `app.lifecycle.on('subscriptionStarted', listener)`. See
   * src/observability/lifecycle.ts.
   */
  readonly lifecycle: Lifecycle;
  /**
   * Starts listening; resolves with the base URL (no path), the bound port, and the base URL of the
   * metrics server when `METRICS_PORT` gives it a port of its own.
   */
  listen(port?: number, host?: string): Promise<{ url: string; port: number; metricsUrl?: string }>;
  /** Stops accepting requests, lets in-flight ones finish, then closes upstream connections. */
  close(): Promise<void>;
}

/**
 * Largest GraphQL request body accepted, the same as a graphql-ws message: a document is cut at
 * QUERY_MAX_TOKENS anyway, and a larger body would cost more to receive and decode than any
 * ordinary operation (a larger one is answered 413 from its Content-Length, unread).
 */
const MAX_BODY = '64kb';

/**
 * After the drain window, how long operations whose upstream calls were cancelled have to send
 * their `SHUTTING_DOWN` answer before the remaining connections are closed.
 */
const SHUTDOWN_ANSWER_GRACE_MS = 5_000;

/** Builds the app (Apollo Server is started, nothing listens yet). */
export async function createApp(config: Config, deps: AppDependencies = {}): Promise<App> {
  // Loaded only when tracing is on: with it off, nothing of OpenTelemetry is imported.
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
    deps.logger ??
    createLogger({
      level: config.logLevel,
      redact: [config.upstream.apiKey],
      ...(currentTrace === undefined ? {} : { current: currentTrace }),
    });
  if (config.tracing.enabled && !tracingStarted()) {
    logger.warn(
      'tracing is configured but the OpenTelemetry SDK was not started: start with `npm start` or ' +
        '`node --import ./src/observability/tracing-entry.ts src/main.ts`',
    );
  }
  // What tests and embedding code listen to (app.lifecycle); costs nothing while nobody does.
  const lifecycle = createLifecycle(logger.child({ component: 'lifecycle' }));
  // Metrics and the audit trail watch upstream calls, webhooks and subscriptions: src/observability/.
  const observability = createObservability({
    config: config.metrics,
    configuredApiKey: config.upstream.apiKey,
    auditLogger:
      deps.auditLogger ??
      createLogger({ level: 'info', redact: [config.upstream.apiKey] }).child({ log: 'audit' }),
    ...(deps.metrics === undefined ? {} : { metrics: deps.metrics }),
    ...(tracing === undefined ? {} : { traceId: () => tracing.traceId() }),
    live: () => ({
      connections: websocket.activeConnections(),
      subscriptions: live.running(),
    }),
  });
  const { metrics } = observability;
  const upstreamClient = createUpstreamClient({
    ...config.upstream,
    logger,
    observer: observability.upstreamObserver,
    ...(tracing === undefined ? {} : { tracer: tracing.upstreamTracer }),
  });
  const schema = deps.schema ?? createSchema();
  const development = config.nodeEnv === 'development';
  const formatError = createFormatError({ includeStacktrace: development });
  const keyEnvironments = createKeyEnvironments(upstreamClient, config.upstream.apiKey);
  // Every transport admits callers and operations through this door, and through nothing else.
  const edge = await createConfiguredDoor(config, { schema, keyEnvironments, metrics, logger });
  const { door } = edge;
  const events = createEventsRuntime({
    config: config.events,
    defaultApiKey: config.upstream.apiKey,
    upstreamClient,
    logger,
    onWebhookDelivery: (outcome) => metrics.webhookDeliveries.inc({ outcome }),
    lifecycle,
    liveObserver: {
      delivered: (event) =>
        metrics.eventDeliveryLatency.observe(Math.max(0, (Date.now() - Date.parse(event.occurredAt)) / 1000)),
      overflowed: () => metrics.subscriberQueueOverflows.inc(),
    },
    ...(tracing === undefined ? {} : { tracer: tracing.events }),
  });

  const app = express();
  app.disable('x-powered-by');
  const httpServer = http.createServer(app);
  // Aborted when the drain window of a shutdown has passed: every operation still waiting on the
  // upstream is cancelled and answers SHUTTING_DOWN instead of being cut by a reset.
  const shutdown = new AbortController();
  const apollo = new ApolloServer<GraphContext>({
    schema,
    logger: toApolloLogger(logger.child({ component: 'apollo' })),
    // Every request that reaches Apollo has a caller, or is anonymous-safe (the HTTP door).
    introspection: config.introspection !== 'off',
    // "Did you mean …" describes the schema: not to callers who may not introspect.
    hideSchemaDetailsFromClientErrors: config.introspection === 'off',
    // A GET (or simple POST) must carry a header no browser form can send.
    csrfPrevention: true,
    // The process owns SIGINT/SIGTERM (src/main.ts): Apollo's own handler would stop the server
    // under our ordered shutdown and re-raise the signal, so the process would die before exit 0.
    stopOnTerminationSignals: false,
    // Apollo parses and validates HTTP operations itself (keeping parsed documents), with the door's
    // token limit and rules; the door's plugin runs the rest of its checks.
    validationRules: [...door.validationRules],
    parseOptions: door.parseOptions,
    includeStacktraceInErrorResponses: development,
    formatError,
    plugins: [
      ApolloServerPluginDrainHttpServer({
        httpServer,
        stopGracePeriodMillis: config.shutdownDrainMs + SHUTDOWN_ANSWER_GRACE_MS,
      }),
      ApolloServerPluginInlineTraceDisabled(),
      // No @cacheControl in the schema: every response is `no-store`, set without a per-field hook.
      ApolloServerPluginCacheControlDisabled(),
      createNoStorePlugin(),
      config.landingPage
        ? ApolloServerPluginLandingPageLocalDefault({ embed: { runTelemetry: false }, includeCookies: false })
        : ApolloServerPluginLandingPageDisabled(),
      createDoorPlugin(door),
      createJsonStatusPlugin<GraphContext>(),
      createOperationLoggingPlugin<GraphContext>(logger),
      createLifecyclePlugin<GraphContext>(lifecycle),
      ...observability.plugins,
      events.apolloPlugin,
    ],
  });
  await apollo.start();

  const createContext = ({
    connection: { caller, apiKey },
    requestId,
    readCache,
    callBudget,
  }: ContextInput) =>
    createGraphContext(
      createUpstreamContext(upstreamClient, {
        apiKey: apiKey ?? config.upstream.apiKey,
        scope: caller === undefined ? ANONYMOUS_SCOPE : scopeOf(caller),
        // The open facade (AUTH_MODE=none) has no one to name: its writes are the configured key's.
        actor:
          caller === undefined || caller.via === 'open'
            ? undefined
            : { subject: caller.subject, client: caller.clientId ?? null },
        requestId,
        signal: createOperationSignal(config.operationTimeoutMs, shutdown.signal),
        // Callers share the upstream key's Idempotency-Keys: each caller's are its own.
        idempotencyOwner: caller?.subject,
        readCache,
        callBudget,
      }),
      caller,
    );
  const addressOf = (req: http.IncomingMessage): string => clientAddress(req, config.edge.trustProxy);

  const routes = express.Router();
  app.use(assignRequestId());
  app.get('/healthz', handleHealth());
  app.get(
    '/readyz',
    handleReadiness({
      client: upstreamClient,
      apiKey: config.upstream.apiKey,
      logger,
      checkRedis: () => events.checkRedis(),
    }),
  );
  observability.mount(app);
  app.use(
    '/graphql',
    cors({ origins: config.edge.corsOrigins }),
    express.json({ limit: MAX_BODY }),
    httpDoor({ door, addressOf, landingPage: config.landingPage }),
    createGraphQLHandler(apollo, {
      context: async ({ res }) =>
        createContext({ connection: connectionOf(res), requestId: res.locals.requestId as string }),
    }),
  );
  const live = createLiveConnections(GRAPHQL_WS_TRANSPORT, {
    door,
    schema,
    live: events.live,
    record: createOperationRecorder({ logger, metrics, lifecycle }),
    createContext,
  });
  const websocket = attachGraphQLWebSocket({
    httpServer,
    schema,
    door,
    connections: live,
    limits: config.events.webSocket,
    addressOf,
    formatError,
    logger,
  });
  events.attach({ routes });
  app.use(routes);
  app.use(handleNotFound());
  app.use(handleHttpError(logger));

  let closing: Promise<void> | undefined;
  return {
    logger,
    metrics,
    lifecycle,
    listen(port = config.port, host = config.host) {
      return new Promise<{ url: string; port: number }>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, host, () => {
          httpServer.off('error', reject);
          const bound = (httpServer.address() as AddressInfo).port;
          resolve({ url: `http://${formatHost(host)}:${bound}`, port: bound });
        });
      }).then(async (listening) => {
        const metricsUrl = await observability.listen(host);
        // The webhook endpoint is registered once the facade can receive deliveries.
        await events.start(listening.url);
        return metricsUrl === undefined ? listening : { ...listening, metricsUrl };
      });
    },
    close() {
      closing ??= (async () => {
        const cutOff = setTimeout(
          () => shutdown.abort(new OperationCancellation('shutdown')),
          config.shutdownDrainMs,
        );
        try {
          // Live transports first: webhooks stop, every subscriber's queue ends, the subscriptions
          // complete and the sockets close with 1001. The HTTP drain ends every socket without a
          // request in flight, upgraded ones included.
          await events.drain();
          await websocket.drain();
          // Apollo's drain plugin closes the http.Server and waits for in-flight requests; those
          // still waiting on the upstream after the drain window answer SHUTTING_DOWN.
          await apollo.stop();
        } finally {
          clearTimeout(cutOff);
        }
        await events.close();
        await edge.close();
        await observability.close();
        await upstreamClient.close();
        // The last operations' spans leave before the process exits.
        await tracing?.flush().catch((error: unknown) => logger.warn('exporting traces failed', { error }));
      })();
      return closing;
    },
  };
}

function formatHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return 'localhost';
  return host.includes(':') ? `[${host}]` : host;
}

/** Apollo Server's logger interface over ours: its messages become JSON lines too. */
function toApolloLogger(logger: Logger): ConstructorParameters<typeof ApolloServer>[0]['logger'] {
  const join = (args: unknown[]): string =>
    args.map((arg) => (arg instanceof Error ? arg.message : String(arg))).join(' ');
  return {
    debug: (...args: unknown[]) => logger.debug(join(args)),
    info: (...args: unknown[]) => logger.info(join(args)),
    warn: (...args: unknown[]) => logger.warn(join(args)),
    error: (...args: unknown[]) => logger.error(join(args)),
  };
}
