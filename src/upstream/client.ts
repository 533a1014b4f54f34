/**
 * The one HTTP client of the upstream REST API: an undici pool with keep-alive and explicit
 * timeouts, JSON in and out, the v3 headers, problem+json parsing and bounded retries.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { Logger } from '../logger.ts';
import { cancelReasonOf } from './cancellation.ts';
import {
  UpstreamCancelledError,
  UpstreamProblemError,
  UpstreamUnavailableError,
  type UnavailableReason,
} from './errors.ts';
import { parseProblem } from './problem.ts';
import { authorizeUpstreamRequest, type UpstreamScope } from './access.ts';
import { spendCall, type CallBudget } from './call-budget.ts';
import {
  createResponseCache,
  type AnswerSources,
  freezeAnswerBody,
  staleReadsOfWrite,
  type CachedAnswer,
  type ResponseCache,
  type ResponseCacheConfig,
} from './response-cache.ts';
import { partitionOfKey } from './credentials.ts';
import { backoffDelayMs, isRetryable, type RetryBudget, type RetryConfig } from './retry.ts';
import { UPSTREAM_USER_AGENT } from './user-agent.ts';
import { CollectedExchange } from './collected-exchange.ts';
import type { UpstreamRequest } from './types.ts';
import type { EnvironmentKeys } from './environment-keys.ts';
import type { PlatformEnvironment } from '../events/event-types.ts';

export type { HttpMethod, UpstreamRequest } from './types.ts';

/** What a successful call returns. */
export interface UpstreamResponse {
  status: number;
  /** The parsed JSON body (undefined for an empty body). */
  body: unknown;
  /** The upstream answered `Idempotency-Replayed: true`. */
  replayed: boolean;
  /** The upstream's `X-Request-Id` answer header (its `correlationId`), when it sent one. */
  correlationId?: string;
}

/** Per-call facts that come from the GraphQL operation: see `UpstreamContext`. */
export interface UpstreamCall {
  /**
   * The key, read at each attempt (the facade's own key rotates); `partition` is what the response
   * cache keeps answers under (a digest of the key when absent); `configured` marks the facade's
   * own key.
   */
  readonly credentials: {
    readonly apiKey: string;
    readonly partition?: string;
    readonly configured?: boolean;
  };
  /** What the caller may reach: checked against every request before it is sent. */
  readonly scope: UpstreamScope;
  /** Who the calls are made for (the audit trail's actor); undefined for the facade's own work. */
  readonly actor?:
    { readonly subject: string; readonly client: string | null; readonly environment?: string } | undefined;
  readonly requestId: string;
  /** The facade's own id of the operation, for the audit trail (see `request-id.ts`). */
  readonly facadeRequestId?: string;
  /** The caller's own request id when it is `requestId`, for the audit trail. */
  readonly callerRequestId?: string | undefined;
  readonly retryBudget: RetryBudget;
  readonly callBudget: CallBudget;
  /** Aborted when the operation's deadline passes or the process shuts down: see `cancellation.ts`. */
  readonly signal?: AbortSignal;
  /**
   * GET answers this call may share with other operations that read alike (subscribers of one
   * event with the same key and scope); see {@link SharedReadCache}. Absent: every read is its own.
   */
  readonly readCache?: SharedReadCache;
  /** Ask the upstream even where the response cache holds an answer (and keep the new one). */
  readonly readThrough?: boolean;
  /**
   * Where the operation records the held answers it reads, and whether it read anything else, so
   * its whole result may be served again while they are current (`src/graph/answer-cache.ts`).
   */
  readonly answerSources?: AnswerSources;
}

/**
 * GET answers shared by operations that read alike, by path and query: one event's subscribers of
 * the same key and scope, who then see one answer for the event even if an invalidation arrives
 * while they read. A read found here costs no upstream request, but still one call of the
 * operation's own budget, so each operation's limits are what they would be alone. A failed read
 * is not kept. Below it, the process-wide {@link ResponseCache} keeps answers across operations.
 */
export type SharedReadCache = Map<string, Promise<UpstreamResponse>>;

