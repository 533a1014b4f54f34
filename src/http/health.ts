/**
 * Liveness and readiness. `/healthz` answers while the process serves HTTP. `/readyz` is the load
 * balancer's question, "should this replica be sent callers?", and answers it from what is local to
 * the replica: 503 at once while it drains (a shutdown began), and 503 once its Redis, when it has
 * one, has not answered for longer than `READINESS_REDIS_GRACE_SECONDS` (or at all since the process
 * started); else 200. What the upstream says of each environment's key (the upstream probe, the
 * source of `apiStatus`) is reported in the body, `degraded` when an upstream is unreachable or
 * refuses its key, and never takes the replica out; a Redis out of reach within its grace is
 * reported the same way. An upstream's probe is waited for `READINESS_UPSTREAM_DEADLINE_MS` at most
 * (`probe_timeout` past it), so an upstream that hangs never holds `/readyz` past the orchestrator's
 * probe timeout (src/http/shared-upstream-probe.ts).
 *
 * Why the upstream does not decide readiness: an upstream outage or a refused key is the same for
 * every replica (one upstream, one Secret), so it would take every replica out at once. That helps
 * no caller and removes what the replicas still do for them: answers held in the response cache
 * (stale-if-error), the circuit's immediate retryable refusals instead of connections refused by an
 * empty Service, webhooks taken into the event log, subscriptions that wait and catch up, and the
 * other environment's callers, whose upstream and key may be fine.
 *
 * Why Redis has a grace: a Sentinel failover cuts every replica off from Redis at the same moment,
 * for as long as the Sentinels take to call the primary down and promote a replica. Counted at once,
 * it took every replica out of the Service together (5.0 s in the game day, docs/operations.md), and
 * a Service without a ready endpoint refuses connections: queries, which need no Redis, included.
 * Within the grace webhooks are refused with 503 and retried by the platform, and subscriptions wait
 * and catch up; a replica cut off for longer than a failover takes is the one at fault, and leaves.
 *
 * `/readyz?environment=<name>` is a monitor's question, "can this environment's callers be served
 * now?": 503 when its upstream is unreachable or refuses its key (alerts), never for a probe.
 */
import type { RequestHandler } from 'express';
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { Logger } from '../logger.ts';
import type { UpstreamClient } from '../upstream/client.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { isReachable } from '../upstream/probe.ts';
import type { RedisChecked, RedisReachability, RedisState } from './redis-reachability.ts';
import { SharedUpstreamProbe, type ProbeReading } from './shared-upstream-probe.ts';

/** `GET /healthz`: 200 while the process is up. */
export function handleHealth(): RequestHandler {
  return (_req, res) => {
    res.status(200).json({ status: 'ok' });
  };
}

export interface ReadinessOptions {
  client: UpstreamClient;
  /** The facade's own key (its source: the key in use at each probe). */
  apiKey: UpstreamKey;
  /**
   * With a key per environment, every environment's client and key: each is asked instead of
   * `client` and `apiKey`, and the answer names each environment's state.
   */
  environments?: readonly EnvironmentReadiness[];
  logger: Logger;
  /**
   * Pings Redis and keeps the record of its outages, with the grace they get before they count
   * against readiness (`READINESS_REDIS_GRACE_SECONDS`). None: Redis is not reported.
   */
  redis?: RedisReachability;
  /** Whether the process is shutting down: the replica drains and is not ready, whatever else holds. */
  isDraining?: () => boolean;
  /** How long an answer is reused after it settled (`READINESS_CACHE_MS`). Default 0: none. */
  cacheMs?: number;
  /**
   * How long an answer waits for an upstream's probe, from the probe's start
   * (`READINESS_UPSTREAM_DEADLINE_MS`); past it that upstream is `probe_timeout` while the probe
   * goes on (src/http/shared-upstream-probe.ts says why). Default 1,000.
   */
  upstreamDeadlineMs?: number;
  /** Clock in milliseconds. Default `performance.now`. */
  now?: () => number;
}

/** The upstream client and the facade's own key of one environment. */
export interface EnvironmentReadiness {
  readonly environment: PlatformEnvironment;
  readonly client: UpstreamClient;
  readonly apiKey: UpstreamKey;
}

/** What the answer says of one upstream (one environment's, with a key per environment). */
type UpstreamState =
  { reachable: true; environment: string | null | undefined } | { reachable: boolean; reason: string };

/** One check of every upstream (and Redis), which every answer within `cacheMs` is made from. */
interface Checked {
  /** One entry per upstream asked: its environment (undefined with one key) and its state. */
  readonly upstreams: readonly {
    readonly environment: PlatformEnvironment | undefined;
    readonly state: UpstreamState;
    readonly ready: boolean;
  }[];
  readonly redis: RedisChecked | undefined;
}

interface Readiness {
  status: 200 | 404 | 503;
  body: object;
}

