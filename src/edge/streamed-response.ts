/**
 * What the live transports over one HTTP response (GraphQL over SSE, Apollo's multipart HTTP
 * subscriptions) share: one subscription per request, whose request is the door's connect (its
 * `Authorization` or `X-API-Key` header) and whose operation is the door's admission
 * (`live-connections.ts`), exactly as a graphql-ws `subscribe`; a refusal is the refusal table's
 * HTTP answer. Each protocol says only how its response is framed ({@link StreamFraming}) and which
 * requests it takes.
 *
 * The writer is the facade's own, for two reasons:
 * - **Backpressure.** One result is pulled from the subscription only once the previous one has
 *   been written out to the socket (`drain`), and nothing reads results ahead into a list: a
 *   reader that stops reading leaves its events in its bounded subscriber queue, whose overflow
 *   policy then applies (`SUBSCRIPTION_OVERFLOW`, then the end of the stream; docs/events.md),
 *   instead of the process buffering every event for it. A reader that takes no write for
 *   `LIVE_STALLED_WRITE_TIMEOUT_MS` is cut.
 * - **The cursor beside the result.** Each result made from an event carries the event's cursor
 *   in the framing (SSE's `id`, a multipart part's `extensions.cursor`), whatever the document
 *   selects, so a client that reconnects can resume from the event log where it stopped.
 */
import type { Request, Response, Router } from 'express';
import type { ExecutionResult } from 'graphql';
import { DIRECT, isDirectStream } from '../direct-delivery-contract.ts';
import type { CursorCodec } from '../events/log/cursor-codec.ts';
import { clientLabelOf } from '../observability/field-usage.ts';
import type { OperationRequest } from './door/door.ts';
import { requestCredentials, sendRefusal } from './http.ts';
import type {
  AttachedLiveTransport,
  LiveExecute,
  LiveTransportRules,
  LiveTransport,
  LiveTransportParts,
  LiveWriteLimits,
} from './live.ts';
import type { LiveOperation } from './live-connections.ts';
import { formattedResult, textOnce, type FormattedResult } from './live-results.ts';
import { isRefusal, refuse, type Refusal } from './refusal.ts';

/** How long a stream whose token expired has to send its error and end before it is cut. */
const EXPIRY_GRACE_MS = 1_000;

export type { FormattedResult } from './live-results.ts';

/** How one protocol writes a subscription's results into its response. */
export interface StreamFraming {
  /** The response headers of a stream. */
  readonly headers: Readonly<Record<string, string>>;
  /** Written as soon as the operation listens: some clients report the stream open only then. */
  readonly opening: string;
  /**
   * Written to a stream that wrote nothing for `heartbeatMs` (checked that often), so proxies keep
   * a quiet stream open; a stream that carries results needs none.
   */
  readonly heartbeat: string;
  readonly heartbeatMs: number;
  /**
   * One result, its errors already formatted. `cursor`: the event's place in the log when the
   * result was made from one; a result without one that has errors is a notice ending the
   * subscription (an overflow, an expired token or cursor).
   */
  result(result: FormattedResult, cursor: string | undefined): string;
  /** Written once the subscription completed, before the response ends. */
  readonly end: string;
  /**
   * Answers a subscription that ended before it listened (its one result: a scope or a cursor
   * refused at the start), instead of a stream with that one result. Absent: it is streamed.
   */
  answerUnstarted?(res: Response, result: FormattedResult): void;
}

/** A live transport over one streamed HTTP response. */
export interface StreamedTransport {
  readonly rules: LiveTransportRules;
  readonly framing: StreamFraming;
  /**
   * Routes the requests this transport takes to `serve` (a refusal the transport makes of its own,
   * such as a wrong `Accept`, is answered here).
   */
  mount(routes: Router, serve: (req: Request, res: Response, next: (error?: unknown) => void) => void): void;
}

/** A streamed transport as a kind of the live wing. */
export function streamedLiveTransport(transport: StreamedTransport): LiveTransport {
  return { rules: transport.rules, attach: (parts) => attachStreamed(parts, transport, parts.limits) };
}

function attachStreamed(
  parts: LiveTransportParts,
  transport: StreamedTransport,
  limits: LiveWriteLimits,
): AttachedLiveTransport {
  const { door, connections, logger } = parts;
  const { name } = transport.rules;
  const { framing } = transport;
  // The message of a result shared by many subscribers is the same for each of them: made once.
  const messageOf = textOnce((result) =>
    framing.result(formattedResult(result, parts), parts.cursorOf(result)),
  );
  const open = new Set<Response>();
  let draining = false;
  let nextOperation = 0;

  /** One request: the door's connect and admission, then the stream of its results. */
  const serve = async (req: Request, res: Response): Promise<void> => {
    if (draining) {
      sendRefusal(res, refuse('shutting-down', 'The server is shutting down.'));
      return;
    }
    const connection = await door.connect({
      credentials: requestCredentials(req),
      address: parts.addressOf(req),
      kind: 'live',
    });
    if (isRefusal(connection)) {
      logger.info(`refused an ${name} connection`, { refused: connection.refused });
      sendRefusal(res, connection);
      return;
    }
    const request = operationRequestOf(req);
    if (isRefusal(request)) {
      sendRefusal(res, request);
      return;
    }
    const resumeAfter = lastEventIdOf(req, connections.cursors(connection));
    if (isRefusal(resumeAfter)) {
      sendRefusal(res, resumeAfter);
      return;
    }
    // Once the token expires the subscription ends with an UNAUTHENTICATED error, which ends the
    // stream. A response not yet wholly written after a grace is cut: its reader stopped reading,
    // and an expired token holds neither its socket nor its place any longer.
    const live = connections.open(
      connection,
      () => {
        setTimeout(() => {
          if (!res.writableFinished) res.destroy();
        }, EXPIRY_GRACE_MS).unref();
      },
      clientLabelOf((header) => req.get(header)),
    );
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
    await stream(res, operation, parts, { framing, messageOf, stalledMs: limits.stalledWriteTimeoutMs });
  };

  transport.mount(parts.routes, (req, res, next) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) next(error);
      else {
        logger.error(`an ${name} stream failed`, { error });
        res.destroy();
      }
    });
  });

  return {
    activeConnections: () => open.size,
    async drain(timeoutMs) {
      draining = true;
      // The events runtime has ended every queue: each stream writes its last results and its
      // end. A reader that stopped reading cannot take them: it is cut.
      await connections.emptied(timeoutMs);
      for (const res of open) res.destroy();
      logger.info(`${name} drained`, { unfinished: connections.running() });
    },
  };
}

