/**
 * How many upstream calls one GraphQL operation may make. Depth and cost limits bound the shape of
 * a document, but a short one can still fan out (many aliased root fields, `_entities` with
 * thousands of representations); this bounds what one request can make the upstream do.
 */
import { UpstreamCallLimitError } from './errors.ts';

/** Upstream calls (retries included) left to one operation, shared by all its loaders. */
export interface CallBudget {
  readonly limit: number;
  remaining: number;
}

/** A fresh budget of `limit` calls for one operation (or one subscription event). */
export function createCallBudget(limit: number): CallBudget {
  return { limit, remaining: limit };
}

/**
 * Takes one call from `budget`.
 *
 * @throws {UpstreamCallLimitError} when the operation has made `limit` calls already.
 */
export function spendCall(budget: CallBudget): void {
  if (budget.remaining <= 0) throw new UpstreamCallLimitError(budget.limit);
  budget.remaining -= 1;
}
