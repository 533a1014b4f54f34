/**
 * What the door keeps per caller while operations run: the `hold` step (each caller's running
 * long-lived operations, over every connection and live transport, capped) and the pools of
 * upstream calls an event's executions share (see {@link EventCallPools}).
 */
import { createCallBudget, createPooledCallBudget, type CallBudget } from '../../upstream/call-budget.ts';
import type { RateKey } from '../rate-limits.ts';
import { refuse, type Refusal } from '../refusal.ts';
import type { Connection, TransportRules } from './door.ts';
import type { EventCallPools } from './audiences.ts';

/** The `hold` step: each caller's running long-lived operations, over every connection and transport. */
export function createOperationHolds(
  max: number | undefined,
  callerKey: (connection: Connection) => RateKey,
) {
  const runningBySubject = new Map<string, number>();
  return {
    /** Holds one operation until the returned release is called; a refusal at the cap. */
    hold(connection: Connection, transport: TransportRules): (() => void) | Refusal {
      const subject = callerKey(connection);
      const running = runningBySubject.get(subject) ?? 0;
      if (max !== undefined && running >= max) {
        return refuse(
          'too-many-operations',
          `This caller already runs ${max} operations over ${transport.name} and the other live transports together, the most allowed; complete one before starting another.`,
        );
      }
      runningBySubject.set(subject, running + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (runningBySubject.get(subject) ?? 1) - 1;
        if (left <= 0) runningBySubject.delete(subject);
        else runningBySubject.set(subject, left);
      };
    },
  };
}

/** How long an event's pool of upstream calls is kept for a caller's subscriptions. */
const EVENT_POOL_WINDOW_MS = 10_000;

/** Each caller's pool of upstream calls per event: see {@link EventCallPools.eventCallBudget}. */
export function createEventCallPools(
  maxCallsPerOperation: number,
  now: () => number,
  callerKey: (connection: Connection) => RateKey,
): EventCallPools {
  const pools = new Map<string, { pool: CallBudget; expiresAt: number }>();
  return {
    eventCallBudget(connection, eventId, callLimit, windowMs = EVENT_POOL_WINDOW_MS) {
      const at = now();
      // In creation order, so the expired ones are mostly at the front (a longer window, a live
      // query's refresh round, may hold a few behind it until it expires too).
      for (const [key, entry] of pools) {
        if (entry.expiresAt > at) break;
        pools.delete(key);
      }
      const key = JSON.stringify([callerKey(connection), eventId]);
      let entry = pools.get(key);
      if (entry === undefined || entry.expiresAt <= at) {
        pools.delete(key);
        entry = { pool: createCallBudget(maxCallsPerOperation), expiresAt: at + windowMs };
        pools.set(key, entry);
      }
      return createPooledCallBudget(callLimit, entry.pool);
    },
  };
}
