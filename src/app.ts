/**
 * Builds the HTTP app without listening: express 5, one http.Server, Apollo Server at `/graphql`
 * (POST and GET, Apollo Sandbox for browsers), `/healthz` and `/readyz`. Tests build it in process;
 * main.ts listens. graphql-ws and the webhook route attach to the same server and router.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import express, { type Express, type Router } from 'express';
import type { Redis } from 'ioredis';
import type { GraphQLSchema } from 'graphql';
import type { Caller } from './auth/caller.ts';
import { createAuthenticator, type Authenticator } from './auth/authenticate.ts';
import { authenticateHttp, type AuthenticatedLocals } from './auth/http-authentication.ts';
import {
  createRateLimits,
  rateLimitedError,
  rateLimitedUpgrade,
  rateLimitRequests,
  sendRateLimited,
  type RateKey,
} from './auth/rate-limits.ts';
import { createTokenVerifier } from './auth/token-verifier.ts';
import { createVerifyClient } from './auth/websocket-origin.ts';
import {
  loadTrustedDocuments,
  notInTrustedDocumentsError,
  resolveTrustedDocument,
  trustedDocumentsMiddleware,
} from './graph/trusted-documents.ts';
import { openRedisConnection } from './events/fan-out/redis-connection.ts';
import { clientAddress } from './http/client-address.ts';
import { cors } from './http/cors.ts';
import type { Config } from './config.ts';
import { createFormatError } from './errors/format-error.ts';
import { createEventsRuntime } from './events/events-runtime.ts';
import { createGraphContext, type GraphContext } from './graph/context.ts';
import { createOperationLimitsPlugin } from './graph/operation-limits-plugin.ts';
import { createQueryLimitsRules } from './graph/query-limits.ts';
import { createSchema } from './graph/schema.ts';
import { handleHttpError, handleNotFound } from './http/fallback.ts';
import { createGraphQLHandler } from './http/graphql-handler.ts';
import { handleHealth, handleReadiness } from './http/health.ts';
import { createJsonStatusPlugin } from './http/json-status-plugin.ts';
import { createNoStorePlugin } from './http/no-store-plugin.ts';
import { assignRequestId } from './http/request-id.ts';
import { createLogger, type Logger } from './logger.ts';
import type { Metrics } from './observability/metrics.ts';
import { createLifecycle, type Lifecycle } from './observability/lifecycle.ts';
import { createLifecyclePlugin } from './observability/lifecycle-plugin.ts';
import { createObservability } from './observability/observability.ts';
import { createOperationLoggingPlugin } from './observability/operation-logging-plugin.ts';
import { tracingStarted } from './observability/tracing-config.ts';
import { createOperationSignal, OperationCancellation } from './upstream/cancellation.ts';
import { createUpstreamClient, type SharedReadCache, type UpstreamClient } from './upstream/client.ts';
import { ANONYMOUS_SCOPE, scopeOf } from './upstream/access.ts';
import { createUpstreamContext } from './upstream/context.ts';
import { createKeyEnvironments, type KeyEnvironments } from './upstream/key-environments.ts';

/** Parts a caller may supply instead of the defaults built from the config. */
export interface AppDependencies {
  /** Default: JSON lines on stdout at `config.logLevel`, the configured key redacted. */
  logger?: Logger;
  /** Default: an undici client built from `config.upstream`. Closed by `close()` either way. */
  upstreamClient?: UpstreamClient;
  /** Default: `createSchema()`, the facade's federated subgraph schema. */
  schema?: GraphQLSchema;
  /** Extra Apollo Server plugins (e.g. draining a WebSocket server on shutdown). */
  plugins?: ApolloServerPlugin<GraphContext>[];
  /**
   * Default: JSON lines on stdout with `"log":"audit"`, whatever `config.logLevel` says. An
   * `upstreamClient` given here is not watched: its writes are neither audited nor measured.
   */
  auditLogger?: Logger;
  /** Default: new metrics in a registry of this app's own. */
  metrics?: Metrics;
}

