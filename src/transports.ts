/**
 * The door's adapters and their executors, as `createApp` mounts them: the one operation recorder
 * of every transport, the operation contexts, the live wing (every live transport, one kind), and
 * HTTP's adapter of the door with Apollo Server as its executor. Built from the app's parts, which
 * know nothing of routes; it writes no access rule (the door does).
 */
import type http from 'node:http';
import type { GraphQLFormattedError, GraphQLSchema } from 'graphql';
import type { Config } from './config.ts';
import type { ConfiguredDoor } from './edge/configured-door.ts';
import { httpTransport } from './edge/http.ts';
import { createLiveWing, type LiveExecute, type LiveWing } from './edge/live.ts';
import { createLiveConnections } from './edge/live-connections.ts';
import { createMcpEndpoint, type McpEndpoint } from './edge/mcp/endpoint.ts';
import { MCP_LIVE_RULES } from './edge/mcp/rules.ts';
import { cors } from './http/cors.ts';
import { LIVE_TRANSPORTS } from './edge/live-transports.ts';
import type { EnvironmentStacks } from './environments.ts';
import { cursorOf, subscribeWithEventContexts } from './events/delivery/execute-live-event.ts';
import type { AnswerCache } from './graph/answer-cache.ts';
import type { Audiences } from './graph/audiences.ts';
import type { FieldUsage } from './observability/usage-export.ts';
import { createOperationContexts } from './graph/operation-context.ts';
import { clientAddress } from './http/client-address.ts';
import { createHttpExecutor } from './http/executor.ts';
import type { Logger } from './logger.ts';
import type { LifecycleEmitter } from './observability/lifecycle.ts';
import type { MemoryRelease } from './observability/memory-release.ts';
import type { Observability } from './observability/observability.ts';
import { createOperationRecorder, type OperationRecorder } from './observability/operation-record.ts';
import type { OperationContextInput } from './graph/operation-context.ts';
import { touchingOnEachOperation } from './observability/work-observers.ts';
import type { ApolloServer } from '@apollo/server';
import type { RequestHandler } from 'express';
import type { GraphContext } from './graph/context.ts';

/** The app's parts every transport is built from (`createAppParts` in app.ts). */
export interface TransportParts {
  readonly logger: Logger;
  readonly lifecycle: LifecycleEmitter;
  readonly observability: Observability;
  readonly memoryRelease: MemoryRelease;
  readonly schema: GraphQLSchema;
  /** The schema each caller is served (its contract's); HTTP runs a server per schema. */
  readonly audiences: Audiences;
  /** Field usage per client: the operation recorder counts every executed operation in it. */
  readonly usage: FieldUsage;
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  /** Whole answers of repeated HTTP queries; undefined when none are held. */
  readonly answers: AnswerCache | undefined;
  readonly environments: EnvironmentStacks;
  readonly edge: ConfiguredDoor;
}

/** Every transport of the app, built. */
export interface Transports {
  /** The live transports, counted and drained together; their request routes under `/graphql`. */
  readonly live: LiveWing;
  /** HTTP's executor, stopped last at a shutdown (its drain closes the server). */
  readonly apollo: ApolloServer<GraphContext>;
  /** `/graphql` over HTTP: the door's adapter, then Apollo. Mount after CORS and the JSON parser. */
  readonly graphQLOverHttp: RequestHandler;
  /** `/mcp` and its OAuth metadata; undefined with `MCP_ENABLED=false`. */
  readonly mcp: McpEndpoint | undefined;
}

/**
 * The door's adapters and their executors: the one operation recorder of every transport, the
 * operation contexts, the live wing (its transports, one kind), and HTTP's (Apollo Server as its
 * executor, behind the HTTP adapter of the door).
 */
