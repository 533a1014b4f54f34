/**
 * One attempt of an upstream call over the pool: the v3 headers, the key read at this attempt,
 * the answer collected whole, problem+json parsed into errors and transport failures named.
 */
import type { Dispatcher, Pool } from 'undici';
import type { Logger } from '../logger.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import { cancelReasonOf } from './cancellation.ts';
import type { UpstreamCall, UpstreamObserver, UpstreamResponse } from './call.ts';
import { CollectedExchange } from './collected-exchange.ts';
import {
  UpstreamCancelledError,
  UpstreamProblemError,
  UpstreamUnavailableError,
  type UnavailableReason,
} from './errors.ts';
import { parseProblem } from './problem.ts';
import type { UpstreamRequest } from './types.ts';
import { UPSTREAM_USER_AGENT } from './user-agent.ts';

/** A response as sent, with the body's text the response cache keeps. */
export type SentResponse = UpstreamResponse & { readonly text: string };

/** One attempt of a call: `(call, request, attempt, traceHeaders, apiKey)`. */
export type AttemptSender = (
  call: UpstreamCall,
  request: UpstreamRequest,
  attempt: number,
  traceHeaders: Readonly<Record<string, string>> | undefined,
  apiKey: string,
) => Promise<SentResponse>;

/** Sends one attempt over `pool`: the v3 headers, the key, problem+json parsed into errors. */
export function createAttemptSender(parts: {
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

/** Calls an observer hook; watching must never break a call. */
export function observe(notify: () => void): void {
  try {
    notify();
  } catch {
    // Watching must never break a call.
  }
}

/** The cancellation of `call` (its deadline, or the shutdown), with what caused it. */
export function cancelled(call: UpstreamCall, cause?: unknown): UpstreamCancelledError {
  const reason = call.signal ? cancelReasonOf(call.signal) : 'deadline';
  return new UpstreamCancelledError(reason, call.requestId, { cause });
}

/** `query` encoded with its `?`, or empty when it holds no value. */
export function toQueryString(query: UpstreamRequest['query']): string {
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

/** An answer's JSON body (undefined when empty); an unreadable one is `invalid_response`. */
export function parseJsonBody(text: string, requestId: string): unknown {
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

/** A failure in words without ids: `503 service_unavailable`, `connect_timeout`, `unknown`. */
export function describeFailure(error: unknown): string {
  if (error instanceof UpstreamProblemError) return `${error.status} ${error.code}`;
  if (error instanceof UpstreamUnavailableError) return error.reason;
  return 'unknown';
}
