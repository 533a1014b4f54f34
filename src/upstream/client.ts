/**
 * The one HTTP client of the upstream REST API: an undici pool with keep-alive and explicit
 * timeouts, JSON in and out, the v3 headers, problem+json parsing and bounded retries.
 */
import { Pool } from 'undici';
import type { Logger } from '../logger.ts';
import { createAttemptSender, observe } from './attempt-sender.ts';
import {
  createCircuitBreaker,
  createCircuitProbe,
  type CircuitConfig,
  type UpstreamCircuit,
} from './circuit-breaker.ts';
import { authorizeUpstreamRequest } from './access.ts';
import { createReader, withoutText } from './reader.ts';
import {
  createResponseCache,
  staleReadsOfWrite,
  type ResponseCache,
  type ResponseCacheConfig,
} from './response-cache.ts';
import type { RetryConfig } from './retry.ts';
import { createRetryingSender } from './retrying-sender.ts';
import { refusedCredentialOf, UpstreamProblemError } from './errors.ts';
import type { UpstreamRequest } from './types.ts';
import type { EnvironmentKeys } from './environment-keys.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';

export type { HttpMethod, UpstreamRequest } from './types.ts';
export type {
  SharedReadCache,
  UpstreamCall,
  UpstreamCallReport,
  UpstreamObserver,
  UpstreamResponse,
  UpstreamTracer,
} from './call.ts';
import type { UpstreamCall, UpstreamObserver, UpstreamResponse, UpstreamTracer } from './call.ts';

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
  /** The environment's circuit breaker (`circuit-breaker.ts`); absent on stand-ins of tests. */
  readonly circuit?: UpstreamCircuit;
  /**
   * Sends `request`, retrying what may be retried.
   *
   * @throws {UpstreamProblemError} when the upstream answers with an error status.
   * @throws {UpstreamUnavailableError} when no usable answer arrives, or the circuit is open
   *   (`circuit_open`: nothing is sent).
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
  /** `UPSTREAM_CIRCUIT_*`: the circuit breaker; absent, it never opens. */
  circuit?: CircuitConfig;
}

export interface UpstreamClientOptions extends UpstreamConfig {
  logger: Logger;
  /** The environment whose key this client's calls carry (a key per environment), for log lines. */
  environment?: PlatformEnvironment | undefined;
  /** Told about every attempt and every finished call (metrics, the audit trail). */
  observer?: UpstreamObserver;
  /** Makes a trace span of every call when tracing is on; absent, nothing of tracing runs. */
  tracer?: UpstreamTracer;
  /** The key the circuit's probe is sent with (the facade's own, read at each probe); default `apiKey`. */
  probeKey?: () => string;
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
  const circuit = createCircuitBreaker({
    config: options.circuit ?? { failures: 0, probeIntervalMs: 1_000 },
    probe: createCircuitProbe(sendOnce, options.probeKey ?? (() => options.apiKey)),
    logger,
    environment: options.environment,
    onChange: (change) => observe(() => options.observer?.circuit?.(change)),
  });
  const sendTraced = createRetryingSender({
    sendOnce,
    policy: options.retry,
    logger,
    observer: options.observer,
    tracer: options.tracer,
    circuit,
  });
  const responseCache =
    options.cache?.enabled === true
      ? createResponseCache({
          maxAgeSeconds: options.cache.maxAgeSeconds,
          maxBytes: options.cache.maxBytes,
          staleIfErrorSeconds: options.cache.staleIfErrorSeconds ?? 0,
        })
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
      // Refused before anything was sent (an open circuit, a spent budget), or answered with a refusal.
      changedNothing = progress.attempts === 0 || (progress.attempts === 1 && isRefusalWithoutChange(error));
      throw error;
    } finally {
      // Awaited: the answer leaves once the gateways' caches dropped what the write may have changed.
      if (!changedNothing)
        await responseCache?.invalidateWrite(staleReadsOfWrite(request.path, request.actingFor));
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
    circuit,
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
      circuit.close();
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

/**
 * Whether the upstream refused a write with a 4xx (its request was judged and turned down, nothing
 * done); a 408 says the request was not fully read, which is no such proof.
 */
function isRefusalWithoutChange(thrown: unknown): boolean {
  // The facade's own key refused (a 401): the upstream judged nothing else.
  const error = refusedCredentialOf(thrown) ?? thrown;
  return (
    error instanceof UpstreamProblemError && error.status >= 400 && error.status < 500 && error.status !== 408
  );
}
