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
import { isReachable, probeUpstream } from '../upstream/probe.ts';

/** `GET /healthz`: 200 while the process is up. */
export function handleHealth(): RequestHandler {
  return (_req, res) => {
    res.status(200).json({ status: 'ok' });
  };
}

export interface ReadinessOptions {
  client: UpstreamClient;
  apiKey: string;
  logger: Logger;
  /** Pings Redis; resolves undefined when the facade uses none (no `REDIS_URL`). */
  checkRedis?: () => Promise<{ reachable: boolean; reason?: string } | undefined>;
}

/**
 * `GET /readyz`: 200 when the upstream probe succeeds (and Redis answers, when configured), else
 * 503 with the reason. A replica without its Redis would take webhooks it cannot fan out.
 */
export function handleReadiness(options: ReadinessOptions): RequestHandler {
  // Anyone may ask, without a token: probes that arrive while a probe is under way share its
  // answer, so a flood of them costs the upstream one call at a time, not one call each.
  let inFlight: Promise<Readiness> | undefined;
  return async (_req, res) => {
    inFlight ??= checkReadiness(options, res.locals.requestId as string | undefined).finally(() => {
      inFlight = undefined;
    });
    const { status, body } = await inFlight;
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
