/**
 * The Server-Sent Events adapter of the door: GraphQL over SSE (the `graphql-sse` library, its
 * "distinct connections" mode: one subscription per request, `Accept: text/event-stream`) at
 * `/graphql/stream`, translated to the door and back. The request is the door's connect (its
 * `Authorization` or `X-API-Key` header), its operation the door's admission (`live-connections.ts`),
 * exactly as a graphql-ws `subscribe`; a refusal is the refusal table's HTTP answer. Each `next`
 * carries the event's cursor as its SSE `id`, so a client (an `EventSource`) that reconnects sends
 * it back as `Last-Event-ID`, which becomes the operation's `after` variable: it resumes from the
 * event log where it stopped. SSE serves subscriptions only.
 */
import { OperationTypeNode, type GraphQLFormattedError } from 'graphql';
import type { Request as ExpressRequest, RequestHandler, Response as ExpressResponse } from 'express';
import { createHandler, type ExecutionResult, type OperationResult } from 'graphql-sse';
import { subscribeWithEventContexts } from '../events/delivery/execute-live-event.ts';
import { isCursor } from '../events/log/event-log.ts';
import type { Logger } from '../logger.ts';
import type { Door, OperationRequest, TransportRules } from './door.ts';
import type { LiveConnection, LiveConnections, LiveOperation } from './live-connections.ts';
import { httpAnswerOf, isRefusal, refuse, type Refusal } from './refusal.ts';

/** SSE serves subscriptions; a query or mutation is refused with `wrong-transport`. */
export const SSE_TRANSPORT: TransportRules = {
  name: 'sse',
  serves: new Set([OperationTypeNode.SUBSCRIPTION]),
  elsewhere:
    'Queries and mutations are served over HTTP (POST /graphql); GraphQL over SSE serves subscriptions only.',
};

/** How long a stream whose token expired has to send its error and complete before it is ended. */
const EXPIRY_GRACE_MS = 1_000;

/** Where the adapter is mounted. */
export const SSE_PATH = '/graphql/stream';

export interface SseOptions {
  door: Door;
  /** The live side of admitted connections, built for {@link SSE_TRANSPORT}. */
  connections: LiveConnections;
  /** The client's address (`TRUST_PROXY` applied). */
  addressOf(request: ExpressRequest): string;
  /** The facade's error formatting (the same as HTTP's): upstream problems kept, the unexpected masked. */
  formatError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError;
  logger: Logger;
}

/** What one request holds once the door let it in. */
interface Stream {
  res: ExpressResponse;
  live?: LiveConnection;
  operation?: LiveOperation;
}

