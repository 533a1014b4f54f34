/**
 * `/readyz` and a Redis that stops answering (a real `redis-server` of the test's own, stopped with
 * SIGSTOP and let go on with SIGCONT, as a node cut off by its network: its port stays held, so no
 * other test's server takes it meanwhile): the replica stays ready, `degraded`, while Redis has been
 * out for no longer than `READINESS_REDIS_GRACE_SECONDS`, answers 503 once it has, and is ready
 * again when Redis is back; a draining replica answers 503 at once whatever Redis does.
 */
import http from 'node:http';
import { afterEach, describe, expect, onTestFinished, test } from 'vitest';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server.ts';
import { uniqueRedisPrefix } from '../support/harness/redis.ts';
import { sampleReadiness, type ReadinessBody } from '../support/harness/readiness-sampler.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { scrape, seriesKey } from '../support/metrics.ts';

const GRACE_SECONDS = 2;

/** What a test started, stopped after it whatever happens. */
const started: { stack?: Stack; redis?: RedisServer } = {};

afterEach(async () => {
  started.redis?.child.kill('SIGCONT');
  await started.stack?.close();
  await started.redis?.stop();
  delete started.stack;
  delete started.redis;
});

/** Starts redis-server; stopped after the test. */
async function ownRedis(): Promise<RedisServer> {
  started.redis = await startRedisServer();
  return started.redis;
}

/** Stops `redis` where it stands (SIGSTOP): it answers nothing, and its connections stay open. */
const freeze = (redis: RedisServer): boolean => redis.child.kill('SIGSTOP');
/** Lets `redis` go on (SIGCONT): it answers what waited, and what comes. */
const thaw = (redis: RedisServer): boolean => redis.child.kill('SIGCONT');

/** A facade on `redisUrl`, every `/readyz` checked afresh; closed after the test. */
async function facadeOn(
  redisUrl: string,
  graceSeconds: number,
  env: Record<string, string> = {},
): Promise<Stack> {
  started.stack = await startStack({
    env: {
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: uniqueRedisPrefix(),
      READINESS_REDIS_GRACE_SECONDS: String(graceSeconds),
      READINESS_CACHE_MS: '0',
      ...env,
    },
  });
  return started.stack;
}

/** A facade whose Redis has answered it: only from then on does an outage get the grace. */
async function facadeThatReachedRedis(
  graceSeconds: number,
  env: Record<string, string> = {},
): Promise<{ stack: Stack; redis: RedisServer }> {
  const redis = await ownRedis();
  const stack = await facadeOn(redis.url, graceSeconds, env);
  expect(await readiness(stack)).toEqual({
    status: 200,
    body: {
      status: 'ready',
      upstream: { reachable: true, environment: 'sandbox' },
      redis: { reachable: true },
    },
  });
  return { stack, redis };
}

async function readiness(stack: Stack): Promise<{ status: number; body: ReadinessBody }> {
  const response = await fetch(`${stack.facadeUrl}/readyz`);
  return { status: response.status, body: (await response.json()) as ReadinessBody };
}

/**
 * `/readyz` through `agent`'s kept-alive connection: once a shutdown began, the listener takes no
 * new connection, and a request on one already open is answered (with `Connection: close`).
 */
async function readinessThrough(
  stack: Stack,
  agent: http.Agent,
): Promise<{ status: number; body: ReadinessBody }> {
  return new Promise((resolve, reject) => {
    http
      .get(`${stack.facadeUrl}/readyz`, { agent }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          resolve({ status: response.statusCode!, body: JSON.parse(text) as ReadinessBody });
        });
      })
      .on('error', reject);
  });
}

/** Asks `/readyz` until `until` holds of its answer; the last answer. */
async function readinessUntil(
  stack: Stack,
  until: (answer: { status: number; body: ReadinessBody }) => boolean,
  message: string,
): Promise<{ status: number; body: ReadinessBody }> {
  let last: { status: number; body: ReadinessBody } | undefined;
  await waitFor(
    () => last !== undefined && until(last),
    message,
    loadScaledMs(15_000),
    async () => {
      last = await readiness(stack);
    },
  );
  return last!;
}

const unreachableGauge = async (stack: Stack): Promise<number | undefined> =>
  (await scrape(stack.metricsUrl)).get(seriesKey('facade_readiness_redis_unreachable_seconds'));

/** The log lines whose message is `message`. */
const linesSaying = (stack: Stack, message: string): Record<string, unknown>[] =>
  stack
    .logs()
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === message);

