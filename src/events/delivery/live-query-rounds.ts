/**
 * The rounds of a caller's live-query re-runs and their pools (`live-queries.ts`): one per
 * invalidation, one per refresh window, each a pool of `UPSTREAM_MAX_CALLS_PER_OPERATION` calls per
 * caller (the door's `eventCallBudget`, as one event's for a caller's subscriptions), and which
 * re-runs a round's pool takes in.
 */
import type { ExecutionResult } from 'graphql';
import { toGraphQLError } from '../../errors/to-graphql-error.ts';
import type { CallBudget } from '../../upstream/call-budget.ts';
import type { CallRound } from './live-query-groups.ts';

/** Live queries of this process (one per environment's runtime), each counting its invalidations. */
let listeners = 0;

/**
 * The rounds of one live-query listener's invalidations: the `count`th's. Numbered per listener, so
 * two environments' listeners, which share the door's pools, never name one round for two changes.
 */
export function invalidationRounds(): (count: number) => CallRound {
  const listener = (listeners += 1);
  // Its pool kept as long as a subscription event's (no window of its own).
  return (count) => ({ id: `live-query:invalidation:${listener}:${count}` });
}

/** The refresh window of `refreshMs` now: its refreshes share each caller's one pool. */
export function refreshRound(refreshMs: number): CallRound {
  return { id: `live-query:refresh:${Math.floor(Date.now() / refreshMs)}`, windowMs: refreshMs };
}

/** How long until the next refresh window of `refreshMs` begins (and with it a new pool). */
export function untilNextRefreshWindow(refreshMs: number): number {
  return refreshMs - (Date.now() % refreshMs);
}

/**
 * Which re-runs a round's pool takes in: one is let run while what the runs let in before it are
 * expected to spend (each its group's reads of its last run), and its own, fit in the pool. The
 * runs of a round start together and spend as their reads come back, so without this each would
 * spend part of the pool and most stop half-way, their calls wasted; with it the first ones in
 * (a group owed a run is scheduled first in its window) run whole and the rest wait, spending
 * nothing. The first run of a pool is always let in (`alone`), so a round always makes progress,
 * and one that still finds the pool spent met its own size, not the others' runs.
 */
export function createRoundAdmission(): (
  budget: CallBudget,
  expected: number,
) => 'alone' | 'shared' | 'refused' {
  const promised = new WeakMap<CallBudget, number>();
  return (budget, expected) => {
    const { pool } = budget;
    if (pool === undefined) return 'alone';
    const before = promised.get(pool) ?? 0;
    if (before > 0 && before + expected > pool.limit) return 'refused';
    promised.set(pool, before + expected);
    return before === 0 ? 'alone' : 'shared';
  };
}

/**
 * Whether a re-run stopped at its round's pool (the caller's other re-runs of the round spent it),
 * not at its own call limit, which an error result says to its watchers as for any query.
 */
export function poolSpent(result: ExecutionResult, budget: CallBudget): boolean {
  return (
    budget.pool !== undefined &&
    budget.pool.remaining <= 0 &&
    // Mapped as its watchers would be sent it: the result's errors are not mapped yet.
    (result.errors ?? []).some((error) => toGraphQLError(error).extensions.code === 'TOO_MANY_UPSTREAM_CALLS')
  );
}
