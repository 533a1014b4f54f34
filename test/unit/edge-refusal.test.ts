/**
 * The refusal table: how each refusal reads over HTTP and over graphql-ws, from one place.
 */
import { CloseCode } from 'graphql-ws';
import { describe, expect, test } from 'vitest';
import {
  closeOf,
  endsConnection,
  graphQLErrorsOf,
  httpAnswerOf,
  rateLimited,
  refuse,
  REFUSALS,
  type RefusalReason,
} from '../../src/edge/refusal.ts';

describe('the refusal table', () => {
  test('never uses 4429, which graphql-ws means as "too many initialisation requests"', () => {
    for (const row of Object.values(REFUSALS))
      expect(row.ws.close.code).not.toBe(CloseCode.TooManyInitialisationRequests);
  });

  test('uses graphql-ws close codes where it has one, and RFC 6455 codes otherwise', () => {
    const graphqlWs = new Set<number>(Object.values(CloseCode).filter((code) => typeof code === 'number'));
    for (const row of Object.values(REFUSALS)) {
      const { code } = row.ws.close;
      expect(graphqlWs.has(code) || (code >= 1000 && code < 1016)).toBe(true);
    }
  });

  test.each<[RefusalReason, number, string]>([
    ['unauthenticated', 401, 'Bearer'],
    ['invalid-credentials', 401, 'Bearer error="invalid_token"'],
    ['credentials-expired', 401, 'Bearer error="invalid_token"'],
  ])('%s: HTTP %i with the challenge %s, and close 4401', (reason, status, challenge) => {
    const answer = httpAnswerOf(refuse(reason, 'Authentication required.'));
    expect(answer.status).toBe(status);
    expect(answer.headers['www-authenticate']).toBe(challenge);
    expect(JSON.parse(answer.body)).toEqual({
      errors: [{ message: 'Authentication required.', extensions: { code: 'UNAUTHENTICATED' } }],
    });
    expect(closeOf(refuse(reason, 'x')).code).toBe(4401);
  });

  test('a rate limit: 429 with Retry-After over HTTP; an error for the operation, or close 1013 with the wait', () => {
    const refusal = rateLimited(7);
    const answer = httpAnswerOf(refusal);
    expect(answer.status).toBe(429);
    expect(answer.headers['retry-after']).toBe('7');
    expect(JSON.parse(answer.body)).toEqual({
      errors: [
        {
          message: 'Too many requests; retry after 7 s.',
          extensions: { code: 'RATE_LIMITED', retryAfterSeconds: 7 },
        },
      ],
    });
    expect(endsConnection(refusal)).toBe(false);
    expect(graphQLErrorsOf(refusal).map((error) => error.toJSON())).toEqual([
      {
        message: 'Too many requests; retry after 7 s.',
        extensions: { code: 'RATE_LIMITED', retryAfterSeconds: 7 },
      },
    ]);
    expect(closeOf(refusal)).toEqual({ code: 1013, reason: 'Too many requests; retry after 7 s' });
  });

  test('an expired token ends a graphql-ws connection; a document refusal ends only its operation', () => {
    expect(endsConnection(refuse('credentials-expired', 'x'))).toBe(true);
    for (const reason of [
      'validation-failed',
      'parse-failed',
      'bad-input',
      'not-trusted-document',
    ] as const) {
      expect(endsConnection(refuse(reason, 'x'))).toBe(false);
      expect(httpAnswerOf(refuse(reason, 'x')).status).toBe(400);
    }
  });
});