/**
 * `GET /readyz`: 200 unless the replica drains or its Redis (when configured) has not answered for
 * longer than `redisGraceMs` (or ever); the body says `ready`, or `degraded` when an upstream is
 * unreachable or refuses the facade's key (`upstream`, or `environments` with a key per
 * environment) or Redis is out within its grace (`redis.unreachableSeconds`, `redis.graceSeconds`).
 * A replica without its Redis takes webhooks it cannot make durable (it refuses them, 503).
 * `?environment=<name>` answers for that environment alone: 503 when its upstream does not take its
 * key (404 for a name the facade holds no key for).
 */
export function handleReadiness(options: ReadinessOptions): RequestHandler {
  // Anyone may ask, without a token: probes that arrive while a check is under way share it, and so
  // do those that arrive within `cacheMs` after it, whichever environment they ask about, so a flood
  // of them costs the upstream one call per environment per `cacheMs`, not one call each.
  const cacheMs = options.cacheMs ?? 0;
  const now = options.now ?? (() => performance.now());
  const grace: RedisGrace = { graceMs: options.redis?.graceMs ?? 0, now };
  const configured = new Set<string>(options.environments?.map(({ environment }) => environment) ?? []);
  const timing = { cacheMs, deadlineMs: options.upstreamDeadlineMs ?? DEFAULT_UPSTREAM_DEADLINE_MS, now };
  const probes: readonly AskedUpstream[] = (
    options.environments ?? [{ environment: undefined, client: options.client, apiKey: options.apiKey }]
  ).map(({ environment, client, apiKey }) => ({
    environment,
    probe: new SharedUpstreamProbe(client, apiKey, timing),
  }));
  interface Entry {
    checked: Promise<Checked>;
    settledAt: number | undefined;
  }
  let current: Entry | undefined;
  const isFresh = (entry: Entry): boolean =>
    entry.settledAt === undefined || now() - entry.settledAt < cacheMs;
  return async (req, res) => {
    const asked = req.query.environment;
    if (asked !== undefined && (typeof asked !== 'string' || !configured.has(asked))) {
      // Decided before any probe: a name the facade does not serve costs the upstream nothing.
      res.status(404).json({ status: 'unknown_environment', environments: [...configured] });
      return;
    }
    if (options.isDraining?.() === true) {
      // Nothing asked upstream: a draining replica leaves the endpoints whatever the upstream says.
      res.status(503).json({ status: 'draining' });
      return;
    }
    let entry = current;
    if (entry === undefined || !isFresh(entry)) {
      const started: Entry = {
        checked: Promise.resolve({ upstreams: [], redis: undefined }),
        settledAt: undefined,
      };
      const requestId = res.locals.requestId as string | undefined;
      started.checked = check(options, probes, grace, requestId).finally(() => {
        started.settledAt = now();
      });
      entry = current = started;
    }
    const checked = await entry.checked;
    // Judged now, not when the check ran: a reused answer still turns 503 once the grace has passed.
    const redis = redisPart(checked, grace);
    const { status, body } =
      asked !== undefined
        ? environmentAnswer(checked, redis, asked as PlatformEnvironment)
        : options.environments !== undefined
          ? environmentsAnswer(checked, redis)
          : singleAnswer(checked, redis);
    res.status(status).json(body);
  };
}

/** The default of `upstreamDeadlineMs`: a third of the shipped readiness probe's `timeoutSeconds`. */
const DEFAULT_UPSTREAM_DEADLINE_MS = 1_000;

/** One upstream `/readyz` asks: its environment (undefined with one key) and its shared probe. */
interface AskedUpstream {
  readonly environment: PlatformEnvironment | undefined;
  readonly probe: SharedUpstreamProbe;
}

/** The state of one probed upstream, and why it is not ready (undefined when it is). */
function stateOf(reading: ProbeReading): { state: UpstreamState; reason?: string } {
  // No answer by the deadline: not known to be reachable, whatever the probe says later.
  if (reading.timedOut)
    return { state: { reachable: false, reason: 'probe_timeout' }, reason: 'probe_timeout' };
  const { probe } = reading;
  if (probe.outcome === 'ready')
    return { state: { reachable: true, environment: probe.discovery.environment } };
  const reason =
    probe.outcome === 'unreachable'
      ? probe.reason
      : probe.outcome === 'error'
        ? 'unexpected_error'
        : probe.problem.code;
  return { state: { reachable: isReachable(probe), reason }, reason };
}

/** What judges Redis' part in readiness: its grace and the clock. */
interface RedisGrace {
  readonly graceMs: number;
  readonly now: () => number;
}

/**
 * Every upstream asked at once (each environment's with its key, one call each) and Redis pinged;
 * one line per upstream or Redis that is not as it should be, saying whether the replica stays ready.
 */
async function check(
  options: ReadinessOptions,
  asked: readonly AskedUpstream[],
  grace: RedisGrace,
  requestId: string | undefined,
): Promise<Checked> {
  const redisCheck = options.redis?.check(grace.now) ?? Promise.resolve(undefined);
  const upstreams = await Promise.all(
    asked.map(async ({ environment, probe }) => {
      const reading = await probe.read(requestId);
      const { state, reason } = stateOf(reading);
      if (reason !== undefined) {
        // Reported, never acted on (the module says why): the replica stays ready.
        options.logger.warn('upstream degraded; the replica stays ready', {
          ...(environment === undefined ? {} : { environment }),
          reason,
          requestId: reading.requestId,
        });
      }
      return { environment, state, ready: reason === undefined };
    }),
  );
  const redis = await redisCheck;
  if (redis === undefined) return { upstreams, redis: undefined };
  logRedisOutage(options.logger, redisJudged(redis, grace), requestId);
  return { upstreams, redis };
}

