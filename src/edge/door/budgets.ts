/**
 * The budgets the door's steps spend: a caller's operations (its subject's, or its share of its
 * client's), its live connections, the failing attempts of an address, and its upstream calls over
 * time (`upstream-calls.ts`); each keyed by the caller in its environment, each refusal told.
 */
import type { Caller } from '../../auth/caller.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { QuotaState } from '../client-budgets.ts';
import type { ClientKey, RateBucket, RateDecision, RateKey, RateLimits, SubjectKey } from '../rate-limits.ts';
import { rateLimited, refuse, type Refusal } from '../refusal.ts';
import type { Connection } from './door.ts';
import { createUpstreamCallBudgets, type UpstreamCallBudgets } from './upstream-calls.ts';

/** The same message whatever was wrong with a credential, so it helps no forger. */
export const UNAUTHENTICATED_MESSAGE =
  'Authentication required: send a valid access token as "Authorization: Bearer <token>".';

/** The door's rate-limit buckets: whose budget a connection spends, and the refusal once it is spent. */
export interface DoorBudgets extends UpstreamCallBudgets {
  /** The caller's key (the address's when anonymous), in its environment. */
  callerKey(connection: Connection): RateKey;
  /** A verified caller's key in `environment`. */
  subjectKey(caller: Caller, environment: PlatformEnvironment | undefined): SubjectKey;
  /**
   * Spends one operation of `connection`'s budget: its subject's, or, when its client has one of
   * its own, the client's (a subject other than the client itself spending its share of it).
   */
  spendOperation(connection: Connection, onQuota?: (quota: QuotaState) => void): Promise<Refusal | undefined>;
  spend(
    bucket: RateBucket,
    key: RateKey,
    onQuota?: (quota: QuotaState) => void,
  ): Promise<Refusal | undefined>;
  /** A failing attempt: spends the address's budget, and is told to wait once it is spent. */
  failed(address: string): Promise<Refusal>;
  /** Whether the address may still fail (so it may have a caller's key checked upstream). */
  mayFail(address: string): Promise<boolean>;
}

/** Builds the budgets of the door's options (`ConnectOptions`' `rateLimits`, `onRateLimited`, `environments`). */
export function createDoorBudgets(options: {
  rateLimits: RateLimits;
  /** Told of every refusal by a rate limit, by bucket (metrics); must not throw. */
  onRateLimited?(bucket: RateBucket): void;
  environments?: readonly PlatformEnvironment[] | undefined;
}): DoorBudgets {
  const { rateLimits } = options;
  const addressKey = (address: string): RateKey => `ip:${address}`;
  // With a key per environment, every budget is the caller's in its environment: a sandbox
  // caller's traffic is never charged to the same subject's or client's live budget.
  const inEnvironment = (environment: PlatformEnvironment | undefined): string =>
    options.environments === undefined || environment === undefined ? '' : `${environment}:`;
  const subjectKey: DoorBudgets['subjectKey'] = (caller, environment) =>
    `sub:${inEnvironment(environment)}${caller.subject}`;
  const clientKey = (clientId: string, environment: PlatformEnvironment | undefined): ClientKey =>
    `client:${inEnvironment(environment)}${clientId}`;
  const callerKey = (connection: Connection): RateKey =>
    connection.caller === undefined
      ? addressKey(connection.address)
      : subjectKey(connection.caller, connection.environment);
  const decided = (
    bucket: RateBucket,
    decision: RateDecision,
    onQuota?: (quota: QuotaState) => void,
  ): Refusal | undefined => {
    if (decision.allowed) {
      if (decision.quota !== undefined) onQuota?.(decision.quota);
      return undefined;
    }
    options.onRateLimited?.(bucket);
    return rateLimited(decision.retryAfterSeconds, undefined, decision.quota);
  };
  const spend: DoorBudgets['spend'] = async (bucket, key, onQuota) =>
    decided(bucket, await rateLimits.consume(bucket, key), onQuota);
  return {
    callerKey,
    subjectKey,
    ...createUpstreamCallBudgets({ rateLimits, subjectKey, clientKey, decided }),
    async spendOperation(connection, onQuota) {
      const { caller } = connection;
      const clientId = caller?.clientId;
      if (caller === undefined || clientId === undefined || !rateLimits.hasClientBudget(clientId)) {
        return spend('request', callerKey(connection), onQuota);
      }
      const client = clientKey(clientId, connection.environment);
      // A token the client holds for itself (client credentials) is the client: the whole budget.
      if (caller.subject === clientId) return spend('request', client, onQuota);
      const subject = subjectKey(caller, connection.environment);
      return decided('request', await rateLimits.consumeShare(client, subject), onQuota);
    },
    spend,
    failed: async (address) =>
      (await spend('failed-auth', addressKey(address))) ??
      refuse('invalid-credentials', UNAUTHENTICATED_MESSAGE),
    mayFail: async (address) => (await rateLimits.check('failed-auth', addressKey(address))).allowed,
  };
}
