/**
 * graphql-ws on the facade's own http.Server, path `/graphql`, serving the one schema. Connections
 * authenticate with the same credentials HTTP takes; subscriptions complete cleanly on shutdown.
 */
import type { Server as HttpServer, IncomingMessage } from 'node:http';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import {
  getOperationAST,
  GraphQLError,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import type { Context } from 'graphql-ws';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import { WebSocketServer, type VerifyClientCallbackAsync } from 'ws';
import type { Authentication, Credentials } from '../../auth/authenticate.ts';
import { mayActFor, type Caller } from '../../auth/caller.ts';
import type { GraphContext } from '../../graph/context.ts';
import type { Logger } from '../../logger.ts';
import type { LifecycleEmitter } from '../../observability/lifecycle.ts';
import type { SharedReadCache } from '../../upstream/client.ts';
import type { UpstreamProbe } from '../../upstream/probe.ts';
import type { WebSocketLimits } from '../config.ts';
import type { EventLog } from '../log/event-log.ts';
import { subscribeWithEventContexts } from './execute-live-event.ts';
import type { LiveGraphContext, LiveObserver, LiveSession } from './live-context.ts';
import type { PlatformEnvironment, PlatformEvent } from '../receiving/platform-event.ts';
import { AwaitableSet } from './awaitable-set.ts';
import { createSharedEventReads, operationKeyOf, readGroupOf } from './shared-event-reads.ts';
import { createSubscribeGuard } from './subscribe-guard.ts';
import { openSubscriberQueue, type SubscriberQueue } from './subscriber-queue.ts';

/** A graphql-ws `subscribe` payload as a hook may read and rewrite it. */
export interface SubscribePayloadLike {
  query?: unknown;
  documentId?: unknown;
  id?: unknown;
  extensions?: unknown;
}

/** Close codes of a refused or ended connection (graphql-ws's 44xx family, and RFC 6455's). */
export const WS_CLOSE = {
  /** No valid token (at `connection_init`, or the token has expired since). */
  unauthorized: 4401,
  /** A valid token that may see nothing live (no customers, not an operator). */
  forbidden: 4403,
  /** Too many failed authentications from this address. */
  tooManyRequests: 4429,
  /** The issuer's keys or the upstream cannot be reached now. */
  tryAgainLater: 1013,
  goingAway: 1001,
} as const;

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
  /** Who is connecting: the same authenticator HTTP requests go through. */
  authenticate(credentials: Credentials): Promise<Authentication>;
  /** Counts a failed authentication of `request`'s address; answers when it is over its limit. */
  failedAuthLimiter?: (request: IncomingMessage) => Promise<{ retryAfterSeconds: number } | undefined>;
  /**
   * Decides whether `caller` may start the subscription `payload` asks for (rate limits, trusted
   * documents); an error refuses it. It may replace `payload.query` (a listed document's body).
   */
  admitSubscription?: (caller: Caller, payload: SubscribePayloadLike) => Promise<GraphQLError | undefined>;
  /** Checks a WebSocket upgrade (origin, connection rate) before graphql-ws sees the connection. */
  verifyClient?: VerifyClientCallbackAsync;
  /**
   * Operations one caller (by subject) may have running at once on this server, over all its
   * connections; a subscribe beyond is refused with `RATE_LIMITED`. Undefined: no cap.
   */
  maxOperationsPerCaller?: number;
  /**
   * The upstream probe of the key a connection's reads use (the caller's own key, or the facade's
   * when undefined): its environment (sandbox or live) decides what the connection hears. Cached
   * per accepted key, so a connection costs no call.
   */
  probeKey(apiKey: string | undefined): Promise<UpstreamProbe>;
  /** Builds an operation's context for `caller`, as `/graphql` over HTTP does. */
  createContext(input: {
    caller: Caller;
    apiKey: string | undefined;
    readCache?: SharedReadCache | undefined;
  }): GraphContext;
  /** The event log subscribers listen to and resume from. */
  log: EventLog;
  /** Events one subscriber may let wait; see `subscriber-queue.ts` for what happens beyond. */
  queueLimit: number;
  logger: Logger;
  /** The facade's error formatting (the same as HTTP's): upstream problems kept, the unexpected masked. */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  /** Told about deliveries and overflows (metrics). */
  observer?: LiveObserver;
  /** Records the customers subscriptions follow (for the reconciliation of missed webhooks). */
  watchCustomer?: (environment: PlatformEnvironment, customerId: string) => () => void;
  /** Told when an operation starts listening and when it completes (`app.lifecycle`). */
  lifecycle?: LifecycleEmitter;
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
  /** WebSocket connections open now (authenticated or not yet). */
  activeConnections(): number;
}