export interface UpstreamClient {
  readonly retryPolicy: RetryConfig;
  /** Upstream calls one operation may make: the size of each operation's {@link CallBudget}. */
  readonly maxCallsPerOperation: number;
  /** `{docs_url}` of problem types, for answers the facade gives in the upstream's words. */
  readonly problemDocsUrl: string;
  /**
   * The GET answers kept across operations (`response-cache.ts`); undefined when switched off.
   * The event pipeline drops what each verified event makes stale; writes drop what they change.
   */
  readonly cache?: ResponseCache | undefined;
  /**
   * Sends `request`, retrying what may be retried.
   *
   * @throws {UpstreamProblemError} when the upstream answers with an error status.
   * @throws {UpstreamUnavailableError} when no usable answer arrives.
   * @throws {UpstreamCallLimitError} when the operation's call budget is spent (nothing is sent).
   * @throws {UpstreamAccessDeniedError} or a 404 {@link UpstreamProblemError} when the caller's
   *   scope does not allow the request (nothing is sent, no budget is spent).
   * @throws {UpstreamCancelledError} when `call.signal` is aborted (the call in flight is cancelled).
   */
  send(call: UpstreamCall, request: UpstreamRequest): Promise<UpstreamResponse>;
  /** Finishes in-flight calls (briefly), then closes every connection. */
  close(): Promise<void>;
}

/** How the facade reaches the upstream REST API. */
export interface UpstreamConfig {
  /** Origin (and optional path prefix, without a trailing slash) that `/v3/...` paths are appended to. */
  baseUrl: string;
  /**
   * The facade's own key as read at start, used when a caller does not send `X-API-Key`. Never
   * logged. The app reads it through a key source (`key-source.ts`), which `apiKeyFile` reloads.
   */
  apiKey: string;
  /** `UPSTREAM_API_KEY_FILE`: the file `apiKey` was read from, read again on SIGHUP and on change. */
  apiKeyFile?: string | undefined;
  /**
   * `UPSTREAM_API_KEY_SANDBOX` and `UPSTREAM_API_KEY_LIVE` (or their `*_FILE`), instead of
   * `UPSTREAM_API_KEY`: the key of each environment one deployment serves. Absent: one key.
   */
  environmentKeys?: EnvironmentKeys | undefined;
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** Maximum concurrent keep-alive connections to the upstream. */
  connections: number;
  /** Upstream calls (retries included) one GraphQL operation or subscription event may make. */
  maxCallsPerOperation: number;
  retry: RetryConfig;
  /**
   * `{docs_url}` of the upstream's problem types: a request refused for being outside the caller's
   * scope answers the upstream's own 404, `type` included.
   */
  problemDocsUrl: string;
  /** GET answers kept across operations (`CACHE_*`); absent or disabled: every read is sent. */
  cache?: ResponseCacheConfig;
}

export interface UpstreamClientOptions extends UpstreamConfig {
  logger: Logger;
  /** The environment whose key this client's calls carry (a key per environment), for log lines. */
  environment?: PlatformEnvironment | undefined;
  /** Told about every attempt and every finished call (metrics, the audit trail). */
  observer?: UpstreamObserver;
  /** Makes a trace span of every call when tracing is on; absent, nothing of tracing runs. */
  tracer?: UpstreamTracer;
}

/**
 * Traces upstream calls for `src/observability/tracing.ts`, so this layer needs no tracing library:
 * it asks for the headers that carry the trace and says when the call is over.
 */
export interface UpstreamTracer {
  /** Called when a call (authorised, about to be sent) starts. */
  startCall(call: UpstreamCall, request: UpstreamRequest): UpstreamCallTrace;
}

/** One traced call. */
export interface UpstreamCallTrace {
  /** Headers that carry the trace to the upstream (W3C `traceparent`), sent with every attempt. */
  readonly headers: Readonly<Record<string, string>>;
  /** Called once, after the last attempt (or when the call is cancelled between attempts). */
  end(report: UpstreamCallReport): void;
}

/** One attempt of an upstream call, as {@link UpstreamObserver.attempt} hears of it. */
export interface UpstreamAttemptReport {
  request: UpstreamRequest;
  /** 1 for the first attempt. */
  attempt: number;
  /** The answer's status; undefined when none arrived. */
  status: number | undefined;
  durationSeconds: number;
  /** Why the attempt failed (a problem code or a transport reason); undefined when it succeeded. */
  failure: string | undefined;
  /** The environment whose key the client sends, with a key per environment (a metrics label). */
  environment?: PlatformEnvironment;
}

/** A finished call (after its last attempt), as {@link UpstreamObserver.call} hears of it. */
export interface UpstreamCallReport {
  call: UpstreamCall;
  request: UpstreamRequest;
  attempts: number;
  /** The successful answer; undefined when the call failed. */
  response: UpstreamResponse | undefined;
  /** What the call threw; undefined when it succeeded. */
  error: unknown;
}