/** Who is calling and under which request id; see {@link App.createContext}. */
export interface ContextInput {
  /** The authenticated caller; undefined for an anonymous request, which may reach no upstream data. */
  caller: Caller | undefined;
  /** The caller's own upstream key (AUTH_ALLOW_CALLER_API_KEY); the configured key when absent. */
  apiKey?: string | undefined;
  /** The caller's request id; generated when absent or unusable. */
  requestId?: string | undefined;
  /** GET answers shared with operations that read alike (one event's subscribers); none when absent. */
  readCache?: SharedReadCache | undefined;
  /** Ask the upstream rather than the response cache (the request's `Cache-Control: no-cache`). */
  readThrough?: boolean | undefined;
}

export interface App {
  readonly express: Express;
  /** Extra HTTP routes go here: they run before the 404 fallback (e.g. the webhook receiver). */
  readonly routes: Router;
  readonly httpServer: http.Server;
  readonly apollo: ApolloServer<GraphContext>;
  readonly schema: GraphQLSchema;
  readonly upstreamClient: UpstreamClient;
  readonly logger: Logger;
  /** Prometheus metrics (served on `/metrics`); e.g. `metrics.rateLimitRefusals.inc({ bucket })`. */
  readonly metrics: Metrics;
  /**
   * Operations started and completed (HTTP), graphql-ws operations started and completed, webhook
   * events published: `app.lifecycle.on('subscriptionStarted', listener)`. See
   * src/observability/lifecycle.ts.
   */
  readonly lifecycle: Lifecycle;
  /** Builds an operation's context the way `/graphql` does (for graphql-ws and webhook reads). */
  createContext(input: ContextInput): GraphContext;
  /** Runs `hook` during `close()`, after HTTP has drained and before upstream connections close. */
  onClose(hook: () => void | Promise<void>): void;
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
    live: () => events.liveCounts(),
    responseCache: () => upstreamClient.cache?.stats(),
  });
  const { metrics } = observability;
  const upstreamClient =
    deps.upstreamClient ??
    createUpstreamClient({
      ...config.upstream,
      logger,
      observer: observability.upstreamObserver,
      ...(tracing === undefined ? {} : { tracer: tracing.upstreamTracer }),
    });
  const schema = deps.schema ?? createSchema();
  const development = config.nodeEnv === 'development';
  const formatError = createFormatError({ includeStacktrace: development });
  const keyEnvironments = createKeyEnvironments(upstreamClient, config.upstream.apiKey);
  const authenticator = createAppAuthenticator(config, keyEnvironments, logger);
  // Rate limits are shared by every replica through Redis when there is one.
  const rateLimitRedis =
    config.events.redisUrl !== undefined && config.edge.rateLimits.enabled
      ? openRedisConnection(config.events.redisUrl, 'rate-limits', logger)
      : undefined;
  // Counting starts shared: until the connection is ready each replica would count alone.
  if (rateLimitRedis !== undefined) await whenReady(rateLimitRedis, REDIS_READY_WAIT_MS);
  const rateLimits = createRateLimits({
    config: config.edge.rateLimits,
    ...(rateLimitRedis === undefined ? {} : { redis: rateLimitRedis }),
    keyPrefix: config.events.redisKeyPrefix,
    logger,
  });
  // With a manifest, callers other than operators run only the operations listed in it.
  const trustedDocuments =
    config.edge.trustedDocumentsPath === undefined
      ? undefined
      : await loadTrustedDocuments(config.edge.trustedDocumentsPath);
  const addressOf = (req: http.IncomingMessage): RateKey =>
    `ip:${clientAddress(req, config.edge.trustProxy)}`;
  const failedAuthLimiter = async (req: http.IncomingMessage) => {
    const decision = await rateLimits.consume('failed-auth', addressOf(req));
    return decision.allowed ? undefined : { retryAfterSeconds: decision.retryAfterSeconds };
  };
  // Webhook route, pub/sub and graphql-ws: src/events/. Drained by its Apollo plugin on close.
  const events = createEventsRuntime({
    config: config.events,
    defaultApiKey: config.upstream.apiKey,
    keyEnvironments,
    authenticate: (credentials) => authenticator.authenticate(credentials),
    failedAuthLimiter,
    admitSubscription: async (caller, payload) => {
      const decision = await rateLimits.consume('subscribe', `sub:${caller.subject}`);
      if (!decision.allowed) return rateLimitedError(decision.retryAfterSeconds);
      if (trustedDocuments === undefined || caller.operator) return undefined;
      const resolution = resolveTrustedDocument(trustedDocuments, payload);
      if (!resolution.ok) return notInTrustedDocumentsError();
      // A listed id runs its stored body: graphql-ws parses the payload after this hook.
      payload.query = resolution.query;
      return undefined;
    },
    ...(config.edge.rateLimits.enabled
      ? { maxOperationsPerCaller: config.edge.rateLimits.subscriptions }
      : {}),
    verifyClient: createVerifyClient({
      allowedOrigins: config.edge.corsOrigins,
      async admit(request) {
        // As over HTTP: an address that has failed too often is refused before its credentials
        // (a guessed key would cost an upstream check, and its answer would tell).
        const blocked = await rateLimits.check('failed-auth', addressOf(request));
        if (!blocked.allowed) return rateLimitedUpgrade(blocked.retryAfterSeconds);
        const decision = await rateLimits.consume('ws-connect', addressOf(request));
        return decision.allowed ? undefined : rateLimitedUpgrade(decision.retryAfterSeconds);
      },
    }),
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

  // The same limits over HTTP and graphql-ws: a subscription's selection runs on every event.
  const validationRules = createQueryLimitsRules(config.queryLimits);
  // Aborted when the drain window of a shutdown has passed: every operation still waiting on the
  // upstream is cancelled and answers SHUTTING_DOWN instead of being cut by a reset.
  const shutdown = new AbortController();
  const apollo = new ApolloServer<GraphContext>({
    schema,
    logger: toApolloLogger(logger.child({ component: 'apollo' })),
    // Every request that reaches Apollo has a caller, or is anonymous-safe (authenticateHttp).
    introspection: config.introspection !== 'off',
    // "Did you mean …" describes the schema: not to callers who may not introspect.
    hideSchemaDetailsFromClientErrors: config.introspection === 'off',
    // Apollo's default: a GET (or simple POST) must carry a header no browser form can send
    // (`apollo-require-preflight`, `x-apollo-operation-name`, or a JSON content type).
    csrfPrevention: true,
    // The process owns SIGINT/SIGTERM (src/main.ts): Apollo's own handler would stop the server
    // under our ordered shutdown and re-raise the signal, so the process would die before exit 0.
    stopOnTerminationSignals: false,
    validationRules,
    // The parser stops at this many tokens (GRAPHQL_PARSE_FAILED), long before a nested document
    // could reach its recursion limit.
    parseOptions: { maxTokens: config.queryLimits.maxTokens },
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
      createOperationLimitsPlugin({ maxCost: config.queryLimits.maxCost }),
      createJsonStatusPlugin<GraphContext>(),
      createOperationLoggingPlugin<GraphContext>(logger),
      createLifecyclePlugin<GraphContext>(lifecycle),
      ...observability.plugins,
      events.apolloPlugin,
      ...(deps.plugins ?? []),
    ],
  });
  await apollo.start();

  const createContext = (input: ContextInput): GraphContext =>
    createGraphContext(
      createUpstreamContext(upstreamClient, {
        apiKey: input.apiKey ?? config.upstream.apiKey,
        scope: input.caller === undefined ? ANONYMOUS_SCOPE : scopeOf(input.caller),
        // The open facade (AUTH_MODE=none) has no one to name: its writes are the configured key's.
        actor:
          input.caller === undefined || input.caller.via === 'open'
            ? undefined
            : { subject: input.caller.subject, client: input.caller.clientId ?? null },
        requestId: input.requestId,
        signal: createOperationSignal(config.operationTimeoutMs, shutdown.signal),
        // Callers share the upstream key's Idempotency-Keys: each caller's are its own.
        idempotencyOwner: input.caller?.subject,
        readCache: input.readCache,
        readThrough: input.readThrough,
      }),
      input.caller,
    );

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
    // An address that has failed too often is refused before its credentials are even looked at.
    (req, res, next) => {
      rateLimits.check('failed-auth', addressOf(req)).then((decision) => {
        if (decision.allowed) next();
        else sendRateLimited(res, decision.retryAfterSeconds);
      }, next);
    },
    authenticateHttp({
      authenticator,
      publicIntrospection: config.introspection === 'public',
      landingPage: config.landingPage,
      failedAuthLimiter,
      logger,
    }),
    rateLimitRequests({
      limits: rateLimits,
      bucket: 'request',
      keyOf: (req, res) => {
        const caller = (res.locals as Partial<AuthenticatedLocals>).caller;
        return caller === undefined ? addressOf(req) : `sub:${caller.subject}`;
      },
    }),
    ...(trustedDocuments === undefined
      ? []
      : [
          trustedDocumentsMiddleware({
            store: trustedDocuments,
            // Operators keep free-form documents (and so Sandbox in their hands); an anonymous
            // request got here only with `_service` or public introspection.
            isExempt: (_req, res) => {
              const caller = (res.locals as Partial<AuthenticatedLocals>).caller;
              return caller === undefined || caller.operator;
            },
          }),
        ]),
    createGraphQLHandler(apollo, {
      // authenticateHttp decided who is calling before Apollo saw the request.
      context: async ({ req, res }) => {
        const locals = res.locals as Partial<AuthenticatedLocals>;
        return createContext({
          caller: locals.caller,
          apiKey: locals.callerApiKey,
          requestId: res.locals.requestId as string,
          readThrough: /(?:^|[\s,])no-cache(?:$|[\s,=])/i.test(req.headers['cache-control'] ?? ''),
        });
      },
    }),
  );
  events.attach({
    routes,
    httpServer,
    schema,
    validationRules,
    maxTokens: config.queryLimits.maxTokens,
    maxCost: config.queryLimits.maxCost,
    createContext: ({ caller, apiKey, readCache }) => createContext({ caller, apiKey, readCache }),
    formatError,
  });
  app.use(routes);
  app.use(handleNotFound());
  app.use(handleHttpError(logger));

  const closeHooks: (() => void | Promise<void>)[] = [];
  let closing: Promise<void> | undefined;

  return {
    express: app,
    routes,
    httpServer,
    apollo,
    schema,
    upstreamClient,
    logger,
    metrics,
    lifecycle,
    createContext,
    onClose(hook) {
      closeHooks.push(hook);
    },
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
          // graphql-ws first: its subscriptions complete and its sockets close with 1001. The HTTP
          // drain ends every socket without a request in flight, upgraded ones included.
          await events.drain();
          // Apollo's drain plugin closes the http.Server and waits for in-flight requests; those
          // still waiting on the upstream after the drain window answer SHUTTING_DOWN.
          await apollo.stop();
        } finally {
          clearTimeout(cutOff);
        }
        for (const hook of closeHooks) await hook();
        await events.close();
        await rateLimits.close();
        rateLimitRedis?.disconnect();
        await observability.close();
        await upstreamClient.close();
        // The last operations' spans leave before the process exits.
        await tracing?.flush().catch((error: unknown) => logger.warn('exporting traces failed', { error }));
      })();
      return closing;
    },
  };
}

