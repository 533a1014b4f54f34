/**
 * graphql-ws on the facade's own http.Server, path `/graphql`, serving the one schema. Connections
 * authenticate with the same credentials HTTP takes; subscriptions complete cleanly on shutdown.
 */
import type { Server as HttpServer, IncomingMessage } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { GraphQLError, type GraphQLFormattedError, type GraphQLSchema, type ValidationRule } from 'graphql';
import { CloseCode, type Context } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import type { GraphContext } from '../graph/context.ts';
import type { Logger } from '../logger.ts';
import { createCredentials, type UpstreamCredentials } from '../upstream/credentials.ts';
import type { WebSocketLimits } from './config.ts';
import type { EventBus } from './event-bus.ts';
import { subscribeWithEventContexts } from './execute-live-event.ts';
import type { LiveGraphContext, LiveRuntime } from './live-context.ts';
import type { PlatformEnvironment } from './platform-event.ts';
import { createSubscribeGuard } from './subscribe-guard.ts';
import { openSubscriberQueue, type SubscriberQueue } from './subscriber-queue.ts';

/** The result of checking a connection's key with the upstream. */
export type SubscriberCheck =
  | { ok: true; environment: PlatformEnvironment }
  /** `4401` bad key, `4403` key without permission, `1013` upstream unavailable (try again later). */
  | { ok: false; closeCode: number; reason: string };

/** Options of {@link attachGraphQLWebSocket}. */
export interface GraphQLWebSocketOptions {
  httpServer: HttpServer;
  schema: GraphQLSchema;
  /** Validation rules beyond graphql's own (`specifiedRules`), the same ones HTTP applies. */
  validationRules: readonly ValidationRule[];
  /** Token limit of the parser (`QUERY_MAX_TOKENS`), as over HTTP. */
  maxTokens: number;
  /** Connection-aware cost limit with the variables known (`QUERY_MAX_COST`), as over HTTP. */
  maxCost: number;
  /** Message size, operations per connection, `connection_init` wait and keep-alive pings. */
  transport: WebSocketLimits;
  /** Default `/graphql`, the HTTP endpoint's path. */
  path?: string;
  /** The facade's configured key, used when a connection brings none (as over HTTP). */
  defaultApiKey: string;
  /** Asks the upstream whether `credentials` are valid and which environment they select. */
  checkSubscriber(credentials: UpstreamCredentials): Promise<SubscriberCheck>;
  /** Builds an operation's context with `apiKey`, as `/graphql` over HTTP does. */
  createContext(input: { apiKey: string }): GraphContext;
  bus: EventBus;
  /** Events one subscriber may let wait; see `subscriber-queue.ts` for what happens beyond. */
  queueLimit: number;
  logger: Logger;
  /** The facade's error formatting (the same as HTTP's): upstream problems kept, the unexpected masked. */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
}

/** A running graphql-ws endpoint. */
export interface GraphQLWebSocketEndpoint {
  /**
   * Stops taking connections, completes every running subscription (clients receive `complete`),
   * then closes the sockets with 1001. Resolves when they are closed or after `timeoutMs`.
   */
  drain(timeoutMs?: number): Promise<void>;
  /** Subscriptions running now. */
  activeSubscriptions(): number;
}

type ConnectionExtra = {
  subscriber?: { credentials: UpstreamCredentials; environment: PlatformEnvironment };
};

