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
import { expressMiddleware } from '@as-integrations/express5';
import express, { type Express, type Router } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Config } from './config.ts';
import { createFormatError } from './errors/format-error.ts';
import { createEventsRuntime } from './events/events-runtime.ts';
import { createGraphContext, type GraphContext } from './graph/context.ts';
import { createOperationLimitsPlugin } from './graph/operation-limits-plugin.ts';
import { createQueryLimitsRules } from './graph/query-limits.ts';
import { createSchema } from './graph/schema.ts';
import { handleHttpError, handleNotFound } from './http/fallback.ts';
import { handleHealth, handleReadiness } from './http/health.ts';
import { createJsonStatusPlugin } from './http/json-status-plugin.ts';
import { createNoStorePlugin } from './http/no-store-plugin.ts';
import { assignRequestId } from './http/request-id.ts';
import { createLogger, type Logger } from './logger.ts';
import { createOperationLoggingPlugin } from './observability/operation-logging-plugin.ts';
import { createOperationSignal, OperationCancellation } from './upstream/cancellation.ts';
import { createUpstreamClient, type UpstreamClient } from './upstream/client.ts';
import { createUpstreamContext } from './upstream/context.ts';

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
}

/** Who is calling and under which request id; see {@link App.createContext}. */
export interface ContextInput {
  /** The caller's own upstream key; the configured key when absent. */
  apiKey?: string;
  /** The caller's request id; generated when absent or unusable. */
  requestId?: string;
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
  /** Builds an operation's context the way `/graphql` does (for graphql-ws and webhook reads). */
  createContext(input?: ContextInput): GraphContext;
  /** Runs `hook` during `close()`, after HTTP has drained and before upstream connections close. */
  onClose(hook: () => void | Promise<void>): void;
  /** Starts listening; resolves with the base URL (no path) and the bound port. */
  listen(port?: number, host?: string): Promise<{ url: string; port: number }>;
  /** Stops accepting requests, lets in-flight ones finish, then closes upstream connections. */
  close(): Promise<void>;
}

/** Largest GraphQL request body accepted. */
const MAX_BODY = '1mb';

/**
 * After the drain window, how long operations whose upstream calls were cancelled have to send
 * their `SHUTTING_DOWN` answer before the remaining connections are closed.
 */
const SHUTDOWN_ANSWER_GRACE_MS = 5_000;

/** Builds the app (Apollo Server is started, nothing listens yet). */
export async function createApp(config: Config, deps: AppDependencies = {}): Promise<App> {
  const logger = deps.logger ?? createLogger({ level: config.logLevel, redact: [config.upstream.apiKey] });
  const upstreamClient = deps.upstreamClient ?? createUpstreamClient({ ...config.upstream, logger });
  const schema = deps.schema ?? createSchema();
  const development = config.nodeEnv === 'development';
  const formatError = createFormatError({ includeStacktrace: development });
  // Webhook route, pub/sub and graphql-ws: src/events/. Drained by its Apollo plugin on close.
  const events = createEventsRuntime({
    config: config.events,
    defaultApiKey: config.upstream.apiKey,
    upstreamClient,
    logger,
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
    introspection: config.introspection,
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
      events.apolloPlugin,
      ...(deps.plugins ?? []),
    ],
  });
  await apollo.start();

  const createContext = (input: ContextInput = {}): GraphContext =>
    createGraphContext(
      createUpstreamContext(upstreamClient, {
        apiKey: input.apiKey ?? config.upstream.apiKey,
        requestId: input.requestId,
        signal: createOperationSignal(config.operationTimeoutMs, shutdown.signal),
      }),
    );

  const routes = express.Router();
  app.use(assignRequestId());
  app.get('/healthz', handleHealth());
  app.get('/readyz', handleReadiness({ client: upstreamClient, apiKey: config.upstream.apiKey, logger }));
  app.use(
    '/graphql',
    express.json({ limit: MAX_BODY }),
    expressMiddleware(apollo, {
      // A server-side caller may send its own key; everyone else uses the facade's.
      context: async ({ req, res }) =>
        createContext({ apiKey: req.get('x-api-key'), requestId: res.locals.requestId as string }),
    }),
  );
  events.attach({
    routes,
    httpServer,
    schema,
    validationRules,
    maxTokens: config.queryLimits.maxTokens,
    maxCost: config.queryLimits.maxCost,
    createContext: ({ apiKey }) => createContext({ apiKey }),
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
        // The webhook endpoint is registered once the facade can receive deliveries.
        await events.start(listening.url);
        return listening;
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
        await upstreamClient.close();
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