/**
 * The authenticator of `config.auth`: bearer tokens verified against the issuer's keys, a caller's
 * own platform key where allowed (checked with the upstream once per key), or no check at all
 * (`AUTH_MODE=none`, warned about at start).
 */
function createAppAuthenticator(
  config: Config,
  keyEnvironments: KeyEnvironments,
  logger: Logger,
): Authenticator {
  const auth = config.auth;
  if (auth.mode === 'none') {
    logger.warn('AUTH_MODE=none: the facade is open, every caller acts with the configured upstream key');
  }
  const verifier =
    auth.mode === 'oidc' && auth.oidc !== undefined ? createTokenVerifier(auth.oidc) : undefined;
  return createAuthenticator({
    mode: auth.mode === 'oidc' && verifier === undefined ? 'api-key-only' : auth.mode,
    verifier,
    allowCallerApiKey: auth.allowCallerApiKey,
    async checkApiKey(apiKey) {
      const probe = await keyEnvironments.probe(apiKey);
      return probe.outcome === 'ready' ? 'valid' : probe.outcome === 'refused' ? 'invalid' : 'unavailable';
    },
  });
}

/** How long a start waits for Redis before counting in memory (Redis may come later, or never). */
const REDIS_READY_WAIT_MS = 2_000;

/** Resolves once `redis` is ready, or after `timeoutMs`: a Redis that is down does not stop the start. */
async function whenReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  // Not events.once: it rejects on the 'error' events an unreachable Redis emits.
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    redis.once('ready', done);
  });
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
