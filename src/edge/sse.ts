/**
 * GraphQL over Server-Sent Events as a live transport of the door, at `/graphql/stream`: the
 * graphql-sse protocol's "distinct connections" mode (one subscription per request,
 * `Accept: text/event-stream`, a GET with the document in the URL or a POST with a JSON body), as
 * graphql-sse clients and `EventSource` speak it. The request is the door's connect (its
 * `Authorization` or `X-API-Key` header), its operation the door's admission
 * (`live-connections.ts`), exactly as a graphql-ws `subscribe`; a refusal is the refusal table's
 * HTTP answer. SSE serves subscriptions only.
 *
 * The writer is the facade's own, not graphql-sse's handler, for two reasons:
 * - **Backpressure.** One result is pulled from the subscription only once the previous one has
 *   been written out to the socket (`drain`), and nothing reads results ahead into a list: a
 *   reader that stops reading leaves its events in its bounded subscriber queue, whose overflow
 *   policy then applies (`SUBSCRIPTION_OVERFLOW`, then `complete`; docs/events.md), instead of
 *   the process buffering every event for it.
 * - **The cursor beside the result.** Each `next` made from an event carries the event's cursor as
 *   its SSE `id`, whatever the document selects, so a client (an `EventSource`) that reconnects
 *   sends it back as `Last-Event-ID` and resumes from the event log where it stopped, without the
 *   document declaring `$after`.
 */
import type { Request, Response } from 'express';
import { OperationTypeNode, type ExecutionResult } from 'graphql';
import { cursorOf, subscribeWithEventContexts } from '../events/delivery/execute-live-event.ts';
import { isCursor } from '../events/log/event-log.ts';
import type { OperationRequest, TransportRules } from './door.ts';
import { sendRefusal } from './http.ts';
import type { AttachedLiveTransport, LiveTransport, LiveTransportParts, LiveWriteLimits } from './live.ts';
import type { LiveOperation } from './live-connections.ts';
import { isRefusal, refuse, type Refusal } from './refusal.ts';

/** SSE serves subscriptions; a query or mutation is refused with `wrong-transport`. */
const SSE_TRANSPORT: TransportRules = {
  name: 'sse',
  serves: new Set([OperationTypeNode.SUBSCRIPTION]),
  elsewhere:
    'Queries and mutations are served over HTTP (POST /graphql); GraphQL over SSE serves subscriptions only.',
};

/** Where the transport is mounted. */
const SSE_PATH = '/graphql/stream';

/** How long a stream whose token expired has to send its error and complete before it is ended. */
const EXPIRY_GRACE_MS = 1_000;

/** A comment line every so often keeps proxies from closing a quiet stream (graphql-sse's interval). */
const KEEP_ALIVE_MS = 12_000;

/** The response headers of a stream, as graphql-sse sends them. */
const STREAM_HEADERS = {
  connection: 'keep-alive',
  'cache-control': 'no-cache',
  'content-encoding': 'none',
  'content-type': 'text/event-stream; charset=utf-8',
};

/** GraphQL over SSE as a live transport. */
export function serverSentEvents(limits: LiveWriteLimits): LiveTransport {
  return { rules: SSE_TRANSPORT, attach: (parts) => attachServerSentEvents(parts, limits) };
}

