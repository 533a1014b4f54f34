/**
 * Retry policy of upstream calls: which failures are worth another attempt, how long to wait, and
 * how many retries one GraphQL operation may spend in all.
 */
import { UpstreamProblemError, UpstreamUnavailableError } from './errors.ts';

/** Retry policy of upstream calls. */
export interface RetryConfig {
  /** Attempts per upstream call, the first included (1 disables retries). */
  maxAttempts: number;
  /** Retries one GraphQL operation may spend across all its upstream calls. */
  budget: number;
  /** First backoff delay; each retry doubles it, with jitter, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

/**
 * Retries left to one GraphQL operation, shared by all its upstream calls, so a query fanning out to
 * many failing reads cannot multiply the load on an upstream that is already struggling.
 */
export interface RetryBudget {
  remaining: number;
}

/** A fresh budget for one operation. */
export function createRetryBudget(retries: number): RetryBudget {
  return { remaining: retries };
}

/** Statuses a proxy or gateway answers with while the service behind it recovers. */
const TRANSIENT_STATUSES = new Set([502, 503, 504]);

/**
 * Whether a failed call may be sent again unchanged. Effectful calls always carry an Idempotency-Key
 * and a retry reuses it, so a retried mutation can at worst replay the original result.
 */
export function isRetryable(error: unknown): boolean {
  if (error instanceof UpstreamUnavailableError) {
    // An unreadable answer is not transient: the same request would get the same answer. An open
    // circuit refused the call: it stays refused until a probe is answered, not a backoff later.
    return error.reason !== 'invalid_response' && error.reason !== 'circuit_open';
  }
  if (error instanceof UpstreamProblemError) {
    if (error.code === 'idempotency_request_in_progress') return true;
    return error.problem.retryable ?? TRANSIENT_STATUSES.has(error.status);
  }
  return false;
}

/**
 * The wait before retry number `retry` (1 for the first retry): exponential from `baseDelayMs`,
 * capped at `maxDelayMs`, with "equal jitter" (half fixed, half random) so that concurrent callers
 * spread out without any of them retrying immediately.
 */
export function backoffDelayMs(
  retry: number,
  policy: RetryConfig,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}
