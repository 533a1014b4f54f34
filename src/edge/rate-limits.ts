/**
 * Per-caller and per-address budgets (operations, failed authentications, WebSocket connections),
 * counted in memory on one replica or in Redis shared by every replica. A spent budget is answered
 * by the door as one refusal (`rateLimited` in refusal.ts), whatever the transport.
 *
 * Keys are `sub:<subject>`, `client:<client id>` (a client `RATE_LIMIT_BY_CLIENT` names, whose
 * operations budget is sized for it: client-budgets.ts) or `ip:<address>` and nothing else: they
 * are hashed before they reach a store, so even a key built by mistake from a credential never
 * lands in Redis or in memory in clear.
 * When Redis cannot answer, an in-memory limiter per replica takes over: the budgets keep applying
 * (each replica counting on its own) and nothing fails open or crashes. See docs/security.md.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  RLWrapperTimeouts,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Logger } from '../logger.ts';
import { PLATFORM_ENVIRONMENTS } from '../platform-environment.ts';
import type { QuotaPolicyName, QuotaState } from './client-budgets.ts';
import type { RateLimitsConfig } from './config.ts';

/**
 * What is being counted.
 * - `request`: a GraphQL operation, per caller (per address for an anonymous one), whatever the
 *   transport: an HTTP request and a graphql-ws subscribe message spend from the same budget, so
 *   moving operations to another transport buys nothing.
 * - `subscribe`: the same budget as `request` (kept as a name for the metrics' `bucket` label).
 * - `failed-auth`: a failed authentication, per client address. Only failing attempts spend it and
 *   only failing attempts are refused by it: a credential that verifies is never refused for it.
 * - `ws-connect`: a connection of any live transport, per authenticated caller (the name kept for
 *   the metrics' `bucket` label).
 * - `upstream-calls`: the upstream calls a caller's operations sent, one unit per call as it leaves,
 *   per caller and per named client (`RATE_LIMIT_UPSTREAM_CALLS`, `..._BY_CLIENT`); checked before
 *   an operation is admitted.
 */
export type RateBucket = 'request' | 'subscribe' | 'failed-auth' | 'ws-connect' | 'upstream-calls';

/**
 * Whether the unit was spent; `quota` (for the operations budget) says what is left of the budget,
 * for the RateLimit header fields. It is absent when nothing was counted.
 */
export type RateDecision =
  { allowed: true; quota?: QuotaState } | { allowed: false; retryAfterSeconds: number; quota?: QuotaState };

/** A rate-limit key: a caller's token subject, its client or a client address, never anything else. */
export type RateKey = SubjectKey | ClientKey | `ip:${string}`;
/** A caller's key by its token's subject. */
export type SubjectKey = `sub:${string}`;
/** A named client's key (`RATE_LIMIT_BY_CLIENT`). */
export type ClientKey = `client:${string}`;

export interface RateLimits {
  /** Spends one unit of `bucket` for `key`; refused once the window's budget is spent. */
  consume(bucket: RateBucket, key: RateKey): Promise<RateDecision>;
  /**
   * Spends one operation of `subject`'s share of `client`'s budget (`RATE_LIMIT_CLIENT_SUBJECT_SHARE`),
   * then one of the client's budget. The decision's quota is the share's alone: what the client's
   * other subjects spent is never told, beyond the refusal once the whole budget is spent.
   */
  consumeShare(client: ClientKey, subject: SubjectKey): Promise<RateDecision>;
  /**
   * Whether the next {@link consume} of `bucket` for `key` would be refused, without spending (e.g.
   * before an upstream check of a caller's own key that the address could not pay for).
   */
  check(bucket: RateBucket, key: RateKey): Promise<RateDecision>;
  /** Whether `RATE_LIMIT_BY_CLIENT` gives `clientId` an operations budget of its own. */
  hasClientBudget(clientId: string): boolean;
  /** Whether `RATE_LIMIT_UPSTREAM_CALLS_BY_CLIENT` gives `clientId` an upstream-calls budget. */
  hasClientUpstreamBudget(clientId: string): boolean;
  /** Stops counting; the Redis connection belongs to the caller and stays open. */
  close(): Promise<void>;
}