function attachServerSentEvents(parts: LiveTransportParts, limits: LiveWriteLimits): AttachedLiveTransport {
  const { door, connections, logger } = parts;
  const open = new Set<Response>();
  let draining = false;
  let nextOperation = 0;

  /** One request: the door's connect and admission, then the stream of its results. */
  const serve = async (req: Request, res: Response): Promise<void> => {
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
    if (draining) {
      sendRefusal(res, refuse('shutting-down', 'The server is shutting down.'));
      return;
    }
    const connection = await door.connect({
      credentials: { authorization: req.get('authorization'), apiKey: req.get('x-api-key') },
      address: parts.addressOf(req),
      kind: 'live',
    });
    if (isRefusal(connection)) {
      logger.info(`refused an ${SSE_TRANSPORT.name} connection`, { refused: connection.refused });
      sendRefusal(res, connection);
      return;
    }
    const request = operationRequestOf(req);
    if (isRefusal(request)) {
      sendRefusal(res, request);
      return;
    }
    const resumeAfter = lastEventIdOf(req);
    if (isRefusal(resumeAfter)) {
      sendRefusal(res, resumeAfter);
      return;
    }
    // Once the token expires the subscription ends with an UNAUTHENTICATED error, which completes
    // the stream. A response not yet wholly written after a grace is cut: its reader stopped
    // reading, and an expired token holds neither its socket nor its place any longer.
    const live = connections.open(connection, () => {
      setTimeout(() => {
        if (!res.writableFinished) res.destroy();
      }, EXPIRY_GRACE_MS).unref();
    });
    open.add(res);
    // A socket error (a reset, a write the peer will never read) ends this stream, never the process.
    res.on('error', () => res.destroy());
    res.once('close', () => {
      open.delete(res);
      live.close();
    });
    nextOperation += 1;
    const operation = await live.admit(String(nextOperation), request, () => isWritable(res), resumeAfter);
    if (isRefusal(operation)) {
      sendRefusal(res, operation);
      return;
    }
    await stream(res, operation, parts, limits);
  };

  parts.routes.use(SSE_PATH, (req, res, next) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) next(error);
      else {
        logger.error('an SSE stream failed', { error });
        res.destroy();
      }
    });
  });

  return {
    activeConnections: () => open.size,
    async drain(timeoutMs) {
      draining = true;
      // The events runtime has ended every queue: each stream writes its last results and
      // `complete`, then ends. A reader that stopped reading cannot take them: it is cut.
      await connections.emptied(timeoutMs);
      for (const res of open) res.destroy();
      logger.info(`${SSE_TRANSPORT.name} drained`, { unfinished: connections.running() });
    },
  };
}

/**
 * Streams an admitted operation's results to `res`, one at a time: the next result is pulled only
 * once the previous one has left for the socket, so a reader that stops reading stops the pulls
 * and its events wait (bounded) in its subscriber queue.
 */
async function stream(
  res: Response,
  operation: LiveOperation,
  parts: LiveTransportParts,
  limits: LiveWriteLimits,
): Promise<void> {
  let result: Awaited<ReturnType<typeof subscribeWithEventContexts>>;
  try {
    result = await subscribeWithEventContexts(operation.args);
  } catch (error) {
    operation.completed();
    throw error;
  }
  const results: AsyncIterator<ExecutionResult> =
    Symbol.asyncIterator in result ? result[Symbol.asyncIterator]() : once(result);
  res.writeHead(200, STREAM_HEADERS);
  // A first byte: some browsers (Firefox, Safari) wait for one before they report the stream open.
  res.write(':\n\n');
  // Told once the operation listens (its queue subscribed, any replay read).
  operation.started();
  const keepAlive = setInterval(() => {
    // A stalled reader gets no comment lines on top of what it already does not read, and an
    // ended response none at all (a write after the end is an error).
    if (isWritable(res) && !res.writableNeedDrain) res.write(':\n\n');
  }, KEEP_ALIVE_MS);
  // A client that goes stops the subscription at once, even while a result is awaited.
  const stop = (): void => void results.return?.();
  res.once('close', stop);
  try {
    for (let step = await results.next(); step.done !== true; step = await results.next()) {
      if (!(await send(res, nextMessage(step.value, parts), limits.stalledWriteTimeoutMs))) break;
    }
    await send(res, 'event: complete\ndata:\n\n', limits.stalledWriteTimeoutMs);
  } finally {
    clearInterval(keepAlive);
    res.off('close', stop);
    if (!isWritable(res)) await results.return?.();
    operation.completed();
    res.end();
  }
}

