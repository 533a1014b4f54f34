/**
 * How many upstream calls one GraphQL operation may make. Depth and cost limits bound the shape of
 * a document, but a short one can still fan out (many aliased root fields, `_entities` with
 * thousands of representations); this bounds what one request can make the upstream do.
 */
import { UpstreamCallLimitError } from './errors.ts';

/**
 * Upstream calls (retries included) left to one operation, shared by all its loaders. An answer
 * of the response cache or of an event's shared reads spends from it as a call would (what an
 * operation may ask for does not depend on what happens to be cached); `sent` counts only the
 * requests that actually left for the upstream.
 */
export interface CallBudget {
  limit: number;
  remaining: number;
  /** Requests sent to the upstream, retries included: the calls the operation made. */
  sent: number;
  /** Told of each request sent (after `sent` counts it): the caller's upstream-calls budget. */
  onSent?: (() => void) | undefined;
  /** Asked before each request is sent; throws once the caller's upstream-calls budget is spent. */
  beforeSend?: (() => void) | undefined;
  /**
   * The pool shared with other budgets, when this one spends from one
   * ({@link createPooledCallBudget}): whether it is the pool or the own limit that ran out.
   */
  readonly pool?: CallBudget | undefined;
}

/** A fresh budget of `limit` calls for one operation (or one subscription event). */
export function createCallBudget(limit: number): CallBudget {
  return { limit, remaining: limit, sent: 0 };
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

/**
 * Lowers `budget` to at most `limit` calls in all (calls already made count against it). Used once
 * an operation's cost is known: an operation cannot need more upstream calls than it has fields.
 */
export function capCallBudget(budget: CallBudget, limit: number): void {
  if (limit >= budget.limit) return;
  budget.remaining = Math.max(0, budget.remaining - (budget.limit - limit));
  budget.limit = limit;
}

/**
 * A budget of `limit` calls that also spends from `pool`, shared by other budgets: a call is
 * refused once either is spent. One caller's subscriptions each get their own cost-derived budget
 * for an event and share one pool for it, so many subscriptions cannot multiply one event.
 */
export function createPooledCallBudget(limit: number, pool: CallBudget): CallBudget {
  const own = createCallBudget(limit);
  return {
    pool,
    get limit() {
      return own.limit;
    },
    set limit(value: number) {
      own.limit = value;
    },
    get remaining() {
      return Math.min(own.remaining, pool.remaining);
    },
    set remaining(value: number) {
      const spent = Math.min(own.remaining, pool.remaining) - value;
      own.remaining -= spent;
      pool.remaining = Math.max(0, pool.remaining - spent);
    },
    get sent() {
      return own.sent;
    },
    set sent(value: number) {
      pool.sent += value - own.sent;
      own.sent = value;
    },
  };
}
