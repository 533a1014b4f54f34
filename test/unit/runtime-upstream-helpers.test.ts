import { inspect } from 'node:util';
import { describe, expect, test } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { capCallBudget, createCallBudget, spendCall } from '../../src/upstream/call-budget.ts';
import { createCredentials } from '../../src/upstream/credentials.ts';
import { UnsafeIdError, UpstreamProblemError, UpstreamUnavailableError } from '../../src/upstream/errors.ts';
import { parseProblem } from '../../src/upstream/problem.ts';
import { acceptCallerRequestId, resolveRequestId } from '../../src/upstream/request-id.ts';
import { isPlainId, MAX_ID_LENGTH, restPath } from '../../src/upstream/rest-path.ts';
import { backoffDelayMs, isRetryable } from '../../src/upstream/retry.ts';
import type { Problem } from '../../src/upstream/types.ts';

const POLICY = { maxAttempts: 3, budget: 10, baseDelayMs: 100, maxDelayMs: 1_000 };

function problemError(status: number, code: string, retryable?: boolean): UpstreamProblemError {
  const problem: Problem = { type: 'about:blank', title: 't', status, code, detail: 'd', correlationId: 'r' };
  return new UpstreamProblemError(retryable === undefined ? problem : { ...problem, retryable });
}

describe('backoffDelayMs', () => {
  test('doubles from the base delay with up to half of it as jitter', () => {
    expect(backoffDelayMs(1, POLICY, () => 0)).toBe(50);
    expect(backoffDelayMs(1, POLICY, () => 1)).toBe(100);
    expect(backoffDelayMs(2, POLICY, () => 0)).toBe(100);
    expect(backoffDelayMs(3, POLICY, () => 1)).toBe(400);
  });

  test('never exceeds the maximum delay', () => {
    expect(backoffDelayMs(20, POLICY, () => 1)).toBe(1_000);
    expect(backoffDelayMs(20, POLICY, () => 0)).toBe(500);
  });
});

describe('isRetryable', () => {
  test.each([
    ['internal_error (retryable: true)', problemError(500, 'internal_error', true), true],
    ['request_failed (retryable: true)', problemError(502, 'request_failed', true), true],
    ['idempotency_request_in_progress', problemError(409, 'idempotency_request_in_progress'), true],
    ['a 503 without a retryable flag', problemError(503, 'upstream_http_error'), true],
    ['a 500 marked not retryable', problemError(500, 'internal_error', false), false],
    ['validation_error', problemError(400, 'validation_error', false), false],
    ['conflict', problemError(409, 'conflict', false), false],
    ['a 404 without a flag', problemError(404, 'not_found'), false],
    ['a connection reset', new UpstreamUnavailableError('connection_reset', 'r'), true],
    ['a headers timeout', new UpstreamUnavailableError('headers_timeout', 'r'), true],
    ['an unreadable answer', new UpstreamUnavailableError('invalid_response', 'r'), false],
    ['a programming error', new TypeError('x is undefined'), false],
  ])('%s → %s', (_name, error, expected) => {
    expect(isRetryable(error)).toBe(expected);
  });
});

describe('parseProblem', () => {
  const base = { status: 500, requestId: 'req_1', secrets: ['sk_live_secret'] };

  test('keeps a problem+json body whole', () => {
    const body = {
      type: 'https://docs.platform.test/v3/errors/conflict',
      title: 'Conflict',
      status: 409,
      code: 'conflict',
      detail: 'Already archived.',
      correlationId: 'req_9',
      statusReason: { code: 'account_archived', message: 'm', actor: 'developer', retryable: false },
      somethingNew: { kept: true },
    };

    expect(
      parseProblem({
        ...base,
        status: 409,
        contentType: 'application/problem+json',
        text: JSON.stringify(body),
      }),
    ).toEqual(body);
  });

  test('turns a body that is not a problem into one with the response status', () => {
    expect(
      parseProblem({ ...base, status: 503, contentType: 'text/html', text: '<h1>Bad gateway</h1>' }),
    ).toEqual({
      type: 'about:blank',
      title: 'Upstream error',
      status: 503,
      code: 'upstream_http_error',
      detail: 'The upstream API answered with HTTP status 503.',
      correlationId: 'req_1',
    });
  });

  test('fills the members a careless upstream omits', () => {
    const text = JSON.stringify({ title: 'Nope', status: 404, code: 'not_found' });

    expect(parseProblem({ ...base, status: 404, contentType: 'application/json', text })).toEqual({
      type: 'about:blank',
      title: 'Nope',
      status: 404,
      code: 'not_found',
      detail: 'Nope',
      correlationId: 'req_1',
    });
  });

  test('redacts an echoed API key', () => {
    const text = JSON.stringify({
      title: 'Bad key',
      status: 401,
      code: 'unauthorized',
      detail: 'sk_live_secret is bad',
    });

    const parsed = parseProblem({ ...base, status: 401, contentType: 'application/problem+json', text });

    expect(parsed.detail).toBe('[redacted] is bad');
  });
});

