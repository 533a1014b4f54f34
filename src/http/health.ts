/**
 * Liveness and readiness. `/healthz` answers while the process serves HTTP; `/readyz` asks the
 * upstream probe (the source of `apiStatus`) with the facade's own key, so a replica whose upstream
 * is unreachable or whose key is refused leaves the load balancer.
 */
import type { RequestHandler } from 'express';
import type { Logger } from '../logger.ts';
import type { UpstreamClient } from '../upstream/client.ts';
import { PLATFORM_SCOPE } from '../upstream/access.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { isReachable, probeUpstream } from '../upstream/probe.ts';

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

interface Readiness {
  status: 200 | 503;
  body: object;
}

async function checkReadiness(options: ReadinessOptions, requestId: string | undefined): Promise<Readiness> {
  const redisCheck = options.checkRedis?.() ?? Promise.resolve(undefined);
  // A probe must answer fast and must not add retry load to a struggling upstream.
  const up = createUpstreamContext(options.client, {
    apiKey: options.apiKey,
    scope: PLATFORM_SCOPE,
    requestId,
    retries: 0,
  });
  const probe = await probeUpstream(up);
  const redis = await redisCheck;
  const redisPart = redis === undefined ? {} : { redis };
  if (probe.outcome !== 'ready') {
    const reason =
      probe.outcome === 'unreachable'
        ? probe.reason
        : probe.outcome === 'error'
          ? 'unexpected_error'
          : probe.problem.code;
    options.logger.warn('not ready', { reason, requestId: up.requestId });
    const upstream = { reachable: isReachable(probe), reason };
    return { status: 503, body: { status: 'unavailable', upstream, ...redisPart } };
  }
  const upstream = { reachable: true, environment: probe.discovery.environment };
  if (redis !== undefined && !redis.reachable) {
    options.logger.warn('not ready', {
      reason: `redis_${redis.reason ?? 'unreachable'}`,
      requestId: up.requestId,
    });
    return { status: 503, body: { status: 'unavailable', upstream, redis } };
  }
  return { status: 200, body: { status: 'ready', upstream, ...redisPart } };
}
