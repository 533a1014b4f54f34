/**
 * The ways an upstream call fails. Nothing here knows GraphQL: errors/ turns these into GraphQL
 * errors. Neither error ever carries an API key.
 */
import { UnreachableCaseError } from '../unreachable-case-error.ts';
import type { CancelReason } from './cancellation.ts';
import type { Problem } from './types.ts';

/** The upstream answered with an error status; `problem` is its problem+json body, whole. */
export class UpstreamProblemError extends Error {
  readonly problem: Problem;

  constructor(problem: Problem) {
    super(problem.detail || problem.title);
    this.name = 'UpstreamProblemError';
    this.problem = problem;
  }

  get status(): number {
    return this.problem.status;
  }

  get code(): string {
    return this.problem.code;
  }
}

/** The operation has made as many upstream calls as one operation may; no call was sent. */
export class UpstreamCallLimitError extends Error {
  /** Calls one operation may make (`UPSTREAM_MAX_CALLS_PER_OPERATION`). */
  readonly limit: number;

  constructor(
    limit: number,
    message = `This operation needs more than ${limit} upstream calls, the most one operation may make. ` +
      'Ask for less in one operation: fewer aliased fields, representations or pages.',
  ) {
    super(message);
    this.name = 'UpstreamCallLimitError';
    this.limit = limit;
  }
}

/**
 * The caller's budget of upstream calls for the window (`RATE_LIMIT_UPSTREAM_CALLS`) ran out while
 * the operation ran: its calls not yet sent are not sent (mapped as {@link UpstreamCallLimitError}).
 */
export class UpstreamCallBudgetSpentError extends UpstreamCallLimitError {
  /** Seconds until the window ends and the budget is whole again. */
  readonly retryAfterSeconds: number;

  constructor(retryAfterSeconds: number) {
    super(
      0,
      `The upstream calls this caller may make in this window are spent; try again in ${retryAfterSeconds} s.`,
    );
    this.name = 'UpstreamCallBudgetSpentError';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * An id that is not of the plain form of upstream ids (`rest-path.ts`) was about to become part of
 * an upstream path: nothing was sent. `id` is the value as given; errors/ says where it came from.
 */
export class UnsafeIdError extends Error {
  readonly id: string;

  constructor(id: string) {
    super('An id may hold only letters, digits, "_" and "-" (1 to 128 characters).');
    this.name = 'UnsafeIdError';
    this.id = id;
  }
}

/** Why a request was refused before it was sent; see `access.ts`. For logs, never for the caller. */
export type AccessDeniedReason =
  | 'anonymous'
  | 'operator_only'
  | 'unproven_customer'
  | 'no_rule'
  /** The path would read differently once decoded or normalised (see `access.ts`). */
  | 'unsafe_path'
  /** A sandbox simulation asked by a caller bound to the live environment. */
  | 'live_environment';

/** The caller may not send this request (platform-wide, or no rule allows it); nothing was sent. */
export class UpstreamAccessDeniedError extends Error {
  readonly reason: AccessDeniedReason;

  /** `message`: what the caller reads, where the rule met tells a prober nothing it does not know. */
  constructor(reason: AccessDeniedReason, message = 'You are not allowed to do this.') {
    super(message);
    this.name = 'UpstreamAccessDeniedError';
    this.reason = reason;
  }
}

/**
 * The operation's signal was aborted (its deadline passed, or the process is shutting down): the
 * call in flight was cancelled, or none was sent. Never retried. An effectful call that was
 * cancelled may have been executed: its idempotency key tells the caller how to find out.
 */
export class UpstreamCancelledError extends Error {
  readonly reason: CancelReason;
  /** The X-Request-Id the cancelled call was (or would have been) sent with. */
  readonly requestId: string;

  constructor(reason: CancelReason, requestId: string, options?: { cause?: unknown }) {
    super(
      reason === 'deadline'
        ? 'The operation ran out of time before the upstream API answered.'
        : 'The facade is shutting down; send the request again.',
      options,
    );
    this.name = 'UpstreamCancelledError';
    this.reason = reason;
    this.requestId = requestId;
  }
}

/** Why no usable upstream answer arrived. */
export type UnavailableReason =
  | 'connect_timeout'
  | 'headers_timeout'
  | 'body_timeout'
  | 'connection_failed'
  | 'connection_reset'
  | 'invalid_response'
  /** The environment's circuit is open (`circuit-breaker.ts`): nothing was sent. */
  | 'circuit_open'
  /**
   * The upstream refused the facade's own key (a 401 to a call made with it): the facade's outage,
   * not the caller's refusal. The upstream did nothing; the cause is the refusal it answered.
   */
  | 'credential_refused';

/** The upstream could not be reached, did not answer in time, or answered with something unreadable. */
export class UpstreamUnavailableError extends Error {
  readonly reason: UnavailableReason;
  /** The X-Request-Id the failed call was sent with. */
  readonly requestId: string;

  constructor(reason: UnavailableReason, requestId: string, options?: { cause?: unknown }) {
    super(describeUnavailableReason(reason), options);
    this.name = 'UpstreamUnavailableError';
    this.reason = reason;
    this.requestId = requestId;
  }
}

/** A one-line, key-free description of an {@link UnavailableReason}. */
export function describeUnavailableReason(reason: UnavailableReason): string {
  switch (reason) {
    case 'connect_timeout':
      return 'The upstream API did not accept a connection in time.';
    case 'headers_timeout':
      return 'The upstream API did not answer in time.';
    case 'body_timeout':
      return 'The upstream API stopped sending its answer.';
    case 'connection_failed':
      return 'The upstream API could not be reached.';
    case 'connection_reset':
      return 'The connection to the upstream API was closed before it answered.';
    case 'invalid_response':
      return 'The upstream API sent an answer that could not be read.';
    case 'circuit_open':
      return 'The upstream API is failing: nothing was sent. Retry shortly; the facade probes it and sends calls again once it answers.';
    case 'credential_refused':
      // Nothing of the key: which one, its prefix or why the upstream refused it is the operators'.
      return "The upstream API refused this service's own credential: nothing was done. Retry shortly; the service works again once its operators replace the credential.";
    default:
      throw new UnreachableCaseError(reason);
  }
}

/**
 * The upstream's refusal of the facade's own key in `error`, when that is what it is (an
 * {@link UpstreamUnavailableError} `credential_refused`): the 401 problem it answered, which did
 * nothing upstream.
 */
export function refusedCredentialOf(error: unknown): UpstreamProblemError | undefined {
  if (!(error instanceof UpstreamUnavailableError) || error.reason !== 'credential_refused') return undefined;
  return error.cause instanceof UpstreamProblemError ? error.cause : undefined;
}