interface Subscriber {
  caller: Caller;
  /** The caller's own platform key, when it authenticated with one. */
  apiKey: string | undefined;
  environment: PlatformEnvironment;
  /**
   * Which subscribers read alike (key and scope): their subscriptions of one operation share each
   * event's reads.
   */
  readGroup: string;
  /** The queues of this connection's subscriptions, ended together when the token expires. */
  queues: AwaitableSet<SubscriberQueue>;
  /** Ends the connection when the caller's token expires. */
  expiry: NodeJS.Timeout | undefined;
}

type ConnectionExtra = { subscriber?: Subscriber };

/** Longest a timer may wait in Node; a later expiry is re-armed when this one fires. */
const MAX_TIMER_MS = 2_147_483_647;

/** Attaches graphql-ws to `httpServer` (same port as HTTP). */
export function attachGraphQLWebSocket(options: GraphQLWebSocketOptions): GraphQLWebSocketEndpoint {
  const logger = options.logger.child({ component: 'graphql-ws' });
  const wsServer = new WebSocketServer({
    server: options.httpServer,
    path: options.path ?? '/graphql',
    ...(options.verifyClient ? { verifyClient: options.verifyClient } : {}),
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
  const sharedReads = createSharedEventReads();
  const operations = new AwaitableSet<string>();
  const connectionIds = new WeakMap<object, number>();
  let nextConnectionId = 0;
  let draining = false;
  // The running operations of each caller's connections, as graphql-ws itself holds them.
  const operationsByCaller = new Map<string, Set<{ readonly subscriptions: object }>>();
  const runningOperationsOf = (subject: string): number => {
    let running = 0;
    for (const connection of operationsByCaller.get(subject) ?? []) {
      running += Object.keys(connection.subscriptions).length;
    }
    return running;
  };

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

  const server = useServer<Record<string, unknown> | undefined, ConnectionExtra>(
    {
      schema: options.schema,
      connectionInitWaitTimeout: options.transport.connectionInitTimeoutMs,
      subscribe: subscribeWithEventContexts,
      onSubscribe: async (ctx, _id, payload) => {
        // First the caller's budget (each subscribe message spends from it, as an HTTP request
        // does) and the trusted documents, which may put a listed body in place of an id.
        const subscriber = (ctx.extra as ConnectionExtra).subscriber;
        if (subscriber !== undefined) {
          // Every subscription that hears an event costs a queue, an execution and a message: the
          // cap bounds that for a caller (the upstream read is shared, see shared-event-reads.ts).
          const max = options.maxOperationsPerCaller;
          if (max !== undefined && runningOperationsOf(subscriber.caller.subject) > max) {
            return [
              new GraphQLError(
                `This caller already runs ${max} operations over graphql-ws, the most allowed; complete one before starting another.`,
                { extensions: { code: 'RATE_LIMITED' } },
              ),
            ];
          }
          if (options.admitSubscription !== undefined) {
            const refusal = await options.admitSubscription(subscriber.caller, payload);
            if (refusal !== undefined) return [refusal];
          }
        }
        // Then parse, validation and the limits, as over HTTP; `ctx.subscriptions` holds this one.
        return guard(payload, Object.keys(ctx.subscriptions).length);
      },
      onConnect: async (ctx) => {
        const socket = ctx.extra.socket;
        if (draining) {
          socket.close(WS_CLOSE.goingAway, 'Server shutting down');
          return false;
        }
        const refuse = (code: number, reason: string): false => {
          logger.info('refused a graphql-ws connection', { closeCode: code });
          // Closing first sets the code; graphql-ws's own close after `false` (4403) is then ignored.
          socket.close(code, reason);
          return false;
        };
        const authentication = await options.authenticate(
          credentialsOf(ctx.connectionParams, ctx.extra.request),
        );
        if (authentication.outcome === 'unavailable')
          return refuse(WS_CLOSE.tryAgainLater, 'Try again later');
        if (authentication.outcome !== 'authenticated') {
          if (authentication.outcome === 'invalid') {
            logger.debug('refused an access token', { reason: authentication.reason });
            const limited = await options.failedAuthLimiter?.(ctx.extra.request);
            if (limited !== undefined) return refuse(WS_CLOSE.tooManyRequests, 'Too many requests');
          }
          return refuse(WS_CLOSE.unauthorized, 'Unauthorized');
        }
        const { caller, apiKey } = authentication;
        if (!caller.operator && caller.scope.kind === 'customers' && caller.scope.customerIds.size === 0) {
          return refuse(WS_CLOSE.forbidden, 'Forbidden');
        }
        const probe = await options.probeKey(apiKey);
        if (probe.outcome === 'refused') {
          return probe.problem.status === 401
            ? refuse(WS_CLOSE.unauthorized, 'Unauthorized')
            : refuse(WS_CLOSE.forbidden, 'Forbidden');
        }
        if (probe.outcome !== 'ready') {
          logger.warn('could not learn the upstream environment of a graphql-ws connection', {
            outcome: probe.outcome,
            reason:
              probe.outcome === 'unreachable'
                ? probe.reason
                : probe.outcome === 'failed'
                  ? probe.problem.code
                  : undefined,
          });
          return refuse(WS_CLOSE.tryAgainLater, 'Upstream unavailable, try again later');
        }
        const environment = probe.discovery.environment;
        const subscriber: Subscriber = {
          caller,
          apiKey,
          environment,
          readGroup: readGroupOf(caller, apiKey),
          queues: new AwaitableSet(),
          expiry: undefined,
        };
        armExpiry(subscriber, socket);
        socket.once('close', () => clearTimeout(subscriber.expiry));
        // A socket closed while its token was checked has no `close` to come: not counted.
        if (socket.readyState === socket.OPEN) {
          const subject = caller.subject;
          const connections = operationsByCaller.get(subject) ?? new Set();
          operationsByCaller.set(subject, connections.add(ctx));
          socket.once('close', () => {
            connections.delete(ctx);
            if (connections.size === 0) operationsByCaller.delete(subject);
          });
        }
        (ctx.extra as ConnectionExtra).subscriber = subscriber;
        return true;
      },
      context: (ctx, _id, _payload, args): LiveGraphContext => {
        const subscriber = (ctx.extra as ConnectionExtra).subscriber;
        // onConnect refused every connection without one; graphql-ws sends nothing before that.
        if (subscriber === undefined)
          throw new Error('graphql-ws operation without an authenticated subscriber');
        const { caller, apiKey, readGroup } = subscriber;
        const { watchCustomer } = options;
        const createEventContext = () => options.createContext({ caller, apiKey });
        // Only the same operation of the same group shares an event's context (and its execution):
        // the context's call and retry budgets are one operation's, which another document's reads
        // could spend. Other operations of the group share the event's GET answers instead, each
        // charged to its own budget as if it had read alone.
        const operation = operationKeyOf(args);
        const sharedBy = operation === undefined ? undefined : JSON.stringify([readGroup, operation]);
        const eventContextFor = (event: PlatformEvent) => () =>
          options.createContext({ caller, apiKey, readCache: sharedReads.readCacheFor(event.id, readGroup) });
        const live: LiveSession = {
          environment: subscriber.environment,
          async openQueue(accept, after) {
            const queue = await openSubscriberQueue({
              log: options.log,
              ...(after === undefined ? {} : { after }),
              environment: subscriber.environment,
              // Events of customers the caller may not act for never take queue space, nor a read.
              accept: (event) => isVisibleTo(caller, event.data.customerId) && accept(event),
              limit: options.queueLimit,
              onDone: () => {
                queues.delete(queue);
                subscriber.queues.delete(queue);
              },
            });
            if (draining) queue.end();
            queues.add(queue);
            subscriber.queues.add(queue);
            return queue;
          },
          createEventContext,
          eventContext: (event) =>
            sharedBy === undefined
              ? createEventContext()
              : sharedReads.contextFor(event.id, sharedBy, eventContextFor(event)),
          ...(options.observer === undefined ? {} : { observer: options.observer }),
          ...(watchCustomer === undefined
            ? {}
            : { watchCustomer: (customerId: string) => watchCustomer(subscriber.environment, customerId) }),
          // For delivery spans only: with tracing off, not even looked up.
          ...(options.observer?.traceDelivery === undefined
            ? {}
            : { operationName: getOperationAST(args.document, args.operationName)?.name?.value }),
        };
        return { ...options.createContext({ caller, apiKey }), live };
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
      // Logged and told to the lifecycle once the operation listens (its queue subscribed, any replay
      // read): from here on no change is missed, which is what a client or a test waits for before
      // making one.
      onOperation: (ctx, id, _payload, args) => {
        const key = operationKey(ctx, id);
        operations.add(key);
        logger.debug('subscription started', { subscription: key });
        if (options.lifecycle?.observed('subscriptionStarted')) {
          options.lifecycle.emit('subscriptionStarted', {
            subscriptionId: key,
            operationName: getOperationAST(args.document, args.operationName)?.name?.value ?? null,
            subject: (ctx.extra as ConnectionExtra).subscriber?.caller.subject ?? '',
          });
        }
      },
      onComplete: (ctx, id) => {
        const key = operationKey(ctx, id);
        if (!operations.delete(key)) return;
        logger.debug('subscription completed', { subscription: key });
        options.lifecycle?.emit('subscriptionCompleted', { subscriptionId: key });
      },
    },
    wsServer,
    options.transport.keepAliveMs,
  );

  /**
   * When the caller's token expires, its subscriptions end with an UNAUTHENTICATED error and the
   * socket closes with 4401: a revoked caller keeps no live feed. It may reconnect with a fresh
   * token and resume with `since`.
   */
  function armExpiry(subscriber: Subscriber, socket: { close(code: number, reason: string): void }): void {
    const expiresAt = subscriber.caller.expiresAt;
    if (expiresAt === undefined) return;
    const wait = expiresAt - Date.now();
    if (wait > MAX_TIMER_MS) {
      subscriber.expiry = setTimeout(() => armExpiry(subscriber, socket), MAX_TIMER_MS);
      return;
    }
    subscriber.expiry = setTimeout(
      () => {
        void (async () => {
          for (const queue of subscriber.queues) queue.revoke();
          await subscriber.queues.emptied(1_000);
          // graphql-ws sends each `complete` right after the stream ends; let those go out first.
          await nextTurn();
          socket.close(WS_CLOSE.unauthorized, 'Token expired');
        })();
      },
      Math.max(0, wait),
    );
  }

  return {
    activeSubscriptions: () => operations.size,
    activeConnections: () => wsServer.clients.size,
    async drain(timeoutMs = 5_000) {
      if (draining) return;
      draining = true;
      const deadline = Date.now() + timeoutMs;
      // No new connection from here on; the ones open stay open until their subscriptions completed.
      wsServer.close();
      for (const queue of queues) queue.end();
      await operations.emptied(deadline - Date.now());
      // graphql-ws sends `complete` right after its onComplete hook; let those writes go out first.
      await nextTurn();
      // Our own reason first; graphql-ws's dispose then finds every socket closing, and resolves
      // once the server has closed, that is once the last socket has.
      for (const client of wsServer.clients) client.close(WS_CLOSE.goingAway, 'Server shutting down');
      const disposed = (async () => {
        try {
          await server.dispose();
        } catch {
          // Rejects only when the server had closed already (no socket was open): nothing to wait for.
        }
      })();
      const timeout = new AbortController();
      const timedOut = sleep(Math.max(0, deadline - Date.now()), undefined, { signal: timeout.signal });
      await Promise.race([disposed, timedOut.catch(() => undefined)]);
      timeout.abort();
      for (const client of wsServer.clients) client.terminate();
      await disposed;
      logger.info('graphql-ws drained', { unfinished: operations.size });
    },
  };
}

/**
 * What a connection presents: `Authorization` (or `authorization`) in the `connection_init`
 * payload, else the upgrade request's header; and a caller's own key the same way (`X-API-Key`,
 * `x-api-key` or `apiKey`). A value that is not a string counts as a wrong credential, never as none.
 */
function credentialsOf(params: Record<string, unknown> | undefined, request: IncomingMessage): Credentials {
  return {
    authorization: paramOf(params, ['Authorization', 'authorization']) ?? headerOf(request, 'authorization'),
    apiKey: paramOf(params, ['X-API-Key', 'x-api-key', 'apiKey']) ?? headerOf(request, 'x-api-key'),
  };
}

function paramOf(params: Record<string, unknown> | undefined, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = params?.[name];
    if (typeof value === 'string') return value;
    if (value !== undefined && value !== null) return 'invalid';
  }
  return undefined;
}

function headerOf(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Whether an event of `customerId` may reach `caller`: its own customers', or every one for operators. */
function isVisibleTo(caller: Caller, customerId: string | null): boolean {
  if (caller.operator) return true;
  return customerId !== null && mayActFor(caller, customerId);
}
