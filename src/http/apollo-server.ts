/**
 * Apollo Server as the facade runs it over HTTP: the executor behind the HTTP adapter of the door
 * (src/edge/http.ts), which admits every operation before Apollo reads it. Apollo runs the
 * document the door admitted (it parses and validates only to word a document the door refused,
 * with the door's token limit and rules), and its hooks are the one place of what HTTP alone does
 * with an operation's answer (`no-store`, or what a gateway's cache may keep, `extensions.cost`, the JSON status of GraphQL over HTTP,
 * the record through the one operation recorder of every transport, whole answers kept and
 * served), run as one plugin (`request-hooks.ts`); the other plugins trace and audit, and drain
 * the server on shutdown.
 */
import type http from 'node:http';
import { ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import { ApolloServerPluginLandingPageLocalDefault } from '@apollo/server/plugin/landingPage/default';
import type { GraphQLFormattedError, GraphQLSchema } from 'graphql';
import type { Config } from '../config.ts';
import type { ExecutorDoor } from '../edge/door/audiences.ts';
import type { OperationRecorder } from '../observability/operation-record.ts';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import { createGatewayCredentialCheck } from '../auth/gateway-credential.ts';
import type { AdmittedOperations } from './admitted-operation.ts';
import { costExtensionHooks } from './cost-extension.ts';
import { createGatewayInlineTracePlugin } from './gateway-inline-trace.ts';
import { jsonStatusHooks } from './json-status-plugin.ts';
import { noStoreHooks } from './no-store-plugin.ts';
import { operationRecordHooks } from './operation-record-plugin.ts';
import { createRequestHooksPlugin } from './request-hooks.ts';
import { answerCacheHooks } from './answer-cache-plugin.ts';
import { gatewayCacheHooks } from './gateway-cache-hooks.ts';
import { staleAnswerHooks } from '../graph/answer-cache.ts';
import type { AnswerCache } from '../graph/answer-cache.ts';

export interface ApolloServerOptions {
  config: Config;
  schema: GraphQLSchema;
  /** The server drained at shutdown; undefined for a contract's server (the first one drains it). */
  httpServer: http.Server | undefined;
  /** The cache of automatic persisted queries, shared by every audience's server; default: its own. */
  cache?: ApolloServer<GraphContext>['cache'];
  /** The door's parser options and rules, with which Apollo words a document the door refused. */
  door: ExecutorDoor;
  /** The door's admissions, handed to Apollo's hooks. */
  admitted: AdmittedOperations;
  logger: Logger;
  /** The one operation recorder of every transport: each operation's line, metrics and lifecycle. */
  record: OperationRecorder;
  /** Whether a query is a listed trusted document (its name may become a metric label). */
  isTrustedDocument(query: string): boolean;
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  /** Whole answers of repeated queries (`CACHE_ANSWERS_MAX_BYTES`); undefined when none are held. */
  answers?: AnswerCache | undefined;
  /** Plugins of other parts run for every request (the audit trail). */
  plugins: readonly ApolloServerPlugin<GraphContext>[];
  /** Plugins of the server's own start and stop (the events runtime's drain): the first server's only. */
  serverPlugins?: readonly ApolloServerPlugin<GraphContext>[];
}

/**
 * After the drain window, how long operations whose upstream calls were cancelled have to send
 * their `SHUTTING_DOWN` answer before the remaining connections are closed.
 */
export const SHUTDOWN_ANSWER_GRACE_MS = 5_000;

/** Builds and starts Apollo Server. */
export async function createApolloServer(options: ApolloServerOptions): Promise<ApolloServer<GraphContext>> {
  const { config, door } = options;
  const development = config.nodeEnv === 'development';
  const apollo = new ApolloServer<GraphContext>({
    schema: options.schema,
    logger: toApolloLogger(options.logger.child({ component: 'apollo' })),
    // Every request that reaches Apollo has a caller, or is anonymous-safe (the HTTP door).
    introspection: config.introspection !== 'off',
    // "Did you mean …" describes the schema: not to callers who may not introspect.
    hideSchemaDetailsFromClientErrors: config.introspection === 'off',
    // A GET (or simple POST) must carry a header no browser form can send.
    csrfPrevention: true,
    // The process owns SIGINT/SIGTERM (src/main.ts): Apollo's own handler would stop the server
    // under our ordered shutdown and re-raise the signal, so the process would die before exit 0.
    stopOnTerminationSignals: false,
    // The door parsed and validated every document Apollo runs and hands it over (`admitted`): no
    // store of Apollo's own. Apollo parses only a document the door refused, to word it, with the
    // door's token limit and rules.
    documentStore: null,
    validationRules: [...door.validationRules],
    parseOptions: door.parseOptions,
    includeStacktraceInErrorResponses: development,
    formatError: (formatted, error) => options.formatError(formatted, error),
    ...(options.cache === undefined ? {} : { cache: options.cache }),
    plugins: [
      ...(options.httpServer === undefined
        ? []
        : [
            ApolloServerPluginDrainHttpServer({
              httpServer: options.httpServer,
              stopGracePeriodMillis: config.shutdownDrainMs + SHUTDOWN_ANSWER_GRACE_MS,
            }),
          ]),
      // Field timings (`ftv1`) for a gateway that asks, never for any caller's header.
      createGatewayInlineTracePlugin(createGatewayCredentialCheck(config.auth)),
      // No @cacheControl in the schema: every response is `no-store`, set without a per-field hook.
      ApolloServerPluginCacheControlDisabled(),
      config.landingPage
        ? ApolloServerPluginLandingPageLocalDefault({ embed: { runTelemetry: false }, includeCookies: false })
        : ApolloServerPluginLandingPageDisabled(),
      // The facade's own hooks as one listener, in this order: Apollo adds promises per plugin per stage.
      createRequestHooksPlugin<GraphContext>([
        noStoreHooks,
        options.admitted.hooks,
        costExtensionHooks(config.queryLimits.maxCost),
        jsonStatusHooks,
        operationRecordHooks(options.record, options.logger, (query) => options.isTrustedDocument(query)),
        // `extensions.stale` on an answer holding reads served stale in an upstream outage.
        staleAnswerHooks,
        // `Cache-Control` and cache tags for a gateway whose response cache the facade invalidates.
        gatewayCacheHooks,
        // Last: it keeps (and freezes) an answer's data once the other parts have seen it.
        ...(options.answers === undefined ? [] : [answerCacheHooks(options.answers)]),
      ]),
      ...options.plugins,
      ...(options.serverPlugins ?? []),
    ],
  });
  await apollo.start();
  return apollo;
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