export interface RateLimitsOptions {
  config: RateLimitsConfig;
  /**
   * Counts shared by every replica through this connection. Without it, each replica counts alone.
   * The caller owns it (and should give it `maxRetriesPerRequest`, as `openRedisConnection` does).
   */
  redis?: Redis;
  /**
   * Prefix of the Redis keys (e.g. `REDIS_KEY_PREFIX`), followed by `rate:operations:` (`request` and
   * `subscribe`), `rate:failed-auth:` or `rate:ws-connect:`.
   */
  keyPrefix: string;
  logger: Logger;
  /** Longest wait for Redis before the in-memory limiter decides instead. Default 500 ms. */
  redisTimeoutMs?: number;
}

const ALLOWED: RateDecision = Object.freeze({ allowed: true });

/** The size of a budget left uncounted in effect. */
const MAX_UNCOUNTED = 1_000_000_000;

/** Builds the limiters for every bucket from `config`. */
export function createRateLimits(options: RateLimitsOptions): RateLimits {
  const { config } = options;
  if (!config.enabled) {
    const allowAll = async (_bucket: RateBucket, key: RateKey): Promise<RateDecision> => {
      assertRateKey(key);
      return ALLOWED;
    };
    return {
      consume: allowAll,
      consumeShare: async (client, subject) => {
        assertRateKey(subject);
        return allowAll('request', client);
      },
      check: allowAll,
      hasClientBudget: () => false,
      hasClientUpstreamBudget: () => false,
      close: () => Promise.resolve(),
    };
  }
  const logger = options.logger.child({ component: 'rate-limits' });
  const build = (name: string, points: number, policy?: QuotaPolicyName): Limiter =>
    buildLimiter({
      policy,
      name,
      points,
      duration: config.windowSeconds,
      redis: options.redis,
      keyPrefix: `${options.keyPrefix}rate:${name}`,
      timeoutMs: options.redisTimeoutMs ?? 500,
      logger,
    });

  const perCaller = build('operations', config.requests, 'per-caller');
  const perAddress: Limiter = { ...perCaller, policy: 'per-address' };
  // One limiter per named client, each with its own size; their keys never meet a subject's.
  const perClient = new Map(
    [...(config.byClient ?? [])].map(([clientId, points]) => [
      clientId,
      build('client-operations', points, 'per-client'),
    ]),
  );
  const others: Record<Exclude<RateBucket, 'request' | 'subscribe'>, Limiter> = {
    'failed-auth': build('failed-auth', config.failedAuth),
    'ws-connect': build('ws-connect', config.wsConnects),
    // Without a budget (a configuration built by hand), as good as uncounted.
    'upstream-calls': build('upstream-calls', config.upstreamCalls ?? MAX_UNCOUNTED),
  };
  const upstreamPerClient = new Map(
    [...(config.upstreamCallsByClient ?? [])].map(([clientId, points]) => [
      clientId,
      build('client-upstream-calls', points),
    ]),
  );
  // With a key per environment the door names the environment first (`client:live:<id>`), so one
  // client's budgets in the two environments are counted apart, each of the client's size: the
  // same limiter under each environment's name, found without taking the key apart.
  const perClientIn = new Map(
    [...perClient].flatMap(([clientId, limiter]) =>
      PLATFORM_ENVIRONMENTS.map((environment): [string, Limiter] => [`${environment}:${clientId}`, limiter]),
    ),
  );
  // Each named client's share for one subject (keyed by the client's key, so per environment too).
  const sharePercent = config.clientSubjectShare ?? 100;
  const share = (pool: Limiter): Limiter | undefined =>
    sharePercent >= 100
      ? undefined
      : build(
          'client-share',
          Math.max(1, Math.floor((pool.points * sharePercent) / 100)),
          'per-client-share',
        );
  const shares = new Map([...perClient.values()].map((pool) => [pool, share(pool)]));
  const clientLimiter = (key: ClientKey, upstream = false): Limiter => {
    const named = key.slice('client:'.length);
    const limiter = upstream
      ? (upstreamPerClient.get(named) ?? upstreamPerClient.get(named.slice(named.indexOf(':') + 1)))
      : (perClient.get(named) ?? perClientIn.get(named));
    // The door asks for a client's key only when `hasClientBudget` said yes.
    if (limiter === undefined) throw new TypeError('A client key names a client without a budget');
    return limiter;
  };
  const limiterOf = (bucket: RateBucket, key: RateKey): Limiter => {
    if (bucket === 'upstream-calls' && key.startsWith('client:'))
      return clientLimiter(key as ClientKey, true);
    if (bucket !== 'request' && bucket !== 'subscribe') return others[bucket];
    if (key.startsWith('ip:')) return perAddress;
    return key.startsWith('client:') ? clientLimiter(key as ClientKey) : perCaller;
  };
  // Async: a bad key is a rejected promise, never an exception thrown at the caller.
  const consume = async (bucket: RateBucket, key: RateKey): Promise<RateDecision> =>
    spendFrom(limiterOf(bucket, key), toStoreKey(key), bucket, logger);
  return {
    consume,
    async consumeShare(client, subject) {
      const pool = clientLimiter(client);
      const subjectShare = shares.get(pool);
      if (subjectShare === undefined) return consume('request', client);
      const shareKey = toShareStoreKey(client, subject);
      const own = await spendFrom(subjectShare, shareKey, 'request', logger);
      if (!own.allowed) return own;
      const pooled = await consume('request', client);
      if (pooled.allowed) return own.quota === undefined ? pooled : own;
      // The client's other subjects spent the pool: this one's unit is given back, and all it is
      // told is to wait (`r=0` of its own share), not how much the others spent.
      await subjectShare.limiter.reward(shareKey).catch(() => undefined);
      const { retryAfterSeconds } = pooled;
      return own.quota === undefined
        ? { allowed: false, retryAfterSeconds }
        : {
            allowed: false,
            retryAfterSeconds,
            quota: { ...own.quota, remaining: 0, resetSeconds: retryAfterSeconds },
          };
    },
    hasClientBudget: (clientId) => perClient.has(clientId),
    hasClientUpstreamBudget: (clientId) => upstreamPerClient.has(clientId),
    async check(bucket, key) {
      const storeKey = toStoreKey(key);
      const limiter = limiterOf(bucket, key);
      try {
        const current = await limiter.limiter.get(storeKey);
        if (current === null || current.consumedPoints < limiter.points) return ALLOWED;
        return { allowed: false, retryAfterSeconds: toRetryAfterSeconds(current.msBeforeNext) };
      } catch (outcome) {
        return refusalOf(outcome, bucket, logger, undefined);
      }
    },
    // Nothing to release: memory counters expire on unref'd timers, the Redis connection is the caller's.
    close: () => Promise.resolve(),
  };
}

