import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { createRateLimits, type RateLimits, type RateKey } from '../../src/edge/rate-limits.ts';
import { sendRefusal } from '../../src/edge/http.ts';
import { graphQLErrorOf, rateLimited } from '../../src/edge/refusal.ts';
import { createFormatError } from '../../src/errors/format-error.ts';
import type { RateLimitsConfig } from '../../src/edge/config.ts';
import { createLogger } from '../../src/logger.ts';
import { startRedisServer } from '../../scripts/redis-server.ts';
import { freePort } from '../support/harness/gateways.ts';
import { connectRedis, uniqueRedisPrefix } from '../support/harness/redis.ts';

const logLines: string[] = [];
const logger = createLogger({ level: 'debug', write: (line) => logLines.push(line) });

function limitsConfig(overrides: Partial<RateLimitsConfig> = {}): RateLimitsConfig {
  return {
    enabled: true,
    windowSeconds: 60,
    requests: 3,
    failedAuth: 2,
    wsConnects: 5,
    subscriptions: 5,
    ...overrides,
  };
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * A real express server spending the operations budget per caller (here from a test header) and
 * answering a spent budget with the door's one rate-limited refusal. How the facade itself mounts
 * the door is tested end to end in test/integration/edge-door.test.ts.
 */
async function startLimitedServer(limits: RateLimits): Promise<string> {
  const app = express();
  app.post('/graphql', (req, res, next) => {
    limits.consume('request', `sub:${req.get('x-test-subject') ?? 'alice'}`).then((decision) => {
      if (decision.allowed) res.json({ data: { ok: true } });
      else sendRefusal(res, rateLimited(decision.retryAfterSeconds));
    }, next);
  });
  const server = http.createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
}

function post(url: string, subject = 'alice', token = 'Bearer good'): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { authorization: token, 'x-test-subject': subject } });
}

async function consumeTimes(
  limits: RateLimits,
  bucket: Parameters<RateLimits['consume']>[0],
  key: RateKey,
  times: number,
) {
  const decisions = [];
  for (let i = 0; i < times; i += 1) decisions.push(await limits.consume(bucket, key));
  return decisions.map((decision) => decision.allowed);
}

describe('rate limits over HTTP (one replica, in memory)', () => {
  test('a caller gets its budget, then 429 with Retry-After and a RATE_LIMITED body', async () => {
    const url = await startLimitedServer(
      createRateLimits({ config: limitsConfig(), keyPrefix: 't:', logger }),
    );

    for (let i = 0; i < 3; i += 1) expect((await post(url)).status).toBe(200);
    const refused = await post(url);

    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await refused.json()).toEqual({
      errors: [
        {
          message: `Too many requests; retry after ${retryAfter} s.`,
          extensions: { code: 'RATE_LIMITED', retryAfterSeconds: retryAfter },
        },
      ],
    });
  });

  test('each caller has its own budget', async () => {
    const url = await startLimitedServer(
      createRateLimits({ config: limitsConfig(), keyPrefix: 't:', logger }),
    );
    for (let i = 0; i < 3; i += 1) expect((await post(url, 'alice')).status).toBe(200);
    expect((await post(url, 'alice')).status).toBe(429);
    expect((await post(url, 'bob')).status).toBe(200);
  });

  test('a subscribe message spends from the same budget as an HTTP operation', async () => {
    const limits = createRateLimits({ config: limitsConfig({ requests: 3 }), keyPrefix: 't:', logger });
    expect(await consumeTimes(limits, 'request', 'sub:carol', 2)).toEqual([true, true]);
    expect(await consumeTimes(limits, 'subscribe', 'sub:carol', 2)).toEqual([true, false]);
    expect(await limits.consume('request', 'sub:carol')).toMatchObject({ allowed: false });
  });

  test('connections of a live transport have their own budget', async () => {
    const limits = createRateLimits({
      config: limitsConfig({ requests: 1, wsConnects: 2 }),
      keyPrefix: 't:',
      logger,
    });
    expect(await consumeTimes(limits, 'ws-connect', 'ip:192.0.2.1', 3)).toEqual([true, true, false]);
    expect(await limits.consume('request', 'ip:192.0.2.1')).toMatchObject({ allowed: true });
  });

  test('switched off, nothing is ever refused', async () => {
    const limits = createRateLimits({
      config: limitsConfig({ enabled: false, requests: 1 }),
      keyPrefix: 't:',
      logger,
    });
    expect(await consumeTimes(limits, 'request', 'sub:dave', 5)).toEqual([true, true, true, true, true]);
  });

  test('a key that is neither a subject nor an address is refused without being quoted', async () => {
    const limits = createRateLimits({ config: limitsConfig(), keyPrefix: 't:', logger });
    const error = await limits
      .consume('request', 'Bearer eyJsecret' as RateKey)
      .catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).not.toContain('eyJsecret');
  });

  test("the graphql-ws refusal carries the same code and delay, and the facade's formatError keeps it", () => {
    const error = graphQLErrorOf(rateLimited(7));
    const expected = {
      message: 'Too many requests; retry after 7 s.',
      extensions: { code: 'RATE_LIMITED', retryAfterSeconds: 7 },
    };
    expect(error.toJSON()).toEqual(expected);
    // graphql-ws errors go through the same formatError as HTTP's; a deliberate error is not masked.
    expect(createFormatError()(error.toJSON(), error)).toEqual(expected);
  });
});