/**
 * Hooks for what watches upstream traffic without changing it. Called in line with the call: they
 * must be quick and must not throw (a throw is caught and ignored).
 */
export interface UpstreamObserver {
  attempt?(report: UpstreamAttemptReport): void;
  call?(report: UpstreamCallReport): void;
}

/** How long `close()` lets in-flight calls finish before connections are cut. */
const CLOSE_GRACE_MS = 1_000;

/**
 * The most bytes one upstream answer may have. Answers are collected whole, and a body's timeout
 * only bounds the wait between chunks: a body that streams without end (a broken upstream or proxy)
 * would otherwise grow in memory until the operation's deadline, gigabytes on a fast link. The
 * upstream's answers are JSON records and pages of them, far below this.
 */
export const MAX_UPSTREAM_ANSWER_BYTES = 32 * 1024 * 1024;

/** Builds the upstream client. Nothing connects until the first call. */
export function createUpstreamClient(options: UpstreamClientOptions): UpstreamClient {
  const base = new URL(options.baseUrl);
  const pool = new Pool(base.origin, {
    connections: options.connections,
    connectTimeout: options.connectTimeoutMs,
    headersTimeout: options.headersTimeoutMs,
    bodyTimeout: options.bodyTimeoutMs,
    keepAliveTimeout: 30_000,
    maxResponseSize: MAX_UPSTREAM_ANSWER_BYTES,
  });
  const logger = options.logger.child({
    component: 'upstream',
    ...(options.environment === undefined ? {} : { environment: options.environment }),
  });
  const sendOnce = createAttemptSender({
    pool,
    basePath: base.pathname.replace(/\/+$/, ''),
    logger,
    observer: options.observer,
    environment: options.environment,
  });
  const sendTraced = createRetryingSender({
    sendOnce,
    policy: options.retry,
    logger,
    observer: options.observer,
    tracer: options.tracer,
  });
  const responseCache =
    options.cache?.enabled === true
      ? createResponseCache({ maxAgeSeconds: options.cache.maxAgeSeconds, maxBytes: options.cache.maxBytes })
      : undefined;
  const read = createReader(responseCache, sendTraced);

  /**
   * A write. What it may change is dropped once it is over (in `finally`, so a read in flight
   * meanwhile is marked and keeps nothing) whenever it may have changed something: it succeeded, or
   * it failed in a way that may have reached the upstream (a timeout, a 5xx, a lost connection, a
   * cancellation, or a refusal after a retried attempt). A refusal the upstream answered to the
   * only attempt changed nothing, and drops nothing: a caller's failing writes cannot empty the
   * answers other callers are served.
   */
  async function write(call: UpstreamCall, request: UpstreamRequest): Promise<UpstreamResponse> {
    const progress = { attempts: 0 };
    let changedNothing = false;
    try {
      return withoutText(await sendTraced(call, request, progress));
    } catch (error) {
      changedNothing = progress.attempts === 1 && isRefusalWithoutChange(error);
      throw error;
    } finally {
      if (!changedNothing) responseCache?.invalidateWrite(staleReadsOfWrite(request.path, request.actingFor));
    }
  }

  // Not `async`: the read's or write's own promise is handed on (an async wrapper added one per
  // call and the ticks of resolving one promise with another); what throws still rejects.
  function sendChecked(call: UpstreamCall, request: UpstreamRequest): Promise<UpstreamResponse> {
    try {
      // The scope first: neither a held answer nor a write reaches what the caller may not.
      authorizeUpstreamRequest(call.scope, request, {
        requestId: call.requestId,
        problemDocsUrl: options.problemDocsUrl,
      });
      return request.method === 'GET' ? read(call, request) : write(call, request);
    } catch (error) {
      return rejectionOf(error);
    }
  }

  return {
    retryPolicy: options.retry,
    maxCallsPerOperation: options.maxCallsPerOperation,
    problemDocsUrl: options.problemDocsUrl,
    cache: responseCache,
    send(call, request) {
      const sent = sendChecked(call, request);
      const sources = call.answerSources;
      if (sources === undefined) return sent;
      // A write, or a failure (never kept, a 404 included), is nothing a held answer stands for.
      if (request.method !== 'GET') sources.complete = false;
      return sent.catch((error: unknown) => {
        sources.complete = false;
        throw error;
      });
    },
    async close() {
      const timer = setTimeout(() => void pool.destroy().catch(() => undefined), CLOSE_GRACE_MS);
      try {
        await pool.close();
      } catch {
        // Destroyed by the grace timer: nothing more to close.
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** A promise rejected with what was thrown, as an `async` function's would be. */
async function rejectionOf(error: unknown): Promise<never> {
  throw error;
}

/** Calls an observer hook; watching must never break a call. */
function observe(notify: () => void): void {
  try {
    notify();
  } catch {
    // Watching must never break a call.
  }
}

/** One attempt of a call: `(call, request, attempt, traceHeaders, apiKey)`. */
type AttemptSender = (
  call: UpstreamCall,
  request: UpstreamRequest,
  attempt: number,
  traceHeaders: Readonly<Record<string, string>> | undefined,
  apiKey: string,
) => Promise<SentResponse>;

/** A call with its retries (and its span, when tracing is on); `progress.attempts` counts attempts. */
type CallSender = (
  call: UpstreamCall,
  request: UpstreamRequest,
  progress?: { attempts: number },
) => Promise<SentResponse>;

/** Sends one attempt over `pool`: the v3 headers, the key, problem+json parsed into errors. */
function createAttemptSender(parts: {
  pool: Pool;
  basePath: string;
  logger: Logger;
  observer: UpstreamObserver | undefined;
  environment: PlatformEnvironment | undefined;
}): AttemptSender {
  const { pool, basePath, logger, observer } = parts;
  const labelled = parts.environment === undefined ? {} : { environment: parts.environment };
  return async (call, request, attempt, traceHeaders, apiKey) => {
    const headers: Record<string, string> = {
      ...traceHeaders,
      accept: 'application/json',
      'user-agent': UPSTREAM_USER_AGENT,
      'x-api-key': apiKey,
      'x-request-id': call.requestId,
    };
    if (request.idempotencyKey !== undefined) headers['idempotency-key'] = request.idempotencyKey;
    let payload: string | undefined;
    if (request.body !== undefined) {
      payload = JSON.stringify(request.body);
      headers['content-type'] = 'application/json';
    }

    const started = performance.now();
    const path = `${basePath}${request.path}${toQueryString(request.query)}`;
    let status: number | undefined;
    let failure: string | undefined;
    // Collected whole by one handler: no body stream, no promise but the answer's (see the module).
    const exchange = CollectedExchange.send(pool, {
      method: request.method,
      path,
      headers,
      body: payload,
      signal: call.signal,
    });
    try {
      const response = await exchange.response;
      status = response.statusCode;
      const text = response.text;
      if (status >= 400) {
        throw new UpstreamProblemError(
          parseProblem({
            status,
            contentType: headerValue(response.headers['content-type']),
            text,
            requestId: call.requestId,
            secrets: [apiKey],
          }),
        );
      }
      return {
        status,
        body: parseJsonBody(text, call.requestId),
        replayed: headerValue(response.headers['idempotency-replayed'])?.toLowerCase() === 'true',
        ...correlationIdOf(response.headers),
        text,
      };
    } catch (error) {
      // A body that failed after its headers: the attempt is reported with the status it had.
      status = exchange.statusCode;
      const upstreamError = call.signal?.aborted
        ? cancelled(call, error)
        : toUpstreamError(error, call.requestId);
      failure = describeFailure(upstreamError);
      throw upstreamError;
    } finally {
      if (observer?.attempt) {
        const durationSeconds = (performance.now() - started) / 1000;
        observe(() =>
          observer.attempt?.({ request, attempt, status, durationSeconds, failure, ...labelled }),
        );
      }
      // Never the headers: they hold the key.
      logger.debug('upstream call', {
        method: request.method,
        path: request.path,
        status: status ?? null,
        attempt,
        durationMs: Math.round(performance.now() - started),
        requestId: call.requestId,
      });
    }
  };
}

/** Sends a call's attempts, retrying what may be retried, under a span of its own when tracing is on. */
function createRetryingSender(parts: {
  sendOnce: AttemptSender;
  policy: RetryConfig;
  logger: Logger;
  observer: UpstreamObserver | undefined;
  tracer: UpstreamTracer | undefined;
}): CallSender {
  const { sendOnce, policy, logger, observer, tracer } = parts;

  /** Sends `request`, retrying what may be retried; `progress.attempts` counts attempts made. */
  async function sendWithRetries(
    call: UpstreamCall,
    request: UpstreamRequest,
    progress: { attempts: number },
    traceHeaders: Readonly<Record<string, string>> | undefined,
  ): Promise<SentResponse> {
    let resentWithNewKey = false;
    for (let attempt = 1; ; attempt++) {
      // Past the deadline (or in shutdown) nothing more is sent, retries included.
      if (call.signal?.aborted) throw cancelled(call);
      // The key current at this attempt: a retry after a rotation sends the new one.
      const apiKey = call.credentials.apiKey;
      // Every attempt is a call the upstream serves, so retries spend the budget too.
      try {
        spendCall(call.callBudget);
        call.callBudget.sent += 1;
        progress.attempts = attempt;
        const response = await sendOnce(call, request, attempt, traceHeaders, apiKey);
        if (observer?.call) {
          observe(() => observer.call?.({ call, request, attempts: attempt, response, error: undefined }));
        }
        return response;
      } catch (error) {
        // The old key refused just after a rotation (revoked while this call was on its way):
        // sent once more, at once, with the new one. A refused request changed nothing upstream,
        // and a write carries its Idempotency-Key, so this can only do the write once.
        if (!resentWithNewKey && isRefusedKey(error) && call.credentials.apiKey !== apiKey) {
          resentWithNewKey = true;
          logger.info('upstream key rotated during the call: sending it again with the new key', {
            method: request.method,
            path: request.path,
            attempt,
            requestId: call.requestId,
          });
          continue;
        }
        if (attempt >= policy.maxAttempts || !isRetryable(error) || call.retryBudget.remaining <= 0) {
          if (observer?.call) {
            observe(() => observer.call?.({ call, request, attempts: attempt, response: undefined, error }));
          }
          throw error;
        }
        call.retryBudget.remaining -= 1;
        const delayMs = backoffDelayMs(attempt, policy);
        logger.info('retrying upstream call', {
          method: request.method,
          path: request.path,
          attempt,
          delayMs,
          reason: describeFailure(error),
          requestId: call.requestId,
        });
        try {
          await sleep(delayMs, undefined, { signal: call.signal });
        } catch (sleepError) {
          throw cancelled(call, sleepError);
        }
      }
    }
  }

  // Without tracing, the retries' own promise is the call's: no wrapper around it.
  if (tracer === undefined) {
    return (call, request, progress = { attempts: 0 }) => sendWithRetries(call, request, progress, undefined);
  }
  return async (call, request, progress = { attempts: 0 }) => {
    const traced = tracer.startCall(call, request);
    try {
      const response = await sendWithRetries(call, request, progress, traced.headers);
      observe(() => traced.end({ call, request, attempts: progress.attempts, response, error: undefined }));
      return response;
    } catch (error) {
      observe(() => traced.end({ call, request, attempts: progress.attempts, response: undefined, error }));
      throw error;
    }
  };
}

/** GETs, through the event's shared reads and the response cache where there are any. */
function createReader(
  responseCache: ResponseCache | undefined,
  sendTraced: CallSender,
): (call: UpstreamCall, request: UpstreamRequest) => Promise<UpstreamResponse> {
  /**
   * A GET through the response cache: a held answer (or one being read for the same key) costs
   * one call of the budget and no request; a miss is sent and kept.
   */
  async function readCached(
    cache: ResponseCache,
    call: UpstreamCall,
    request: UpstreamRequest,
  ): Promise<UpstreamResponse> {
    let sent: SentResponse | undefined;
    const answer = await cache.read(
      {
        partition: call.credentials.partition ?? partitionOfKey(call.credentials.apiKey),
        path: request.path,
        query: toQueryString(request.query),
        readThrough: call.readThrough === true,
        signal: call.signal,
        sources: call.answerSources,
      },
      async () => {
        sent = await sendTraced(call, request);
        // Kept parsed: a hit then costs no JSON.parse (it was the largest cost of a hit).
        return { status: sent.status, text: sent.text, body: freezeAnswerBody(sent.body) };
      },
    );
    if (sent !== undefined) return withoutText(sent);
    spendCall(call.callBudget);
    return answerOf(answer, call.requestId);
  }

  return (call, request) => {
    const cache = responseCache?.isCacheable(request.path) === true ? responseCache : undefined;
    const send = (): Promise<UpstreamResponse> =>
      cache === undefined ? sendTraced(call, request).then(withoutText) : readCached(cache, call, request);
    const shared = call.readCache;
    // Read past the held answers (a path never kept, or one event's shared reads): none stands for it.
    if (call.answerSources !== undefined && (cache === undefined || shared !== undefined)) {
      call.answerSources.complete = false;
    }
    if (shared === undefined) return send();
    const key = `${request.path}${toQueryString(request.query)}`;
    const held = shared.get(key);
    if (held !== undefined) {
      spendCall(call.callBudget);
      return held;
    }
    const sending = send();
    shared.set(key, sending);
    // A failure may be the first operation's own (its deadline): the next one reads for itself.
    sending.catch(() => {
      if (shared.get(key) === sending) shared.delete(key);
    });
    return sending;
  };
}

/** A response as sent, with the body's text the response cache keeps. */
type SentResponse = UpstreamResponse & { readonly text: string };

function withoutText({ text: _text, ...response }: SentResponse): UpstreamResponse {
  return response;
}

/**
 * A held answer as a response of its own: its frozen parsed body, shared by every caller (none can
 * change it), or, for an answer held as text, the text parsed anew.
 */
function answerOf(answer: CachedAnswer, requestId: string): UpstreamResponse {
  const body = 'body' in answer ? answer.body : parseJsonBody(answer.text, requestId);
  return { status: answer.status, body, replayed: false };
}

function cancelled(call: UpstreamCall, cause?: unknown): UpstreamCancelledError {
  const reason = call.signal ? cancelReasonOf(call.signal) : 'deadline';
  return new UpstreamCancelledError(reason, call.requestId, { cause });
}

function toQueryString(query: UpstreamRequest['query']): string {
  if (query === undefined) return '';
  // Most reads give no parameter at all (a first page at the default size): no encoder for those.
  let any = false;
  for (const name in query) {
    if (query[name] !== undefined) {
      any = true;
      break;
    }
  }
  if (!any) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined) params.set(name, String(value));
  }
  const encoded = params.toString();
  return encoded === '' ? '' : `?${encoded}`;
}

function correlationIdOf(headers: Dispatcher.ResponseData['headers']): { correlationId?: string } {
  const value = headerValue(headers['x-request-id']);
  return value === undefined ? {} : { correlationId: value };
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function parseJsonBody(text: string, requestId: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UpstreamUnavailableError('invalid_response', requestId, { cause: error });
  }
}

/** Error codes of undici and of Node's sockets, by what they mean for the caller. */
const UNAVAILABLE_BY_CODE: Readonly<Record<string, UnavailableReason>> = {
  UND_ERR_CONNECT_TIMEOUT: 'connect_timeout',
  UND_ERR_HEADERS_TIMEOUT: 'headers_timeout',
  UND_ERR_BODY_TIMEOUT: 'body_timeout',
  UND_ERR_SOCKET: 'connection_reset',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  UND_ERR_CLOSED: 'connection_failed',
  UND_ERR_DESTROYED: 'connection_failed',
  ECONNREFUSED: 'connection_failed',
  ENOTFOUND: 'connection_failed',
  EAI_AGAIN: 'connection_failed',
  EHOSTUNREACH: 'connection_failed',
  ENETUNREACH: 'connection_failed',
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: 'invalid_response',
  // Past MAX_UPSTREAM_ANSWER_BYTES: the same request would get the same answer, so no retry.
  UND_ERR_RES_EXCEEDED_MAX_SIZE: 'invalid_response',
};

/** Leaves our own errors alone and turns transport failures into {@link UpstreamUnavailableError}. */
function toUpstreamError(error: unknown, requestId: string): unknown {
  if (
    error instanceof UpstreamProblemError ||
    error instanceof UpstreamUnavailableError ||
    error instanceof UpstreamCancelledError
  )
    return error;
  const code = (error as { code?: unknown } | null)?.code;
  const reason = typeof code === 'string' ? UNAVAILABLE_BY_CODE[code] : undefined;
  // Anything else (a bad argument, a bug) is not the upstream's fault and is left to be masked.
  return reason === undefined ? error : new UpstreamUnavailableError(reason, requestId, { cause: error });
}

/** A 401: the upstream did not accept the key the attempt was sent with. */
function isRefusedKey(error: unknown): boolean {
  return error instanceof UpstreamProblemError && error.status === 401;
}

/** A failure in words without ids: `503 service_unavailable`, `connect_timeout`, `unknown`. */
function describeFailure(error: unknown): string {
  if (error instanceof UpstreamProblemError) return `${error.status} ${error.code}`;
  if (error instanceof UpstreamUnavailableError) return error.reason;
  return 'unknown';
}

/**
 * Whether the upstream refused a write with a 4xx (its request was judged and turned down, nothing
 * done); a 408 says the request was not fully read, which is no such proof.
 */
function isRefusalWithoutChange(error: unknown): boolean {
  return (
    error instanceof UpstreamProblemError && error.status >= 400 && error.status < 500 && error.status !== 408
  );
}