/** Spends one unit of `limiter` for `storeKey`: the decision, with its quota for a told budget. */
async function spendFrom(
  limiter: Limiter,
  storeKey: string,
  bucket: RateBucket,
  logger: Logger,
): Promise<RateDecision> {
  try {
    const spent = await limiter.limiter.consume(storeKey);
    const { policy } = limiter;
    return policy === undefined ? ALLOWED : { allowed: true, quota: quotaOf(limiter, policy, spent) };
  } catch (outcome) {
    return refusalOf(outcome, bucket, logger, limiter);
  }
}

interface Limiter {
  limiter: RateLimiterAbstract;
  points: number;
  duration: number;
  /** The policy the header fields name; undefined for budgets callers are not told about. */
  policy: QuotaPolicyName | undefined;
}

function buildLimiter(options: {
  policy: QuotaPolicyName | undefined;
  name: string;
  points: number;
  duration: number;
  redis: Redis | undefined;
  keyPrefix: string;
  timeoutMs: number;
  logger: Logger;
}): Limiter {
  const { points, duration, policy } = options;
  if (options.redis === undefined) {
    const limiter = new RateLimiterMemory({ points, duration, keyPrefix: options.keyPrefix });
    return { limiter, points, duration, policy };
  }
  // While Redis is unreachable each replica counts alone: the budget per replica stays the same,
  // so N replicas admit at most N times the budget, never an unbounded number.
  const insuranceLimiter = new LoggedInsuranceLimiter(
    { points, duration, keyPrefix: options.keyPrefix },
    options.logger,
    options.name,
  );
  const redisLimiter = new RateLimiterRedis({
    storeClient: options.redis,
    points,
    duration,
    keyPrefix: options.keyPrefix,
    // Without this, ioredis queues commands while reconnecting and every request would wait.
    rejectIfRedisNotReady: true,
  });
  // A Redis that is connected but does not answer (overloaded, paused) must not stall requests. The
  // wrapper alone falls back to memory, for errors and timeouts alike: were the Redis limiter insured
  // too, a command failing after its timeout would be counted in memory a second time.
  const limiter = new RLWrapperTimeouts({
    limiter: redisLimiter,
    timeoutMs: options.timeoutMs,
    insuranceLimiter,
  });
  return { limiter, points, duration, policy };
}

