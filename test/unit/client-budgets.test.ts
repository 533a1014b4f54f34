import { describe, expect, test } from 'vitest';
import { parseClientBudgets, rateLimitHeaders } from '../../src/edge/client-budgets.ts';
import { createRateLimits } from '../../src/edge/rate-limits.ts';
import { createLogger } from '../../src/logger.ts';

const logger = createLogger({ level: 'error', write: () => {} });

describe('parseClientBudgets', () => {
  test('reads client ids and operations, blanks and spaces around entries ignored', () => {
    expect(parseClientBudgets(' batch-job=8, web-app=600 ,,')).toEqual({
      budgets: new Map([
        ['batch-job', 8],
        ['web-app', 600],
      ]),
    });
  });

  test('names every bad entry in one problem', () => {
    const parsed = parseClientBudgets('a=b=8,ok=1,zero=0,=5,nothing,x=1e3');
    expect(parsed).toHaveProperty('problem');
    const { problem } = parsed as { problem: string };
    for (const entry of ['"a=b=8"', '"zero=0"', '"=5"', '"nothing"', '"x=1e3"'])
      expect(problem).toContain(entry);
    expect(problem).not.toContain('"ok=1"');
  });
});

describe('rateLimitHeaders', () => {
  test('writes the two fields as Structured Field lists', () => {
    expect(
      rateLimitHeaders({
        policy: 'per-client',
        quota: 600,
        windowSeconds: 60,
        remaining: 599,
        resetSeconds: 42,
      }),
    ).toEqual({ 'ratelimit-policy': '"per-client";q=600;w=60', ratelimit: '"per-client";r=599;t=42' });
  });
});

describe('the operations budgets report what is left', () => {
  const limits = createRateLimits({
    config: {
      enabled: true,
      windowSeconds: 60,
      requests: 3,
      byClient: new Map([['batch-job', 2]]),
      failedAuth: 2,
      wsConnects: 2,
      subscriptions: 2,
    },
    keyPrefix: 'unit:',
    logger,
  });

  test('a named client counts down its own size, then is refused with nothing left', async () => {
    const first = await limits.consume('request', 'client:batch-job');
    const second = await limits.consume('request', 'client:batch-job');
    const third = await limits.consume('request', 'client:batch-job');
    expect(first).toMatchObject({ allowed: true, quota: { policy: 'per-client', quota: 2, remaining: 1 } });
    expect(second).toMatchObject({ allowed: true, quota: { remaining: 0 } });
    expect(third).toMatchObject({ allowed: false, quota: { policy: 'per-client', remaining: 0 } });
    if (third.allowed) throw new Error('unreachable');
    expect(third.quota?.resetSeconds).toBe(third.retryAfterSeconds);
  });

  test('a subject and an address keep RATE_LIMIT_REQUESTS under their own policy', async () => {
    expect(await limits.consume('request', 'sub:alice')).toMatchObject({
      quota: { policy: 'per-caller', quota: 3, remaining: 2 },
    });
    expect(await limits.consume('request', 'ip:192.0.2.9')).toMatchObject({
      quota: { policy: 'per-address', quota: 3, remaining: 2 },
    });
  });

  test('other budgets report nothing, and a client without a budget is no key', async () => {
    expect(await limits.consume('ws-connect', 'sub:alice')).toEqual({ allowed: true });
    expect(limits.hasClientBudget('batch-job')).toBe(true);
    expect(limits.hasClientBudget('web-app')).toBe(false);
    await expect(limits.consume('request', 'client:web-app')).rejects.toThrow(TypeError);
  });
});
