/**
 * Liveness and readiness. `/healthz` answers while the process serves HTTP. `/readyz` is the load
 * balancer's question, "should this replica be sent callers?", and answers it from what is local to
 * the replica: 503 while it drains (a shutdown began) or while its Redis, when it has one, does not
 * answer; else 200. What the upstream says of each environment's key (the upstream probe, the source
 * of `apiStatus`) is reported in the body, `degraded` when an upstream is unreachable or refuses its
 * key, and never takes the replica out.
 *
 * Why the upstream does not decide readiness: an upstream outage or a refused key is the same for
 * every replica (one upstream, one Secret), so it would take every replica out at once. That helps
 * no caller and removes what the replicas still do for them: answers held in the response cache
 * (stale-if-error), the circuit's immediate retryable refusals instead of connections refused by an
 * empty Service, webhooks taken into the event log, subscriptions that wait and catch up, and the
 * other environment's callers, whose upstream and key may be fine.
 *
 * `/readyz?environment=<name>` is a monitor's question, "can this environment's callers be served
 * now?": 503 when its upstream is unreachable or refuses its key (alerts), never for a probe.
 */
import type { RequestHandler } from 'express';
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { Logger } from '../logger.ts';
import type { UpstreamClient } from '../upstream/client.ts';
import { PLATFORM_SCOPE } from '../upstream/access.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { isReachable, probeUpstream, type UpstreamProbe } from '../upstream/probe.ts';

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
  /** Pings Redis; resolves undefined when the facade uses none (no `REDIS_URL`). */
  checkRedis?: () => Promise<{ reachable: boolean; reason?: string } | undefined>;
  /** Whether the process is shutting down: the replica drains and is not ready, whatever else holds. */
  isDraining?: () => boolean;
  /** How long an answer is reused after it settled (`READINESS_CACHE_MS`). Default 0: none. */
  cacheMs?: number;
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

type RedisState = { reachable: boolean; reason?: string };

/** One check of every upstream (and Redis), which every answer within `cacheMs` is made from. */
interface Checked {
  /** One entry per upstream asked: its environment (undefined with one key) and its state. */
  readonly upstreams: readonly {
    readonly environment: PlatformEnvironment | undefined;
    readonly state: UpstreamState;
    readonly ready: boolean;
  }[];
  readonly redis: RedisState | undefined;
}

interface Readiness {
  status: 200 | 404 | 503;
  body: object;
}

/**
 * `GET /readyz`: 200 unless the replica drains or its Redis (when configured) does not answer; the
 * body says `ready`, or `degraded` when an upstream is unreachable or refuses the facade's key
 * (`upstream`, or `environments` with a key per environment). A replica without its Redis would take
 * webhooks it cannot make durable. `?environment=<name>` answers for that environment alone: 503
 * when its upstream does not take its key (404 for a name the facade holds no key for).
 */
export function handleReadiness(options: ReadinessOptions): RequestHandler {
  // Anyone may ask, without a token: probes that arrive while a check is under way share it, and so
  // do those that arrive within `cacheMs` after it, whichever environment they ask about, so a flood
  // of them costs the upstream one call per environment per `cacheMs`, not one call each.
  const cacheMs = options.cacheMs ?? 0;
  const now = options.now ?? (() => performance.now());
  const configured = new Set<string>(options.environments?.map(({ environment }) => environment) ?? []);
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
      started.checked = check(options, res.locals.requestId as string | undefined).finally(() => {
        started.settledAt = now();
      });
      entry = current = started;
    }
    const checked = await entry.checked;
    const { status, body } =
      asked !== undefined
        ? environmentAnswer(checked, asked as PlatformEnvironment)
        : options.environments !== undefined
          ? environmentsAnswer(checked)
          : singleAnswer(checked);
    res.status(status).json(body);
  };
}