/** A `next` message: the event's cursor as its SSE `id` when the result was made from one. */
function nextMessage(result: ExecutionResult, parts: LiveTransportParts): string {
  const cursor = cursorOf(result);
  // The same formatting as HTTP and graphql-ws: no internal message leaks here either.
  const formatted =
    result.errors === undefined
      ? result
      : { ...result, errors: result.errors.map((error) => parts.formatError(error.toJSON(), error)) };
  const id = cursor === undefined ? '' : `id: ${cursor}\n`;
  return `${id}event: next\ndata: ${JSON.stringify(formatted)}\n\n`;
}

/**
 * Writes `message`, then waits until the socket has taken it (`drain`) when the response's buffer
 * is full; false once the response is closed (nothing more can be written). A reader that takes
 * nothing for `stalledMs` has stopped reading: the stream is cut, so it holds neither its socket
 * nor its subscription slot while its queue's overflow notice could never reach it anyway.
 */
async function send(res: Response, message: string, stalledMs: number): Promise<boolean> {
  if (!isWritable(res)) return false;
  if (res.write(message)) return true;
  return new Promise((resolve) => {
    const stalled = setTimeout(() => res.destroy(), stalledMs);
    const settle = (written: boolean) => () => {
      clearTimeout(stalled);
      res.off('drain', drained);
      res.off('close', closed);
      resolve(written);
    };
    const drained = settle(true);
    const closed = settle(false);
    res.once('drain', drained);
    res.once('close', closed);
  });
}

function isWritable(res: Response): boolean {
  return !res.writableEnded && !res.destroyed;
}

/** One result as an iterator (a subscription refused when it started: a scope, a cursor). */
function once(result: ExecutionResult): AsyncIterator<ExecutionResult> {
  let done = false;
  return {
    next: async () => {
      if (done) return { done: true, value: undefined };
      done = true;
      return { done: false, value: result };
    },
  };
}

/**
 * The operation as graphql-sse clients send it: a GET's `query`, `operationName`, `variables` and
 * `extensions` in the URL (the last two as JSON), or a POST's JSON body (which may name a trusted
 * document by `documentId` instead). The door refuses a request that names no operation.
 */
function operationRequestOf(req: Request): OperationRequest | Refusal {
  let params: Record<string, unknown>;
  if (req.method === 'GET') {
    const search = new URLSearchParams(req.originalUrl.split('?', 2)[1] ?? '');
    try {
      params = {
        query: search.get('query') ?? undefined,
        documentId: search.get('documentId') ?? undefined,
        operationName: search.get('operationName') ?? undefined,
        variables: jsonParam(search.get('variables')),
        extensions: jsonParam(search.get('extensions')),
      };
    } catch {
      return refuse('parse-failed', 'The URL\'s "variables" or "extensions" is not JSON.');
    }
  } else if (req.method === 'POST' && isRecord(req.body)) {
    params = req.body;
  } else {
    return refuse('parse-failed', 'Send the operation in a POST with a JSON object body, or in a GET URL.');
  }
  const { query, documentId, id, operationName, variables, extensions } = params;
  if (query != null && typeof query !== 'string') return refuse('parse-failed', '"query" must be a string.');
  if (operationName != null && typeof operationName !== 'string') {
    return refuse('parse-failed', '"operationName" must be a string.');
  }
  if (variables != null && !isRecord(variables))
    return refuse('parse-failed', '"variables" must be an object.');
  if (extensions != null && !isRecord(extensions)) {
    return refuse('parse-failed', '"extensions" must be an object.');
  }
  return { query, documentId, id, operationName, variables, extensions };
}

/** The `Last-Event-ID` the client sent back (a cursor this API gave it), or why it is refused. */
function lastEventIdOf(req: Request): string | undefined | Refusal {
  const value = req.get('last-event-id');
  if (value === undefined || value === '') return undefined;
  if (isCursor(value)) return value;
  return refuse(
    'bad-input',
    `"Last-Event-ID" must be a cursor this API sent as an event's id, got ${JSON.stringify(value.slice(0, 64))}.`,
  );
}

function jsonParam(value: string | null): unknown {
  return value === null || value === '' ? undefined : JSON.parse(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