describe('rate limits shared through Redis', () => {
  test('two replicas sharing one Redis share each budget', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const [redisA, redisB] = [connectRedis(), connectRedis()];
    cleanups.push(async () => {
      await redisA.quit();
      await redisB.quit();
    });
    const replicaA = createRateLimits({
      config: limitsConfig({ requests: 4 }),
      redis: redisA,
      keyPrefix,
      logger,
    });
    const replicaB = createRateLimits({
      config: limitsConfig({ requests: 4 }),
      redis: redisB,
      keyPrefix,
      logger,
    });
    await Promise.all([redisA.ping(), redisB.ping()]);

    const decisions = [];
    for (let i = 0; i < 3; i += 1) {
      decisions.push((await replicaA.consume('request', 'sub:erin')).allowed);
      decisions.push((await replicaB.consume('request', 'sub:erin')).allowed);
    }

    expect(decisions).toEqual([true, true, true, true, false, false]);
    expect(await replicaB.check('request', 'sub:erin')).toMatchObject({ allowed: false });
    // The other buckets and callers are untouched.
    expect(await replicaA.consume('request', 'sub:frank')).toMatchObject({ allowed: true });
    expect(await replicaB.check('failed-auth', 'ip:198.51.100.7')).toEqual({ allowed: true });
  });

  test('what reaches Redis is the prefix, the bucket and a digest, never the subject', async () => {
    const keyPrefix = uniqueRedisPrefix();
    const redis = connectRedis();
    cleanups.push(async () => {
      await redis.quit();
    });
    const limits = createRateLimits({ config: limitsConfig(), redis, keyPrefix, logger });
    await redis.ping();
    await limits.consume('request', 'sub:grace@example.com');
    await limits.consume('failed-auth', 'ip:203.0.113.9');

    const keys = (await redis.keys(`${keyPrefix}*`)).sort();
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(new RegExp(`^${escape(keyPrefix)}rate:failed-auth:ip\\.[\\w-]{43}$`));
    expect(keys[1]).toMatch(new RegExp(`^${escape(keyPrefix)}rate:operations:sub\\.[\\w-]{43}$`));
    expect(keys.join(' ')).not.toMatch(/grace|203\.0\.113/);
  });
});

describe('rate limits when Redis fails', () => {
  const ownServers: ChildProcess[] = [];
  afterAll(() => {
    for (const child of ownServers) if (child.exitCode === null) child.kill('SIGKILL');
  });

  /** A redis-server of the test's own, so stopping it disturbs no other test, and a client of it. */
  async function ownRedis() {
    const server = await startRedisServer();
    ownServers.push(server.child);
    const redis = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    cleanups.push(() => redis.disconnect());
    return { server, redis };
  }

  test('an unreachable Redis: the in-memory limiter still limits, nothing throws', async () => {
    const port = await freePort();
    const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 2, lazyConnect: false });
    redis.on('error', () => {});
    cleanups.push(() => redis.disconnect());
    logLines.length = 0;
    const limits = createRateLimits({
      config: limitsConfig({ requests: 3 }),
      redis,
      keyPrefix: 'x:',
      logger,
    });

    expect(await consumeTimes(limits, 'request', 'sub:heidi', 5)).toEqual([true, true, true, false, false]);
    expect(logLines.some((line) => line.includes('rate limits counted in memory'))).toBe(true);
  });

  test('Redis stopped mid-window: counting goes on in memory', async () => {
    const { server, redis } = await ownRedis();
    const limits = createRateLimits({
      config: limitsConfig({ requests: 3 }),
      redis,
      keyPrefix: 'y:',
      logger,
    });
    await redis.ping();

    expect(await consumeTimes(limits, 'request', 'sub:ivan', 2)).toEqual([true, true]);
    expect(await redis.keys('y:*')).toHaveLength(1);
    server.child.kill('SIGKILL');
    await once(server.child, 'exit');

    // Memory starts its own count: the replica admits its own budget, then refuses.
    expect(await consumeTimes(limits, 'request', 'sub:ivan', 4)).toEqual([true, true, true, false]);
  });

  test('a Redis that hangs: the in-memory limiter answers after the timeout', async () => {
    const { server, redis } = await ownRedis();
    const limits = createRateLimits({
      config: limitsConfig({ requests: 2 }),
      redis,
      keyPrefix: 'z:',
      logger,
      redisTimeoutMs: 100,
    });
    await redis.ping();
    server.child.kill('SIGSTOP');
    try {
      expect(await consumeTimes(limits, 'request', 'sub:judy', 3)).toEqual([true, true, false]);
    } finally {
      server.child.kill('SIGCONT');
      server.child.kill('SIGKILL');
    }
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
