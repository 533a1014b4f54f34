/**
 * Liveness and readiness. `/healthz` answers while the process serves HTTP; `/readyz` asks the
 * upstream probe (the source of `apiStatus`) with the facade's own key (each environment's, with a
 * key per environment), so a replica whose upstream is unreachable or whose key is refused leaves
 * the load balancer.
 */
import type { RequestHandler } from 'express';
import type { PlatformEnvironment } from '../events/event-types.ts';
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
  /** How long an answer is reused after it settled (`READINESS_CACHE_MS`). Default 0: none. */
  cacheMs?: number;
  /** Clock in milliseconds. Default `performance.now`. */
  now?: () => number;
}

/**
 * `GET /readyz`: 200 when the upstream probe succeeds (and Redis answers, when configured), else
 * 503 with the reason. A replica without its Redis would take webhooks it cannot fan out.
 */
export function handleReadiness(options: ReadinessOptions): RequestHandler {
  // Anyone may ask, without a token: probes that arrive while a probe is under way share its
  // answer, and so do those that arrive within `cacheMs` after it, so a flood of them costs the
  // upstream one call per `cacheMs`, not one call each.
  const cacheMs = options.cacheMs ?? 0;
  const now = options.now ?? (() => performance.now());
  interface Entry {
    answer: Promise<Readiness>;
    settledAt: number | undefined;
  }
  let current: Entry | undefined;
  const isFresh = (entry: Entry): boolean =>
    entry.settledAt === undefined || now() - entry.settledAt < cacheMs;
  return async (_req, res) => {
    let entry = current;
    if (entry === undefined || !isFresh(entry)) {
      const started: Entry = { answer: Promise.resolve({ status: 503, body: {} }), settledAt: undefined };
      started.answer = checkReadiness(options, res.locals.requestId as string | undefined).finally(() => {
        started.settledAt = now();
      });
      entry = current = started;
    }
    const { status, body } = await entry.answer;
    res.status(status).json(body);
  };
}

/** The upstream client and the facade's own key of one environment. */
export interface EnvironmentReadiness {
  readonly environment: PlatformEnvironment;
  readonly client: UpstreamClient;
  readonly apiKey: UpstreamKey;
}

interface Readiness {
  status: 200 | 503;
  body: object;
}

/** What the answer says of one upstream (one environment's, with a key per environment). */
type UpstreamState =
  { reachable: true; environment: string | null | undefined } | { reachable: boolean; reason: string };

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
 * With a key per environment: every environment's upstream is asked with its key, at once (one
 * call each per answer), and the replica is ready only when each accepts its key.
 */
async function checkEnvironmentsReadiness(
  options: ReadinessOptions,
  environments: readonly EnvironmentReadiness[],
  requestId: string | undefined,
): Promise<Readiness> {
  const redisCheck = options.checkRedis?.() ?? Promise.resolve(undefined);
  const probes = await Promise.all(
    environments.map(async ({ environment, client, apiKey }) => ({
      environment,
      ...(await probeOnce(client, apiKey, requestId)),
    })),
  );
  const redis = await redisCheck;
  const redisPart = redis === undefined ? {} : { redis };
  const states: Partial<Record<PlatformEnvironment, UpstreamState>> = {};
  let ready = true;
  for (const { environment, probe, requestId: probeRequestId } of probes) {
    const { state, reason } = stateOf(probe);
    states[environment] = state;
    if (reason !== undefined) {
      ready = false;
      options.logger.warn('not ready', { environment, reason, requestId: probeRequestId });
    }
  }
  if (redis !== undefined && !redis.reachable) {
    ready = false;
    options.logger.warn('not ready', { reason: `redis_${redis.reason ?? 'unreachable'}`, requestId });
  }
  return ready
    ? { status: 200, body: { status: 'ready', environments: states, ...redisPart } }
    : { status: 503, body: { status: 'unavailable', environments: states, ...redisPart } };
}

async function checkReadiness(options: ReadinessOptions, requestId: string | undefined): Promise<Readiness> {
  if (options.environments !== undefined)
    return checkEnvironmentsReadiness(options, options.environments, requestId);
  const redisCheck = options.checkRedis?.() ?? Promise.resolve(undefined);
  const { probe, requestId: probeRequestId } = await probeOnce(options.client, options.apiKey, requestId);
  const redis = await redisCheck;
  const redisPart = redis === undefined ? {} : { redis };
  const { state: upstream, reason } = stateOf(probe);
  if (reason !== undefined) {
    options.logger.warn('not ready', { reason, requestId: probeRequestId });
    return { status: 503, body: { status: 'unavailable', upstream, ...redisPart } };
  }
  if (redis !== undefined && !redis.reachable) {
    options.logger.warn('not ready', {
      reason: `redis_${redis.reason ?? 'unreachable'}`,
      requestId: probeRequestId,
    });
    return { status: 503, body: { status: 'unavailable', upstream, redis } };
  }
  return { status: 200, body: { status: 'ready', upstream, ...redisPart } };
}