/** Attaches graphql-ws to `httpServer` (same port as HTTP). */
export function attachGraphQLWebSocket(options: GraphQLWebSocketOptions): GraphQLWebSocketEndpoint {
  const logger = options.logger.child({ component: 'graphql-ws' });
  const wsServer = new WebSocketServer({
    server: options.httpServer,
    path: options.path ?? '/graphql',
    // A larger message closes the connection with 1009 before it is buffered whole.
    maxPayload: options.transport.maxPayloadBytes,
  });
  const guard = createSubscribeGuard({
    schema: options.schema,
    validationRules: options.validationRules,
    maxTokens: options.maxTokens,
    maxCost: options.maxCost,
    maxSubscriptionsPerConnection: options.transport.maxSubscriptionsPerConnection,
  });
  const queues = new Set<SubscriberQueue>();
  const operations = new Set<string>();
  const connectionIds = new WeakMap<object, number>();
  let nextConnectionId = 0;
  let draining = false;

  const operationKey = (
    ctx: Context<Record<string, unknown> | undefined, Extra & Partial<ConnectionExtra>>,
    id: string,
  ) => {
    let connectionId = connectionIds.get(ctx);
    if (connectionId === undefined) {
      connectionId = nextConnectionId += 1;
      connectionIds.set(ctx, connectionId);
    }
    return `${connectionId}:${id}`;
  };

  useServer<Record<string, unknown> | undefined, ConnectionExtra>(
    {
      schema: options.schema,
      connectionInitWaitTimeout: options.transport.connectionInitTimeoutMs,
      // Parse, validation and the limits, as over HTTP; `ctx.subscriptions` already holds this one.
      onSubscribe: (ctx, _id, payload) => guard(payload, Object.keys(ctx.subscriptions).length),
      subscribe: subscribeWithEventContexts,
      onConnect: async (ctx) => {
        if (draining) {
          ctx.extra.socket.close(1001, 'Server shutting down');
          return false;
        }
        const apiKey = apiKeyOf(ctx.connectionParams, ctx.extra.request) ?? options.defaultApiKey;
        if (apiKey === '') {
          ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized');
          return false;
        }
        const credentials = createCredentials(apiKey);
        const check = await options.checkSubscriber(credentials);
        if (!check.ok) {
          logger.info('refused a graphql-ws connection', { closeCode: check.closeCode });
          // Closing first sets the code; graphql-ws's own close after `false` (4403) is then ignored.
          ctx.extra.socket.close(check.closeCode, check.reason);
          return false;
        }
        (ctx.extra as ConnectionExtra).subscriber = { credentials, environment: check.environment };
        return true;
      },
      context: (ctx): LiveGraphContext => {
        const subscriber = (ctx.extra as ConnectionExtra).subscriber;
        // onConnect refused every connection without one; graphql-ws sends nothing before that.
        if (subscriber === undefined)
          throw new Error('graphql-ws operation without an authenticated subscriber');
        const apiKey = subscriber.credentials.apiKey;
        const live: LiveRuntime = {
          environment: subscriber.environment,
          async openQueue(accept) {
            const queue = await openSubscriberQueue({
              bus: options.bus,
              environment: subscriber.environment,
              accept,
              limit: options.queueLimit,
            });
            if (draining) queue.end();
            queues.add(queue);
            return trackUntilDone(queue, () => queues.delete(queue));
          },
          createEventContext: () => options.createContext({ apiKey }),
        };
        return { ...options.createContext({ apiKey }), live };
      },
      // graphql-ws sends errors as graphql-js made them; HTTP clients get them through Apollo's
      // formatError. Both go through the same function, so no internal message leaks here either.
      onNext: (_ctx, _id, _payload, _args, result) =>
        result.errors === undefined
          ? undefined
          : { ...result, errors: result.errors.map((error) => options.formatError(error.toJSON(), error)) },
      // graphql-ws reports here what failed before execution: validation. Over HTTP Apollo tags
      // those GRAPHQL_VALIDATION_FAILED; the same code here, so clients handle both alike.
      onError: (_ctx, _id, _payload, errors: readonly GraphQLError[]) =>
        errors.map((error) => {
          const tagged =
            error.extensions.code === undefined
              ? new GraphQLError(error.message, {
                  nodes: error.nodes,
                  source: error.source,
                  positions: error.positions,
                  path: error.path,
                  originalError: error.originalError,
                  extensions: { ...error.extensions, code: 'GRAPHQL_VALIDATION_FAILED' },
                })
              : error;
          return options.formatError(tagged.toJSON(), tagged);
        }),
      // Logged once the operation listens (its queue subscribed, any replay read): from here on no
      // change is missed, which is what a client or a test waits for before making one.
      onOperation: (ctx, id) => {
        const key = operationKey(ctx, id);
        operations.add(key);
        logger.debug('subscription started', { subscription: key });
      },
      onComplete: (ctx, id) => {
        const key = operationKey(ctx, id);
        if (operations.delete(key)) logger.debug('subscription completed', { subscription: key });
      },
    },
    wsServer,
    options.transport.keepAliveMs,
  );

  return {
    activeSubscriptions: () => operations.size,
    async drain(timeoutMs = 5_000) {
      if (draining) return;
      draining = true;
      const deadline = Date.now() + timeoutMs;
      // No new connection from here on; the ones open stay open until their subscriptions completed.
      const closed = new Promise<void>((resolve) => wsServer.close(() => resolve()));
      for (const queue of queues) queue.end();
      while (operations.size > 0 && Date.now() < deadline) await sleep(10);
      // graphql-ws sends `complete` right after its onComplete hook; let those writes go out first.
      await nextTurn();
      for (const client of wsServer.clients) client.close(1001, 'Server shutting down');
      while (wsServer.clients.size > 0 && Date.now() < deadline) await sleep(10);
      for (const client of wsServer.clients) client.terminate();
      await closed;
      logger.info('graphql-ws drained', { unfinished: operations.size });
    },
  };
}

/** The key a connection brings: `connectionParams` (`X-API-Key` or `apiKey`), else the upgrade request's header. */
function apiKeyOf(params: Record<string, unknown> | undefined, request: IncomingMessage): string | undefined {
  for (const name of ['X-API-Key', 'x-api-key', 'apiKey']) {
    const value = params?.[name];
    if (typeof value === 'string') return value.trim();
    // A key that is not a string is a wrong key, not a missing one: never fall back to the facade's.
    if (value !== undefined && value !== null) return '';
  }
  const header = request.headers['x-api-key'];
  return typeof header === 'string' ? header.trim() : undefined;
}

/** `queue`, calling `onDone` once when it ends by any path. */
function trackUntilDone(queue: SubscriberQueue, onDone: () => void): SubscriberQueue {
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    onDone();
  };
  const tracked: SubscriberQueue = {
    get size() {
      return queue.size;
    },
    async next() {
      const result = await queue.next();
      if (result.done) finish();
      return result;
    },
    async return() {
      finish();
      return queue.return();
    },
    end() {
      queue.end();
    },
    [Symbol.asyncIterator]() {
      return tracked;
    },
  };
  return tracked;
}
