/**
 * The table from upstream problem codes and statuses to GraphQL `extensions.code`
 * (documented in docs/errors.md; keep both in step).
 */
import { UnreachableCaseError } from '../unreachable-case-error.ts';

/** Every `extensions.code` the facade itself produces. */
export type FacadeErrorCode =
  | 'BAD_USER_INPUT'
  | 'BAD_REQUEST'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'IDEMPOTENCY_CONFLICT'
  | 'IDEMPOTENCY_REQUEST_IN_PROGRESS'
  | 'UNPROCESSABLE'
  | 'UPSTREAM_UNAVAILABLE'
  | 'TOO_MANY_UPSTREAM_CALLS'
  | 'UPSTREAM_TIMEOUT'
  | 'SHUTTING_DOWN'
  | 'TOO_MANY_SUBSCRIPTIONS'
  | 'CURSOR_EXPIRED'
  | 'INTERNAL_SERVER_ERROR';

/** The problem codes the spec and docs/upstream-assumptions.md name. The upstream catalog is open. */
export const KNOWN_PROBLEM_CODES = [
  'validation_error',
  'unauthorized',
  'forbidden',
  'not_found',
  'customer_not_found',
  'conflict',
  'idempotency_conflict',
  'idempotency_request_in_progress',
  'quote_already_executed',
  'invalid_capability',
  'internal_error',
  'request_failed',
  'method_not_allowed',
  'payload_too_large',
  'unsupported_media_type',
] as const;

export type KnownProblemCode = (typeof KNOWN_PROBLEM_CODES)[number];

const KNOWN = new Set<string>(KNOWN_PROBLEM_CODES);

function isKnownProblemCode(code: string): code is KnownProblemCode {
  return KNOWN.has(code);
}

/** The GraphQL code of an upstream problem: by its code when known, else by its status. */
export function errorCodeForProblem(problem: { code: string; status: number }): FacadeErrorCode {
  return isKnownProblemCode(problem.code)
    ? errorCodeForKnownProblem(problem.code)
    : errorCodeForStatus(problem.status);
}

function errorCodeForKnownProblem(code: KnownProblemCode): FacadeErrorCode {
  switch (code) {
    case 'validation_error':
      return 'BAD_USER_INPUT';
    case 'unauthorized':
      return 'UNAUTHENTICATED';
    case 'forbidden':
      return 'FORBIDDEN';
    case 'not_found':
    case 'customer_not_found':
      return 'NOT_FOUND';
    case 'conflict':
    case 'quote_already_executed':
      return 'CONFLICT';
    case 'idempotency_conflict':
      return 'IDEMPOTENCY_CONFLICT';
    case 'idempotency_request_in_progress':
      return 'IDEMPOTENCY_REQUEST_IN_PROGRESS';
    case 'invalid_capability':
      return 'UNPROCESSABLE';
    case 'request_failed':
      return 'UPSTREAM_UNAVAILABLE';
    case 'payload_too_large':
      // Only a caller's oversized input can make the facade send an oversized body.
      return 'BAD_USER_INPUT';
    case 'internal_error':
    case 'method_not_allowed':
    case 'unsupported_media_type':
      // The last two mean the facade built a wrong request: a fault on this side, not the caller's.
      return 'INTERNAL_SERVER_ERROR';
    default:
      throw new UnreachableCaseError(code);
  }
}

/** The GraphQL code for a problem code the facade does not know, by its HTTP status. */
export function errorCodeForStatus(status: number): FacadeErrorCode {
  if (status === 400) return 'BAD_USER_INPUT';
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 409) return 'CONFLICT';
  if (status === 422) return 'UNPROCESSABLE';
  if (status === 502 || status === 503 || status === 504) return 'UPSTREAM_UNAVAILABLE';
  if (status >= 400 && status < 500) return 'BAD_REQUEST';
  return 'INTERNAL_SERVER_ERROR';
}