describe('/readyz while Redis is out of reach', () => {
  test('stays 200 degraded within the grace, turns 503 after it and not before, and 200 once Redis is back', async () => {
    const { stack, redis } = await facadeThatReachedRedis(GRACE_SECONDS);
    const sampler = sampleReadiness(stack.facadeUrl);
    const frozenAt = performance.now();
    freeze(redis);
    await waitFor(
      () => sampler.samples.some((sample) => sample.status === 503),
      'a 503 once the grace has passed',
      GRACE_SECONDS * 1000 + loadScaledMs(5_000),
    );
    // A second more of the outage: 503 stays.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const gaugeDuringOutage = await unreachableGauge(stack);
    const samples = await sampler.stop();

    const firstRefusal = samples.findIndex((sample) => sample.status === 503);
    const seenOut = samples.slice(0, firstRefusal).filter((sample) => sample.body.redis?.reachable === false);
    // Seen out of reach, and still ready: reported, with how long and the grace.
    expect(seenOut.length).toBeGreaterThan(0);
    for (const sample of seenOut) {
      expect(sample.status).toBe(200);
      expect(sample.body).toMatchObject({
        status: 'degraded',
        redis: { reachable: false, graceSeconds: GRACE_SECONDS },
      });
      expect(sample.body.redis!.unreachableSeconds).toBeLessThanOrEqual(GRACE_SECONDS);
    }
    // Not before the grace: the outage began when Redis was frozen, at the earliest.
    expect(samples[firstRefusal]!.answeredAt - frozenAt).toBeGreaterThanOrEqual(GRACE_SECONDS * 1000);
    for (const sample of samples.slice(firstRefusal)) {
      expect(sample.status).toBe(503);
      expect(sample.body).toMatchObject({
        status: 'unavailable',
        redis: { reachable: false, graceSeconds: GRACE_SECONDS },
      });
      expect(sample.body.redis!.unreachableSeconds).toBeGreaterThan(GRACE_SECONDS);
    }
    expect(gaugeDuringOutage).toBeGreaterThan(GRACE_SECONDS);
    // The log says which: within the grace the replica stays ready; after it, not ready.
    const withinGrace = 'redis out of reach; the replica stays ready within its grace';
    expect(linesSaying(stack, withinGrace)).not.toEqual([]);
    expect(linesSaying(stack, 'not ready')).toContainEqual(
      expect.objectContaining({ reason: expect.stringMatching(/^redis_/) as unknown }),
    );

    // Redis back: ready again, and the gauge back to 0.
    thaw(redis);
    const back = await readinessUntil(
      stack,
      ({ status, body }) => status === 200 && body.status === 'ready',
      'ready again once Redis answers',
    );
    expect(back.body.redis).toEqual({ reachable: true });
    expect(await unreachableGauge(stack)).toBe(0);
  }, 60_000);

  test('a replica whose Redis never answered it is not ready at once: it gets no grace', async () => {
    // A loopback port nothing listens on (port 1 is reserved and closed here).
    const stack = await facadeOn('redis://127.0.0.1:1', 60);
    const { status, body } = await readiness(stack);
    expect(status).toBe(503);
    expect(body).toMatchObject({ status: 'unavailable', redis: { reachable: false } });
  });
});

describe('a draining replica', () => {
  test('answers 503 draining at once, even while Redis is out within its grace', async () => {
    // The kept-alive connection the probe asks on stays open into the shutdown.
    const { stack, redis } = await facadeThatReachedRedis(60, { SHUTDOWN_IDLE_RELEASE_MS: '5000' });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    onTestFinished(() => agent.destroy());
    freeze(redis);
    let seenOut: { status: number; body: ReadinessBody } | undefined;
    await waitFor(
      () => seenOut?.body.redis?.reachable === false,
      'Redis seen out of reach',
      loadScaledMs(15_000),
      async () => {
        seenOut = await readinessThrough(stack, agent);
      },
    );
    // Within the grace: ready, degraded.
    expect(seenOut).toMatchObject({ status: 200, body: { status: 'degraded' } });

    const closing = stack.app.close();
    const askedAt = performance.now();
    const draining = await readinessThrough(stack, agent);
    const answeredInMs = performance.now() - askedAt;
    expect(draining).toEqual({ status: 503, body: { status: 'draining' } });
    // At once: no PING and no upstream call is waited for.
    expect(answeredInMs).toBeLessThan(loadScaledMs(500));
    // Redis back, so the shutdown closes its connections as it would.
    thaw(redis);
    await closing;
  }, 60_000);
});
