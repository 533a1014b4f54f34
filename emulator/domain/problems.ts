/**
 * The domain's failures, phrased once. Every 404, 409 and 422 the handlers throw comes from
 * here, so the same situation always carries the same code, statusReason and wording.
 */
import { conflict, ProblemError, validationError } from '../http/problem.ts';
import type { BlockingResource, FieldError } from '../http/problem.ts';

/** 404 `not_found` for a resource that does not exist in this environment (or not under this parent). */
export function notFound(noun: string, id: string): ProblemError {
  return new ProblemError(404, 'not_found', `No ${noun} with id ${id} exists.`);
}

/** 404 `customer_not_found`, where the spec names that code for an unknown parent customer. */
export function customerNotFound(customerId: string): ProblemError {
  return new ProblemError(404, 'customer_not_found', `No customer with id ${customerId} exists.`);
}

/** 409 `conflict` caused by the developer's request against the current state (not retryable as is). */
export function stateConflict(
  code: string,
  detail: string,
  extras: { blockingResources?: BlockingResource[] } = {},
): ProblemError {
  return conflict(detail, { code, message: detail, actor: 'developer', retryable: false }, extras);
}

/** 400 `validation_error` for one or more body fields the schema alone cannot judge. */
export function invalidFields(errors: FieldError[]): ProblemError {
  return validationError(errors);
}

/** 422 `invalid_capability`, listing the capabilities that could satisfy the request instead. */
export function invalidCapability(detail: string, alternatives: string[]): ProblemError {
  // `capabilities` has at least one item when present, so it is left out when nothing qualifies.
  return new ProblemError(
    422,
    'invalid_capability',
    detail,
    alternatives.length > 0 ? { capabilities: alternatives } : {},
  );
}

/** 409 `quote_already_executed`, naming the transfer that consumed the quote. */
export function quoteAlreadyExecuted(quoteId: string, transferId: string): ProblemError {
  return new ProblemError(
    409,
    'quote_already_executed',
    `Quote ${quoteId} was already executed by transfer ${transferId}; read that transfer instead.`,
    { transferId },
  );
}

export type { FieldError };