describe('restPath', () => {
  test('puts plain ids into the path as they are', () => {
    expect(restPath`/v3/customers/${'cus_acme'}/accounts/${'acc_5f0c9a1e-2b7d'}`).toBe(
      '/v3/customers/cus_acme/accounts/acc_5f0c9a1e-2b7d',
    );
  });

  test.each([
    '../../cus_globex/accounts/acc_globex_eth',
    '..',
    '.',
    'acc_..',
    '%2e%2e',
    'a/b',
    'a%2Fb',
    'a\\b',
    'a;b',
    'a?b',
    'a#b',
    'a b',
    'a\u0000b',
    'acc_é',
    '',
    '_acc',
    'x'.repeat(MAX_ID_LENGTH + 1),
  ])('refuses %j before any path is built', (id) => {
    expect(() => restPath`/v3/customers/cus_acme/accounts/${id}`).toThrow(UnsafeIdError);
    expect(isPlainId(id)).toBe(false);
  });

  test('accepts an id of the longest length', () => {
    expect(isPlainId('x'.repeat(MAX_ID_LENGTH))).toBe(true);
  });
});

describe('request ids', () => {
  test("keeps the caller's safe id as the request id, and replaces anything else with a new one", () => {
    expect(resolveRequestId('order-42')).toBe('order-42');
    for (const value of [undefined, '', 'has space', 'x'.repeat(65), 'tab\there']) {
      expect(resolveRequestId(value)).toMatch(/^req_[0-9a-f]{24}$/);
    }
  });

  test.each([
    'order-42',
    '01J9Z3QK8Y5V6W7X8Y9Z0A1B2C',
    '4bf92f3577b34da6a3ce929d0e0e4736',
    'a:b.c_d',
    'x'.repeat(64),
  ])("accepts the caller's safe id %j", (value) => {
    expect(acceptCallerRequestId(value)).toBe(value);
  });

  test.each([
    undefined,
    '',
    'has space',
    'x'.repeat(65),
    'tab\there',
    'line\nbreak',
    '"quoted"',
    '../../etc',
    '-starts-with-dash',
    'ünïcode',
    '{"level":"error"}',
  ])("drops the caller's unsafe id %j", (value) => {
    expect(acceptCallerRequestId(value)).toBeUndefined();
  });
});

describe('credentials', () => {
  test('never show the key when serialised or inspected', () => {
    const credentials = createCredentials('sk_live_secret');

    expect(credentials.apiKey).toBe('sk_live_secret');
    expect(JSON.stringify({ credentials })).not.toContain('sk_live_secret');
    expect(inspect({ credentials }, { depth: 5 })).not.toContain('sk_live_secret');
    expect(Object.keys(credentials)).toEqual([]);
  });
});

describe('createLogger', () => {
  test('writes one JSON line per entry at or above its level, secrets redacted', () => {
    const lines: string[] = [];
    const logger = createLogger({
      level: 'info',
      write: (line) => lines.push(line),
      redact: ['sk_live_secret'],
    });

    logger.debug('hidden');
    logger
      .child({ component: 'upstream' })
      .warn('slow', { detail: 'key sk_live_secret', error: new Error('boom') });

    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 'warn',
      msg: 'slow',
      component: 'upstream',
      detail: 'key [redacted]',
      error: { name: 'Error', message: 'boom' },
    });
  });

  test('silent writes nothing', () => {
    const lines: string[] = [];
    createLogger({ level: 'silent', write: (line) => lines.push(line) }).error('nothing');

    expect(lines).toEqual([]);
  });
});

describe('capCallBudget', () => {
  test('lowers the limit to what the cost allows, counting the calls already made', () => {
    const budget = createCallBudget(100);
    spendCall(budget);
    spendCall(budget);

    capCallBudget(budget, 5);

    expect(budget).toEqual({ limit: 5, remaining: 3, sent: 0 });
    spendCall(budget);
    spendCall(budget);
    spendCall(budget);
    expect(() => spendCall(budget)).toThrow('This operation needs more than 5 upstream calls');
  });

  test('never raises the limit', () => {
    const budget = createCallBudget(100);

    capCallBudget(budget, 5_000);

    expect(budget).toEqual({ limit: 100, remaining: 100, sent: 0 });
  });
});