/** One probe with the facade's own key: fast, and adding no retry load to a struggling upstream. */
async function probeOnce(
  client: UpstreamClient,
  apiKey: UpstreamKey,
  requestId: string | undefined,
): Promise<{ probe: UpstreamProbe; requestId: string }> {
  const up = createUpstreamContext(client, { apiKey, scope: PLATFORM_SCOPE, requestId, retries: 0 });
  return { probe: await probeUpstream(up), requestId: up.requestId };
}

/** The state of one probed upstream, and why it is not ready (undefined when it is). */
function stateOf(probe: UpstreamProbe): { state: UpstreamState; reason?: string } {
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

/**
 * Every upstream asked at once (each environment's with its key, one call each) and Redis pinged;
 * one `not ready` line per upstream or Redis that is not.
 */
async function check(options: ReadinessOptions, requestId: string | undefined): Promise<Checked> {
  const redisCheck = options.checkRedis?.() ?? Promise.resolve(undefined);
  const asked: {
    environment: PlatformEnvironment | undefined;
    client: UpstreamClient;
    apiKey: UpstreamKey;
  }[] = options.environments?.map((environment) => ({ ...environment })) ?? [
    { environment: undefined, client: options.client, apiKey: options.apiKey },
  ];
  const upstreams = await Promise.all(
    asked.map(async ({ environment, client, apiKey }) => {
      const { probe, requestId: probeRequestId } = await probeOnce(client, apiKey, requestId);
      const { state, reason } = stateOf(probe);
      if (reason !== undefined) {
        options.logger.warn('not ready', {
          ...(environment === undefined ? {} : { environment }),
          reason,
          requestId: probeRequestId,
        });
      }
      return { environment, state, ready: reason === undefined };
    }),
  );
  const redis = await redisCheck;
  if (redis !== undefined && !redis.reachable) {
    options.logger.warn('not ready', { reason: `redis_${redis.reason ?? 'unreachable'}`, requestId });
  }
  return { upstreams, redis };
}

/** The `redis` member of an answer (none without `REDIS_URL`), and whether it lets the replica serve. */
function redisPart(checked: Checked): { part: { redis?: RedisState }; ok: boolean } {
  return checked.redis === undefined
    ? { part: {}, ok: true }
    : { part: { redis: checked.redis }, ok: checked.redis.reachable };
}

/** With `UPSTREAM_API_KEY` alone: ready while Redis answers; `degraded` when the upstream does not take the key. */
function singleAnswer(checked: Checked): Readiness {
  const [{ state: upstream, ready }] = checked.upstreams as [Checked['upstreams'][number]];
  const redis = redisPart(checked);
  if (!redis.ok) return { status: 503, body: { status: 'unavailable', upstream, ...redis.part } };
  return { status: 200, body: { status: ready ? 'ready' : 'degraded', upstream, ...redis.part } };
}

/**
 * With a key per environment: ready while Redis answers, `degraded` when an environment's upstream
 * does not take its key (the module says why that never takes the replica out).
 */
function environmentsAnswer(checked: Checked): Readiness {
  const environments: Partial<Record<PlatformEnvironment, UpstreamState>> = {};
  for (const { environment, state } of checked.upstreams) environments[environment!] = state;
  const redis = redisPart(checked);
  if (!redis.ok) return { status: 503, body: { status: 'unavailable', environments, ...redis.part } };
  const status = checked.upstreams.every(({ ready }) => ready) ? 'ready' : 'degraded';
  return { status: 200, body: { status, environments, ...redis.part } };
}

/** `?environment=<name>`: that environment's upstream and Redis alone. */
function environmentAnswer(checked: Checked, environment: PlatformEnvironment): Readiness {
  const { state: upstream, ready } = checked.upstreams.find((asked) => asked.environment === environment)!;
  const redis = redisPart(checked);
  return ready && redis.ok
    ? { status: 200, body: { status: 'ready', environment, upstream, ...redis.part } }
    : { status: 503, body: { status: 'unavailable', environment, upstream, ...redis.part } };
}