export async function createTransports(
  config: Config,
  parts: TransportParts,
  httpServer: http.Server,
  shutdown: AbortSignal,
): Promise<Transports> {
  const { logger, lifecycle, observability, environments, edge, schema, formatError } = parts;
  const { events } = environments;
  // One recorder for every transport: each operation's `graphql operation` line, metrics and lifecycle.
  const record = touchingOnEachOperation(
    createOperationRecorder({
      logger,
      metrics: observability.metrics,
      lifecycle,
      bindsEnvironments: environments.bindsEnvironments,
      usage: parts.usage.recorder,
    }),
    parts.memoryRelease,
  );
  const createContext = createOperationContexts({
    upstreamOf: (environment) => environments.of(environment),
    bindsEnvironments: environments.bindsEnvironments,
    operationTimeoutMs: config.operationTimeoutMs,
    shutdown,
    upstreamMeterOf: edge.door.upstreamMeter,
  });
  const addressOf = (req: http.IncomingMessage): string => clientAddress(req, config.edge.trustProxy);
  // Every live transport, one kind, each with the limits of its wire.
  const live = createLiveWing({
    transports: LIVE_TRANSPORTS,
    limits: {
      webSocket: config.events.webSocket,
      stalledWriteTimeoutMs: config.events.stalledWriteTimeoutMs,
      callbackUrls: config.edge.callbackUrls,
    },
    door: edge.door,
    schema,
    execute: subscribeWithEventContexts,
    cursorOf,
    live: events.live,
    record,
    createContext,
    httpServer,
    addressOf,
    formatError,
    logger,
  });
  const executor = await createHttpExecutor({
    config,
    schema,
    httpServer,
    door: edge.door,
    logger,
    record,
    isTrustedDocument: (query) => edge.trustedDocuments?.isTrustedBody(query) === true,
    formatError,
    answers: parts.answers,
    plugins: observability.plugins,
    serverPlugins: [events.apolloPlugin],
    contractSchemas: parts.audiences.schemas.filter((served) => served !== schema),
    createContext,
  });
  // HTTP's adapter of the door: one call into the door per request, then Apollo executes.
  const graphQLOverHttp = httpTransport({
    door: edge.door,
    execute: executor.execute,
    addressOf,
    landingPage: config.landingPage,
    persistedQuery: executor.persistedQuery,
    live: LIVE_TRANSPORTS.map((transport) => transport.rules.connects),
    batchMaxOperations: config.edge.batchMaxOperations,
  });
  const mcp = config.mcp.enabled
    ? createMcp(config, parts, { record, createContext, addressOf, execute: subscribeWithEventContexts })
    : undefined;
  return { live, apollo: executor.apollo, graphQLOverHttp, mcp };
}

/**
 * The MCP endpoint (src/edge/mcp/): the door's adapter at `/mcp`, executing tool calls and resource
 * reads with graphql-js and the same operation contexts, its resource subscriptions on live
 * connections of its own run by the live wing's executor, and CORS with MCP's headers.
 */
function createMcp(
  config: Config,
  parts: TransportParts,
  shared: {
    record: OperationRecorder;
    createContext: (input: OperationContextInput) => GraphContext;
    addressOf: (req: http.IncomingMessage) => string;
    execute: LiveExecute;
  },
): McpEndpoint {
  const { edge, schema, observability, logger } = parts;
  return createMcpEndpoint({
    config: config.mcp,
    issuer: config.auth.mode === 'oidc' ? config.auth.oidc?.issuer : undefined,
    trustProxy: config.edge.trustProxy,
    introspectionOff: config.introspection === 'off',
    door: edge.door,
    manifest: edge.trustedDocuments,
    runner: {
      schema,
      schemaOf: (caller) => parts.audiences.of(caller)?.schema,
      record: shared.record,
      createContext: shared.createContext,
      formatError: parts.formatError,
      noteOperation: (context, admitted, tool) =>
        observability.audit.noteOperation(context.upstream, admitted.operation, admitted.document, tool),
      logger: logger.child({ component: 'mcp' }),
    },
    watch: {
      connections: createLiveConnections(MCP_LIVE_RULES, {
        door: edge.door,
        live: parts.environments.events.live,
        record: shared.record,
        createContext: shared.createContext,
      }),
      execute: shared.execute,
    },
    cors: cors({
      origins: config.edge.corsOrigins,
      extraAllowedHeaders: [
        ...config.edge.corsAllowedHeaders,
        'mcp-session-id',
        'mcp-protocol-version',
        'last-event-id',
      ],
      extraExposedHeaders: ['mcp-session-id', 'www-authenticate'],
      extraMethods: ['DELETE'],
    }),
    addressOf: shared.addressOf,
    logger: logger.child({ component: 'mcp' }),
  });
}
