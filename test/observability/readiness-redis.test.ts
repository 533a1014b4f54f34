/**
 * `/readyz` with `REDIS_URL`: ready while Redis answers, 503 with `redis.reachable: false` when it
 * does not, and no word about Redis when the facade uses none.
 */
import { describe, expect, it } from 'vitest';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { startStack } from '../support/harness/stack.ts';

async function readiness(env: Record<string, string>) {
  const stack = await startStack({ env });
  try {
    const response = await fetch(`${stack.facadeUrl}/readyz`);
    return {
      status: response.status,
      body: (await response.json()) as Record<string, unknown>,
      logs: stack.logs(),
    };
  } finally {
    await stack.close();
  }
}

describe('/readyz and Redis', () => {
  it('reports Redis reachable with the real Redis of the run', async () => {
    const { status, body } = await readiness({
      REDIS_URL: requireRedisUrl(),
      REDIS_KEY_PREFIX: uniqueRedisPrefix(),
    });
    expect(status).toBe(200);
    expect(body).toEqual({
      status: 'ready',
      upstream: { reachable: true, environment: 'sandbox' },
      redis: { reachable: true },
    });
  });

  it('answers 503 when Redis cannot be reached, without the URL in the answer or the logs', async () => {
    // A loopback port nothing listens on (port 1 is reserved and closed here).
    const url = 'redis://:s3cret-password@127.0.0.1:1';
    const { status, body, logs } = await readiness({ REDIS_URL: url });
    expect(status).toBe(503);
    expect(body).toEqual({
      status: 'unavailable',
      upstream: { reachable: true, environment: 'sandbox' },
      redis: { reachable: false, reason: expect.stringMatching(/^(unreachable|timeout)$/) },
    });
    expect(JSON.stringify(body)).not.toContain('s3cret');
    expect(logs.join('\n')).not.toContain('s3cret');
  });

  it('says nothing of Redis without REDIS_URL', async () => {
    const { status, body } = await readiness({});
    expect(status).toBe(200);
    expect(body).toEqual({ status: 'ready', upstream: { reachable: true, environment: 'sandbox' } });
  });
});
