/**
 * Per-caller and per-address budgets (operations, failed authentications, WebSocket connections),
 * counted in memory on one replica or in Redis shared by every replica. A spent budget is answered
 * by the door as one refusal (`rateLimited` in refusal.ts), whatever the transport.
 *
 * Keys are `sub:<subject>` or `ip:<address>` and nothing else: they are hashed before they reach a
 * store, so even a key built by mistake from a credential never lands in Redis or in memory in clear.
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
import type { RateLimitsConfig } from './config.ts';

/**
 * What is being counted.
 * - `request`: a GraphQL operation, per caller (per address for an anonymous one), whatever the
 *   transport: an HTTP request and a graphql-ws subscribe message spend from the same budget, so
 *   moving operations to another transport buys nothing.
 * - `subscribe`: the same budget as `request` (kept as a name for the metrics' `bucket` label).
 * - `failed-auth`: a failed authentication, per client address. Only failing attempts spend it and
 *   only failing attempts are refused by it: a credential that verifies is never refused for it.
 * - `ws-connect`: a connection of a long-lived transport (graphql-ws), per authenticated caller.
 */
export type RateBucket = 'request' | 'subscribe' | 'failed-auth' | 'ws-connect';

export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** A rate-limit key: a caller's token subject or a client address, never anything else. */
export type RateKey = `sub:${string}` | `ip:${string}`;

export interface RateLimits {
  /** Spends one unit of `bucket` for `key`; refused once the window's budget is spent. */
  consume(bucket: RateBucket, key: RateKey): Promise<RateDecision>;
  /**
   * Whether the next {@link consume} of `bucket` for `key` would be refused, without spending (e.g.
   * before an upstream check of a caller's own key that the address could not pay for).
   */
  check(bucket: RateBucket, key: RateKey): Promise<RateDecision>;
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

/** Builds the limiters for every bucket from `config`. */
export function createRateLimits(options: RateLimitsOptions): RateLimits {
  const { config } = options;
  if (!config.enabled) {
    const allowAll = async (_bucket: RateBucket, key: RateKey): Promise<RateDecision> => {
      assertRateKey(key);
      return ALLOWED;
    };
    return { consume: allowAll, check: allowAll, close: () => Promise.resolve() };
  }
  const logger = options.logger.child({ component: 'rate-limits' });
  const build = (name: string, points: number): Limiter =>
    buildLimiter({
      name,
      points,
      duration: config.windowSeconds,
      redis: options.redis,
      keyPrefix: `${options.keyPrefix}rate:${name}`,
      timeoutMs: options.redisTimeoutMs ?? 500,
      logger,
    });

  const operations = build('operations', config.requests);
  const limiters: Record<RateBucket, Limiter> = {
    request: operations,
    subscribe: operations,
    'failed-auth': build('failed-auth', config.failedAuth),
    'ws-connect': build('ws-connect', config.wsConnects),
  };
  return {
    async consume(bucket, key) {
      const storeKey = toStoreKey(key);
      const limiter = limiters[bucket];
      try {
        await limiter.limiter.consume(storeKey);
        return ALLOWED;
      } catch (outcome) {
        return refusalOf(outcome, bucket, logger);
      }
    },
    async check(bucket, key) {
      const storeKey = toStoreKey(key);
      const limiter = limiters[bucket];
      try {
        const current = await limiter.limiter.get(storeKey);
        if (current === null || current.consumedPoints < limiter.points) return ALLOWED;
        return { allowed: false, retryAfterSeconds: toRetryAfterSeconds(current.msBeforeNext) };
      } catch (outcome) {
        return refusalOf(outcome, bucket, logger);
      }
    },
    // Nothing to release: memory counters expire on unref'd timers, the Redis connection is the caller's.
    close: () => Promise.resolve(),
  };
}

interface Limiter {
  limiter: RateLimiterAbstract;
  points: number;
}

function buildLimiter(options: {
  name: string;
  points: number;
  duration: number;
  redis: Redis | undefined;
  keyPrefix: string;
  timeoutMs: number;
  logger: Logger;
}): Limiter {
  const { points, duration } = options;
  if (options.redis === undefined) {
    return { limiter: new RateLimiterMemory({ points, duration, keyPrefix: options.keyPrefix }), points };
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
  return { limiter, points };
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

function refusalOf(outcome: unknown, bucket: RateBucket, logger: Logger): RateDecision {
  if (outcome instanceof RateLimiterRes) {
    return { allowed: false, retryAfterSeconds: toRetryAfterSeconds(outcome.msBeforeNext) };
  }
  // Both Redis and the in-memory limiter failed: a bug, not an attack. Letting this one request
  // through is better than refusing everyone; the log says so.
  logger.error('rate limit could not be counted; request let through', {
    bucket,
    error: outcome instanceof Error ? outcome.message : String(outcome),
  });
  return ALLOWED;
}

function toRetryAfterSeconds(msBeforeNext: number): number {
  return Math.max(1, Math.ceil(msBeforeNext / 1000));
}

function assertRateKey(key: string): void {
  // The key is not quoted: if it is not a subject or an address, it may be a credential.
  if (!/^(sub|ip):./s.test(key)) {
    throw new TypeError('A rate-limit key must be "sub:<subject>" or "ip:<address>"');
  }
}

/**
 * The store's key for `key`: its kind, then a digest. A subject or address is not a secret, but a
 * digest means nothing that reaches a store by mistake can be read back from it.
 */
function toStoreKey(key: RateKey): string {
  assertRateKey(key);
  const kind = key.startsWith('sub:') ? 'sub' : 'ip';
  return `${kind}.${createHash('sha256').update(key).digest('base64url')}`;
}
