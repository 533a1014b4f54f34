/**
 * The door's budgets of upstream calls over time (`RATE_LIMIT_UPSTREAM_CALLS`, `..._BY_CLIENT`):
 * each call an operation sends is charged to its caller's budget (and its named client's) as it
 * leaves, whatever the transport; the door checks them before admitting the next operation, and a
 * replica that learned one is spent stops the calls of operations already running
 * (docs/security.md, "Upstream calls over time").
 */
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { Caller } from '../../auth/caller.ts';
import { UpstreamCallBudgetSpentError } from '../../upstream/errors.ts';
import type { ClientKey, RateBucket, RateDecision, RateKey, RateLimits, SubjectKey } from '../rate-limits.ts';
import type { Refusal } from '../refusal.ts';
import type { Connection } from './door.ts';

/** Whose upstream calls an operation sends: its caller in its environment. */
type UpstreamCaller = Pick<Connection, 'caller' | 'environment'>;

/** One caller's upstream-calls budget as an operation's calls meet it. */
interface UpstreamMeter {
  /** A call left: charged to the budget. */
  readonly sent: () => void;
  /** A call is about to leave: throws once the budget is known spent. */
  readonly beforeSend: () => void;
}

/** What an operation's upstream calls are charged to, whatever its transport. */
export interface UpstreamMeters {
  /**
   * What each upstream call an operation of `connection` sends is charged to: its caller's (and its
   * client's) upstream-calls budget, which the door checks before admitting the next operation.
   */
  readonly upstreamMeter: (connection: UpstreamCaller) => UpstreamMeter;
}

/** The door's side of the upstream-calls budgets. */
export interface UpstreamCallBudgets extends UpstreamMeters {
  /**
   * Whether the upstream-calls budgets of `connection`'s caller (its own, its client's when named)
   * have calls left: a refusal once either is spent, nothing spent by asking. An anonymous request
   * (a status read) has none.
   */
  checkUpstreamCalls(connection: UpstreamCaller): Promise<Refusal | undefined>;
}

export function createUpstreamCallBudgets(parts: {
  rateLimits: RateLimits;
  subjectKey: (caller: Caller, environment: PlatformEnvironment | undefined) => SubjectKey;
  /** A named client's key in an environment, as the door's other client budgets name it. */
  clientKey: (clientId: string, environment: PlatformEnvironment | undefined) => ClientKey;
  /** A decision as the door answers it: undefined when allowed, else the refusal (counted). */
  decided: (bucket: RateBucket, decision: RateDecision) => Refusal | undefined;
}): UpstreamCallBudgets {
  const { rateLimits, subjectKey, clientKey, decided } = parts;
  const upstreamKeys = ({ caller, environment }: UpstreamCaller): RateKey[] => {
    if (caller === undefined) return [];
    const own = subjectKey(caller, environment);
    const { clientId } = caller;
    return clientId !== undefined && rateLimits.hasClientUpstreamBudget(clientId)
      ? [own, clientKey(clientId, environment)]
      : [own];
  };
  // Until when each spent key is known spent on this replica (bounded: expired entries go).
  const spentUntil = new Map<RateKey, number>();
  const learn = (key: RateKey, decision: RateDecision): void => {
    if (decision.allowed) return;
    const now = Date.now();
    for (const [known, until] of spentUntil) if (until <= now) spentUntil.delete(known);
    spentUntil.set(key, now + decision.retryAfterSeconds * 1000);
  };
  return {
    async checkUpstreamCalls(connection) {
      for (const key of upstreamKeys(connection)) {
        const decision = await rateLimits.check('upstream-calls', key);
        learn(key, decision);
        if (!decision.allowed) return decided('upstream-calls', decision);
      }
      return undefined;
    },
    upstreamMeter: (connection) => {
      // The keys of one operation's caller never change: made once, not at every call it sends.
      const keys = upstreamKeys(connection);
      return {
        sent: () => {
          // Counted after the fact: a call already sent is spent whatever the answer, and a failure
          // to count it (Redis gone and memory too) is logged by the limiter, never the operation's.
          for (const key of keys) {
            void rateLimits.consume('upstream-calls', key).then((decision) => learn(key, decision));
          }
        },
        beforeSend: () => {
          // Before a call leaves: once this replica learned (from a charge or a check) that the
          // caller's budget is spent, operations already running stop sending too, rather than each
          // spending up to its own call limit past the budget.
          if (spentUntil.size === 0) return;
          const now = Date.now();
          for (const key of keys) {
            const until = spentUntil.get(key);
            if (until !== undefined && until > now) {
              throw new UpstreamCallBudgetSpentError(Math.max(1, Math.ceil((until - now) / 1000)));
            }
          }
        },
      };
    },
  };
}