/** Redis as one answer reports it, judged against its grace at this moment. */
interface RedisJudged {
  /** The `redis` member of the answer. */
  readonly reported: RedisState & { unreachableSeconds?: number; graceSeconds?: number };
  /** Whether Redis lets the replica be ready: it answers, or it is out within its grace. */
  readonly ok: boolean;
  /** Out of reach, within its grace: the replica stays ready, `degraded`. */
  readonly withinGrace: boolean;
}

/**
 * Redis judged now: out of reach counts against readiness once it has been out without a break for
 * longer than the grace, and at once when it never answered this process (a replica that never
 * reached its Redis, such as a new one with a wrong address or password, never joins the Service).
 */
function redisJudged(redis: RedisChecked, grace: RedisGrace): RedisJudged {
  const { outage, ...state } = redis;
  if (state.reachable || outage === undefined)
    return { reported: state, ok: state.reachable, withinGrace: false };
  if (grace.graceMs === 0 || !outage.reachedBefore) return { reported: state, ok: false, withinGrace: false };
  const outForMs = grace.now() - outage.since;
  const withinGrace = outForMs <= grace.graceMs;
  const reported = {
    ...state,
    // Rounded up, so the figure is past the grace exactly when the answer is 503.
    unreachableSeconds: Math.ceil(outForMs / 100) / 10,
    graceSeconds: grace.graceMs / 1000,
  };
  return { reported, ok: withinGrace, withinGrace };
}

/** One warning per check that found Redis out of reach, saying whether the replica stays ready. */
function logRedisOutage(logger: Logger, judged: RedisJudged, requestId: string | undefined): void {
  const { reported } = judged;
  if (reported.reachable) return;
  const reason = `redis_${reported.reason ?? 'unreachable'}`;
  if (judged.withinGrace) {
    const { unreachableSeconds, graceSeconds } = reported;
    logger.warn('redis out of reach; the replica stays ready within its grace', {
      reason,
      unreachableSeconds,
      graceSeconds,
      requestId,
    });
  } else {
    logger.warn('not ready', { reason, requestId });
  }
}

/** The `redis` member of an answer (none without `REDIS_URL`), judged against its grace now. */
function redisPart(checked: Checked, grace: RedisGrace): RedisAnswer {
  if (checked.redis === undefined) return { part: {}, ok: true, withinGrace: false };
  const { reported, ok, withinGrace } = redisJudged(checked.redis, grace);
  return { part: { redis: reported }, ok, withinGrace };
}

/** Redis' part of one answer: its member, whether the replica may be ready, whether that is within its grace. */
interface RedisAnswer {
  part: { redis?: RedisJudged['reported'] };
  ok: boolean;
  withinGrace: boolean;
}

/**
 * With `UPSTREAM_API_KEY` alone: ready while Redis answers or is out within its grace; `degraded`
 * when the upstream does not take the key or Redis is out within its grace.
 */
function singleAnswer(checked: Checked, redis: RedisAnswer): Readiness {
  const [{ state: upstream, ready }] = checked.upstreams as [Checked['upstreams'][number]];
  if (!redis.ok) return { status: 503, body: { status: 'unavailable', upstream, ...redis.part } };
  const status = ready && !redis.withinGrace ? 'ready' : 'degraded';
  return { status: 200, body: { status, upstream, ...redis.part } };
}

/**
 * With a key per environment: ready while Redis answers or is out within its grace, `degraded` when
 * an environment's upstream does not take its key (the module says why that never takes the replica
 * out) or Redis is out within its grace.
 */
function environmentsAnswer(checked: Checked, redis: RedisAnswer): Readiness {
  const environments: Partial<Record<PlatformEnvironment, UpstreamState>> = {};
  for (const { environment, state } of checked.upstreams) environments[environment!] = state;
  if (!redis.ok) return { status: 503, body: { status: 'unavailable', environments, ...redis.part } };
  const ready = checked.upstreams.every((upstream) => upstream.ready) && !redis.withinGrace;
  return { status: 200, body: { status: ready ? 'ready' : 'degraded', environments, ...redis.part } };
}

/** `?environment=<name>`: that environment's upstream and Redis alone (`degraded` within Redis' grace). */
function environmentAnswer(
  checked: Checked,
  redis: RedisAnswer,
  environment: PlatformEnvironment,
): Readiness {
  const { state: upstream, ready } = checked.upstreams.find((asked) => asked.environment === environment)!;
  if (!ready || !redis.ok)
    return { status: 503, body: { status: 'unavailable', environment, upstream, ...redis.part } };
  const status = redis.withinGrace ? 'degraded' : 'ready';
  return { status: 200, body: { status, environment, upstream, ...redis.part } };
}