/** The in-memory stand-in for Redis, saying (at most every few seconds) that it is in use. */
class LoggedInsuranceLimiter extends RateLimiterMemory {
  readonly #logger: Logger;
  readonly #bucket: string;
  #lastLogged = 0;

  constructor(options: ConstructorParameters<typeof RateLimiterMemory>[0], logger: Logger, bucket: string) {
    super(options);
    this.#logger = logger;
    this.#bucket = bucket;
  }

  override consume(...args: Parameters<RateLimiterMemory['consume']>): Promise<RateLimiterRes> {
    this.#noteUse();
    return super.consume(...args);
  }

  override get(...args: Parameters<RateLimiterMemory['get']>): Promise<RateLimiterRes | null> {
    this.#noteUse();
    return super.get(...args);
  }

  #noteUse(): void {
    if (Date.now() - this.#lastLogged < 5_000) return;
    this.#lastLogged = Date.now();
    this.#logger.warn('rate limits counted in memory: Redis did not answer', { bucket: this.#bucket });
  }
}

function refusalOf(
  outcome: unknown,
  bucket: RateBucket,
  logger: Logger,
  limiter: Limiter | undefined,
): RateDecision {
  if (outcome instanceof RateLimiterRes) {
    const retryAfterSeconds = toRetryAfterSeconds(outcome.msBeforeNext);
    const policy = limiter?.policy;
    if (limiter === undefined || policy === undefined) return { allowed: false, retryAfterSeconds };
    return { allowed: false, retryAfterSeconds, quota: quotaOf(limiter, policy, outcome) };
  }
  // Both Redis and the in-memory limiter failed: a bug, not an attack. Letting this one request
  // through is better than refusing everyone; the log says so.
  logger.error('rate limit could not be counted; request let through', {
    bucket,
    error: outcome instanceof Error ? outcome.message : String(outcome),
  });
  return ALLOWED;
}

/** What is left of `limiter`'s budget once `spent` was counted. */
function quotaOf(limiter: Limiter, policy: QuotaPolicyName, spent: RateLimiterRes): QuotaState {
  return {
    policy,
    quota: limiter.points,
    windowSeconds: limiter.duration,
    remaining: Math.max(0, spent.remainingPoints),
    // A window that is about to end still reads as one second until it has.
    resetSeconds: Math.min(limiter.duration, toRetryAfterSeconds(spent.msBeforeNext)),
  };
}

function toRetryAfterSeconds(msBeforeNext: number): number {
  return Math.max(1, Math.ceil(msBeforeNext / 1000));
}

function assertRateKey(key: string): void {
  // The key is not quoted: if it is not a subject, a client or an address, it may be a credential.
  if (!/^(sub|client|ip):./s.test(key)) {
    throw new TypeError('A rate-limit key must be "sub:<subject>", "client:<client id>" or "ip:<address>"');
  }
}

/**
 * The store's key for `key`: its kind, then a digest. A subject or address is not a secret, but a
 * digest means nothing that reaches a store by mistake can be read back from it.
 */
function toStoreKey(key: RateKey): string {
  assertRateKey(key);
  const kind = key.slice(0, key.indexOf(':'));
  return `${kind}.${createHash('sha256').update(key).digest('base64url')}`;
}

/** The store's key for `subject`'s share of `client`'s budget: a digest of both. */
function toShareStoreKey(client: ClientKey, subject: SubjectKey): string {
  assertRateKey(client);
  assertRateKey(subject);
  return `share.${createHash('sha256').update(`${client}\n${subject}`).digest('base64url')}`;
}
