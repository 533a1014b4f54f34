/**
 * How long this replica's Redis has been out of reach without a break, as its readiness checks saw
 * it: `/readyz` counts Redis against readiness only once that passes `READINESS_REDIS_GRACE_SECONDS`
 * (src/http/health.ts says why), and `/metrics` shows it (`facade_readiness_redis_unreachable_seconds`).
 *
 * Only the checks are counted, not a connection's events: a Redis cut off without a reset connection
 * (a partition, a paused node) closes nothing, and a PING that is not answered is what says so.
 */

/** What one PING of Redis found. */
export type RedisState = { reachable: boolean; reason?: string };

/** Where Redis is pinged: the event pipeline's connection for short commands. */
export interface RedisPing {
  /** Whether Redis answers PING; undefined when the facade uses none (no `REDIS_URL`). */
  checkRedis(): Promise<RedisState | undefined>;
}

/** An outage of Redis as the checks saw it. */
export interface RedisOutage {
  /** When it began: the start of the first check of it that failed (the clock of the checks). */
  readonly since: number;
  /**
   * Whether Redis had answered this process before the outage. A replica that never reached its
   * Redis (a wrong address or password in a new roll-out) gets no grace.
   */
  readonly reachedBefore: boolean;
}

/** What a check found of Redis: its state, and the outage it belongs to while it is out of reach. */
export type RedisChecked = RedisState & { outage?: RedisOutage };

/** The checks' record of Redis for one replica; one per app, shared by `/readyz` and the metrics. */
export class RedisReachability {
  /** How long Redis may stay out of reach before it counts against readiness (milliseconds; 0: at once). */
  readonly graceMs: number;
  readonly #redis: RedisPing;
  #reached = false;
  #outage: RedisOutage | undefined;
  #lastCheckAt: number | undefined;

  constructor(redis: RedisPing, graceMs: number) {
    this.#redis = redis;
    this.graceMs = graceMs;
  }

  /** Pings Redis and records the answer, timed by `now`; undefined when the facade uses no Redis. */
  async check(now: () => number): Promise<RedisChecked | undefined> {
    const startedAt = now();
    const state = await this.#redis.checkRedis();
    if (state === undefined) return undefined;
    this.#lastCheckAt = now();
    if (state.reachable) {
      this.#reached = true;
      this.#outage = undefined;
      return state;
    }
    // The outage began at the first check that failed, not at this one.
    this.#outage ??= { since: startedAt, reachedBefore: this.#reached };
    return { ...state, outage: this.#outage };
  }

  /** Seconds Redis had been out of reach when the last check settled; 0 when it answered then (or before any check). */
  unreachableSeconds(): number {
    if (this.#outage === undefined || this.#lastCheckAt === undefined) return 0;
    return Math.max(0, this.#lastCheckAt - this.#outage.since) / 1000;
  }
}