/** How one transport writes a stream: its framing, and each result's message (made once per result). */
interface StreamWriting {
  framing: StreamFraming;
  messageOf: (result: ExecutionResult) => string;
  stalledMs: number;
}

/**
 * Streams an admitted operation's results to `res`, one at a time: the next result is pulled only
 * once the previous one has left for the socket, so a reader that stops reading stops the pulls
 * and its events wait (bounded) in its subscriber queue. Results shared by many subscribers are
 * written as they are made (`direct-delivery.ts`), the rest through the loop below, in order.
 */
async function stream(
  res: Response,
  operation: LiveOperation,
  parts: LiveTransportParts,
  { framing, messageOf, stalledMs }: StreamWriting,
): Promise<void> {
  let result: Awaited<ReturnType<LiveExecute>>;
  try {
    result = await parts.execute(operation.args);
  } catch (error) {
    operation.completed();
    throw error;
  }
  if (!(Symbol.asyncIterator in result) && framing.answerUnstarted !== undefined) {
    operation.completed();
    framing.answerUnstarted(res, formattedResult(result, parts));
    return;
  }
  let wroteAt = performance.now();
  const write = (message: string): boolean | Promise<boolean> => {
    const written = send(res, message, stalledMs);
    wroteAt = performance.now();
    return written;
  };
  const results: AsyncIterator<ExecutionResult> = !(Symbol.asyncIterator in result)
    ? once(result)
    : isDirectStream<ExecutionResult>(result)
      ? result[DIRECT]((shared) => write(messageOf(shared)))
      : result[Symbol.asyncIterator]();
  res.writeHead(200, framing.headers);
  res.write(framing.opening);
  // Told once the operation listens (its queue subscribed, any replay read).
  operation.started();
  const heartbeat = setInterval(() => {
    // A stalled reader gets no heartbeat on top of what it already does not read, and an ended
    // response none at all (a write after the end is an error).
    const quiet = performance.now() - wroteAt >= framing.heartbeatMs;
    if (quiet && isWritable(res) && !res.writableNeedDrain) {
      res.write(framing.heartbeat);
      wroteAt = performance.now();
    }
  }, framing.heartbeatMs);
  // A client that goes stops the subscription at once, even while a result is awaited.
  const stop = (): void => void results.return?.();
  res.once('close', stop);
  try {
    for (let step = await results.next(); step.done !== true; step = await results.next()) {
      if (!(await write(messageOf(step.value)))) break;
    }
    await send(res, framing.end, stalledMs);
  } finally {
    clearInterval(heartbeat);
    res.off('close', stop);
    if (!isWritable(res)) await results.return?.();
    operation.completed();
    res.end();
  }
}

/**
 * Writes `message`: true when the response took it and can take more, false once the response is
 * closed (nothing more can be written), else a promise of one of the two once the socket took it
 * (`drain`). A reader that takes nothing for `stalledMs` has stopped reading: the stream is cut, so
 * it holds neither its socket nor its subscription slot while its queue's overflow notice could
 * never reach it anyway.
 */
function send(res: Response, message: string, stalledMs: number): boolean | Promise<boolean> {
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
 * The operation as the streaming clients send it: a GET's `query`, `operationName`, `variables`
 * and `extensions` in the URL (the last two as JSON), or a POST's JSON body (which may name a
 * trusted document by `documentId` instead). The door refuses a request that names no operation.
 */
export function operationRequestOf(req: Request): OperationRequest | Refusal {
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

/**
 * The log position of the `Last-Event-ID` the client sent back (a cursor this API gave the
 * caller's environment), or why it is refused: before the connection listens or reads anything.
 */
function lastEventIdOf(req: Request, cursors: CursorCodec): string | undefined | Refusal {
  const value = req.get('last-event-id');
  if (value === undefined || value === '') return undefined;
  const reading = cursors.decode(value);
  if (reading.kind === 'position') return reading.position;
  return refuse(
    'bad-input',
    cursors.refusal('Last-Event-ID', value, reading, "a cursor this API sent as an event's id"),
  );
}

function jsonParam(value: string | null): unknown {
  return value === null || value === '' ? undefined : JSON.parse(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
