/**
 * What one upstream call is and what watches it: the types the client, its senders, its reader and
 * its circuit share, in a file of their own so that none of them imports the client that builds
 * them.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { UpstreamScope } from './access.ts';
import type { CallBudget } from './call-budget.ts';
import type { AnswerSources } from './answer-sources.ts';
import type { RetryBudget } from './retry.ts';
import type { UpstreamRequest } from './types.ts';

/** What a successful call returns. */
export interface UpstreamResponse {
  status: number;
  /** The parsed JSON body (undefined for an empty body). */
  body: unknown;
  /** The upstream answered `Idempotency-Replayed: true`. */
  replayed: boolean;
  /** The upstream's `X-Request-Id` answer header (its `correlationId`), when it sent one. */
  correlationId?: string;
  /**
   * Present when the response cache answered past its freshness because the upstream failed:
   * seconds since the answer was read from the upstream (stale-if-error).
   */
  staleAgeSeconds?: number;
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
  /** Where the operation records what it met of an outage: answers served stale, calls failed. */
  readonly degraded?: DegradedReads;
}

/**
 * GET answers shared by operations that read alike, by path and query: one event's subscribers of
 * the same key and scope, who then see one answer for the event even if an invalidation arrives
 * while they read. A read found here costs no upstream request, but still one call of the
 * operation's own budget, so each operation's limits are what they would be alone. A failed read
 * is not kept. Below it, the process-wide {@link ResponseCache} keeps answers across operations.
 */
export type SharedReadCache = Map<string, Promise<UpstreamResponse>>;

/** `closed`: calls go upstream; `open`: they fail at once; `half-open`: a probe is out. */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** A change of state, as the observer hears of it (metrics). */
export interface CircuitChange {
  /** Undefined for the state the circuit starts in. */
  readonly from: CircuitState | undefined;
  readonly to: CircuitState;
  /** The client's environment, with a key per environment. */
  readonly environment?: PlatformEnvironment;
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
  /** The circuit breaker changed state (and, once, the state it starts in). */
  circuit?(change: CircuitChange): void;
}

/**
 * What one operation met of an outage: the age of the oldest answer it was served past its
 * freshness, and whether any of its calls failed for the upstream. HTTP marks the first in its
 * answer (`extensions.stale`); live deliveries wait and read again on either.
 */
export interface DegradedReads {
  /** Seconds since the oldest answer served stale was read from the upstream; undefined: none. */
  staleAgeSeconds: number | undefined;
  /** A call failed for the upstream ({@link isUpstreamOutage}), whether or not a held answer stood in. */
  failed: boolean;
}

/** What the rest of the facade may ask of a client's circuit. */
export interface UpstreamCircuit {
  readonly state: CircuitState;
  /** Resolves once the circuit is closed (at once when it is), or when `signal` aborts. */
  whenClosed(signal?: AbortSignal): Promise<void>;
}