/** The SSE adapter: mount at {@link SSE_PATH} after the JSON body parser (and CORS). */
export function sseAdapter(options: SseOptions): RequestHandler {
  const { door, connections } = options;
  const logger = options.logger.child({ component: 'sse' });
  let nextOperation = 0;

  // graphql-sse types a context as a plain record; ours is the admitted operation's own.
  const handler = createHandler<ExpressRequest, Stream, Record<PropertyKey, unknown>>({
    subscribe: async (args) => stoppable(await subscribeWithEventContexts(args)),
    async authenticate(req) {
      const stream = req.context;
      const connection = await door.connect({
        credentials: {
          authorization: req.headers.get('authorization') ?? undefined,
          apiKey: req.headers.get('x-api-key') ?? undefined,
        },
        address: options.addressOf(req.raw),
        kind: 'live',
      });
      if (isRefusal(connection)) {
        logger.info('refused an SSE connection', { refused: connection.refused });
        return answerOf(connection);
      }
      // Once the token expires the subscription ends with an UNAUTHENTICATED error, which
      // completes the stream; a response still open after a grace is ended.
      stream.live = connections.open(connection, () => {
        setTimeout(() => {
          if (!stream.res.writableEnded) stream.res.end();
        }, EXPIRY_GRACE_MS).unref();
      });
      stream.res.once('close', () => stream.live?.close());
      // graphql-sse asks for a token of "single connection mode"; with none it runs the
      // request as its own stream (distinct connections mode), the only one served here.
      return '';
    },
    async onSubscribe(req, params) {
      const stream = req.context;
      if (stream.live === undefined) return answerOf(refuse('unauthenticated', 'Unauthorized'));
      const request: OperationRequest = {
        ...params,
        variables: withLastEventId(params.variables, req.headers.get('last-event-id')),
      };
      nextOperation += 1;
      const operation = await stream.live.admit(
        String(nextOperation),
        request,
        () => !stream.res.writableEnded,
      );
      if (isRefusal(operation)) return answerOf(operation);
      stream.operation = operation;
      return operation.args as typeof operation.args & { contextValue: Record<PropertyKey, unknown> };
    },
    // Told once the operation listens (its queue subscribed, any replay read).
    onOperation: (_context, req) => {
      req.context.operation?.started();
    },
    // The same formatting as HTTP and graphql-ws: no internal message leaks here either.
    // (graphql-sse types errors as GraphQLError, but serialises whatever it is given.)
    onNext: (_context, _req, result) =>
      result.errors === undefined
        ? undefined
        : ({
            ...result,
            errors: result.errors.map((error) => options.formatError(error.toJSON(), error)),
          } as unknown as ExecutionResult),
    onComplete: (_context, req) => {
      req.context.operation?.completed();
      req.context.live?.close();
    },
  });

  return async (req, res, next) => {
    try {
      if (req.get('accept') !== 'text/event-stream') {
        res.status(406).json({
          errors: [
            {
              message:
                'GraphQL over SSE is served in distinct connections mode: send one subscription per request with "Accept: text/event-stream".',
              extensions: { code: 'BAD_REQUEST' },
            },
          ],
        });
        return;
      }
      const stream: Stream = { res };
      const [body, init] = await handler({
        method: req.method,
        url: req.originalUrl,
        headers: { get: (name) => req.get(name) },
        body: (req.body as Record<string, unknown> | undefined) ?? null,
        raw: req,
        context: stream,
      });
      res.writeHead(init.status, init.headers);
      if (body === null || typeof body === 'string') {
        res.end(body ?? undefined);
        return;
      }
      const stop = () => void body.return(undefined);
      res.once('close', stop);
      for await (const message of body) {
        if (res.writableEnded || res.destroyed) break;
        res.write(withEventId(message));
      }
      res.off('close', stop);
      res.end();
    } catch (error) {
      if (res.headersSent) res.end();
      else next(error);
    }
  };
}

/**
 * `result` as graphql-sse stops a stream when its client goes: it calls `return()` only on what
 * looks like an async generator (with a `throw` too), and would otherwise keep the subscription
 * listening after the response closed. Our streams stop on `return()`; `throw()` does the same.
 */
function stoppable(result: Awaited<ReturnType<typeof subscribeWithEventContexts>>): OperationResult {
  if (!(Symbol.asyncIterator in result) || 'throw' in result) return result;
  const iterator = result;
  return Object.assign(iterator, {
    throw: async (): Promise<IteratorResult<ExecutionResult>> =>
      (await iterator.return?.()) ?? { value: undefined, done: true },
  }) as OperationResult;
}

/** The refusal table's HTTP answer, as graphql-sse returns a response. */
function answerOf(
  refusal: Refusal,
): [string, { status: number; statusText: string; headers: Record<string, string> }] {
  const answer = httpAnswerOf(refusal);
  return [answer.body, { status: answer.status, statusText: '', headers: answer.headers }];
}

/**
 * The operation's variables with `after` set to the `Last-Event-ID` the client sent, unless it
 * set `after` itself. The document uses it where it declares `$after` (and passes it to a
 * subscription field's `after`); a value that is not a cursor's shape is left to that field,
 * which refuses it as it refuses any malformed cursor.
 */
function withLastEventId(
  variables: Record<string, unknown> | null | undefined,
  lastEventId: string | null | undefined,
): Record<string, unknown> | undefined {
  if (lastEventId == null || lastEventId === '') return variables ?? undefined;
  if (variables?.after !== undefined && variables.after !== null) return variables;
  return { ...variables, after: lastEventId };
}

/**
 * `message` with an SSE `id` line when it is a `next` carrying an event's cursor (the root field's
 * `cursor`, when the document selects it), so `EventSource` sends it back as `Last-Event-ID`.
 */
function withEventId(message: string): string {
  const prefix = 'event: next\ndata: ';
  if (!message.startsWith(prefix)) return message;
  try {
    const result = JSON.parse(message.slice(prefix.length)) as { data?: Record<string, unknown> | null };
    const root = result.data == null ? undefined : Object.values(result.data)[0];
    const cursor = (root as { cursor?: unknown } | null | undefined)?.cursor;
    return typeof cursor === 'string' && isCursor(cursor) ? `id: ${cursor}\n${message}` : message;
  } catch {
    return message;
  }
}
