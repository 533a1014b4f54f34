import { GraphQLError, Kind, type GraphQLFormattedError } from 'graphql';
import { describe, expect, test } from 'vitest';
import {
  errorCodeForProblem,
  errorCodeForStatus,
  KNOWN_PROBLEM_CODES,
} from '../../src/errors/error-codes.ts';
import { createFormatError } from '../../src/errors/format-error.ts';
import { parameterToArgumentPath, pointerToInputPath } from '../../src/errors/input-path.ts';
import { isUnexpectedError, toGraphQLError } from '../../src/errors/to-graphql-error.ts';
import { MutationFailure } from '../../src/errors/mutation-failure.ts';
import {
  UpstreamCallLimitError,
  UpstreamCancelledError,
  UpstreamProblemError,
  UpstreamUnavailableError,
} from '../../src/upstream/errors.ts';
import type { Problem } from '../../src/upstream/types.ts';

function problem(overrides: Partial<Problem> & Pick<Problem, 'status' | 'code'>): Problem {
  return {
    type: `https://docs.platform.test/v3/errors/${overrides.code.replaceAll('_', '-')}`,
    title: 'A title',
    detail: 'A detail.',
    correlationId: 'req_1',
    ...overrides,
  };
}

/** A GraphQLError as graphql-js builds it around a resolver's error. */
function located(originalError: Error): GraphQLError {
  return new GraphQLError(originalError.message, {
    path: ['customer', 'accounts'],
    originalError,
    nodes: [{ kind: Kind.NAME, value: 'accounts', loc: undefined }],
  });
}

describe('the problem code table', () => {
  test.each([
    [400, 'validation_error', 'BAD_USER_INPUT'],
    [401, 'unauthorized', 'UNAUTHENTICATED'],
    [403, 'forbidden', 'FORBIDDEN'],
    [404, 'not_found', 'NOT_FOUND'],
    [404, 'customer_not_found', 'NOT_FOUND'],
    [409, 'conflict', 'CONFLICT'],
    [409, 'idempotency_conflict', 'IDEMPOTENCY_CONFLICT'],
    [409, 'idempotency_request_in_progress', 'IDEMPOTENCY_REQUEST_IN_PROGRESS'],
    [409, 'quote_already_executed', 'CONFLICT'],
    [422, 'invalid_capability', 'UNPROCESSABLE'],
    [500, 'internal_error', 'INTERNAL_SERVER_ERROR'],
    [502, 'request_failed', 'UPSTREAM_UNAVAILABLE'],
    [405, 'method_not_allowed', 'INTERNAL_SERVER_ERROR'],
    [413, 'payload_too_large', 'BAD_USER_INPUT'],
    [415, 'unsupported_media_type', 'INTERNAL_SERVER_ERROR'],
  ])('%i %s → %s', (status, code, expected) => {
    expect(errorCodeForProblem({ status, code })).toBe(expected);
  });

  test('covers every known problem code', () => {
    for (const code of KNOWN_PROBLEM_CODES) {
      expect(() => errorCodeForProblem({ status: 400, code })).not.toThrow();
    }
  });

  test.each([
    [400, 'BAD_USER_INPUT'],
    [401, 'UNAUTHENTICATED'],
    [403, 'FORBIDDEN'],
    [404, 'NOT_FOUND'],
    [409, 'CONFLICT'],
    [422, 'UNPROCESSABLE'],
    [429, 'BAD_REQUEST'],
    [500, 'INTERNAL_SERVER_ERROR'],
    [502, 'UPSTREAM_UNAVAILABLE'],
    [503, 'UPSTREAM_UNAVAILABLE'],
    [504, 'UPSTREAM_UNAVAILABLE'],
  ])('an unknown code with status %i → %s', (status, expected) => {
    expect(errorCodeForProblem({ status, code: 'brand_new_code' })).toBe(expected);
    expect(errorCodeForStatus(status)).toBe(expected);
  });
});

describe('pointerToInputPath', () => {
  test.each([
    ['/person/firstName', ['input', 'person', 'firstName']],
    ['/roles/1', ['input', 'roles', 1]],
    ['/breakdown/developer/bips', ['input', 'breakdown', 'developer', 'bips']],
    ['', ['input']],
    ['/a~1b/c~0d', ['input', 'a/b', 'c~d']],
    ['/007', ['input', '007']],
  ])('%j → %j', (pointer, path) => {
    expect(pointerToInputPath(pointer)).toEqual(path);
  });
});

describe('parameterToArgumentPath', () => {
  test.each([
    ['Idempotency-Key', ['input', 'idempotencyKey']],
    ['idempotency-key', ['input', 'idempotencyKey']],
    ['limit', ['first']],
    ['cursor', ['after']],
    ['updatedSince', ['updatedSince']],
  ])('%s → %j', (parameter, path) => {
    expect(parameterToArgumentPath(parameter)).toEqual(path);
  });

  test('an unknown parameter has no path', () => {
    expect(parameterToArgumentPath('X-Something')).toBeUndefined();
  });
});

describe('toGraphQLError', () => {
  test('keeps the whole problem, adds paths to field errors, and keeps the response path', () => {
    const upstream = new UpstreamProblemError(
      problem({
        status: 400,
        code: 'validation_error',
        detail: 'The request has invalid fields.',
        retryable: false,
        errors: [
          { pointer: '/person/firstName', code: 'invalid_characters', message: 'No whitespace.' },
          { parameter: 'Idempotency-Key', code: 'invalid_length', message: 'Too long.' },
          { parameter: 'X-Unknown', code: 'invalid_value', message: 'Bad.' },
        ],
      }),
    );

    const error = toGraphQLError(located(upstream)).toJSON();

    expect(error).toEqual({
      message: 'The request has invalid fields.',
      path: ['customer', 'accounts'],
      extensions: {
        code: 'BAD_USER_INPUT',
        problem: {
          type: 'https://docs.platform.test/v3/errors/validation-error',
          title: 'A title',
          status: 400,
          code: 'validation_error',
          detail: 'The request has invalid fields.',
          correlationId: 'req_1',
          retryable: false,
          errors: [
            {
              pointer: '/person/firstName',
              code: 'invalid_characters',
              message: 'No whitespace.',
              path: ['input', 'person', 'firstName'],
            },
            {
              parameter: 'Idempotency-Key',
              code: 'invalid_length',
              message: 'Too long.',
              path: ['input', 'idempotencyKey'],
            },
            { parameter: 'X-Unknown', code: 'invalid_value', message: 'Bad.' },
          ],
        },
      },
    });
  });

  test('keeps every optional problem member the upstream sent', () => {
    const members = {
      transferId: 'trf_1',
      statusReason: { code: 'quote_used', message: 'Used.', actor: 'developer' as const, retryable: false },
      blockingResources: [
        { type: 'transfer' as const, id: 'trf_1', requiredAction: 'wait_for_transfer' as const },
      ],
      capabilities: ['cap_1'],
      reviewAnswer: null,
    };
    const upstream = new UpstreamProblemError(
      problem({ status: 409, code: 'quote_already_executed', ...members }),
    );

    const error = toGraphQLError(upstream);

    expect(error.extensions.code).toBe('CONFLICT');
    expect(error.extensions.problem).toMatchObject({
      ...members,
      // Spelled as the typed `StatusReason.actor` field spells it: one spelling per concept.
      statusReason: { ...members.statusReason, actor: 'DEVELOPER' },
    });
  });

  test('uses the title when the detail is empty', () => {
    const error = toGraphQLError(
      new UpstreamProblemError(problem({ status: 404, code: 'not_found', detail: '' })),
    );

    expect(error.message).toBe('A title');
  });

  test('finds an upstream error through a cause chain', () => {
    const wrapped = new Error('batch failed', {
      cause: new UpstreamUnavailableError('connect_timeout', 'req_9'),
    });

    expect(toGraphQLError(located(wrapped)).toJSON()).toEqual({
      message: 'The upstream API did not accept a connection in time.',
      path: ['customer', 'accounts'],
      extensions: { code: 'UPSTREAM_UNAVAILABLE', reason: 'connect_timeout', requestId: 'req_9' },
    });
  });

  test('turns a spent call budget into TOO_MANY_UPSTREAM_CALLS with the limit, not a masked error', () => {
    const error = located(new UpstreamCallLimitError(3));

    expect(isUnexpectedError(error)).toBe(false);
    expect(toGraphQLError(error).toJSON()).toEqual({
      message: expect.stringContaining('more than 3 upstream calls'),
      path: ['customer', 'accounts'],
      extensions: { code: 'TOO_MANY_UPSTREAM_CALLS', limit: 3 },
    });
  });

  test('turns a call cancelled at the deadline into UPSTREAM_TIMEOUT, and at shutdown into a retryable SHUTTING_DOWN', () => {
    const deadline = located(new UpstreamCancelledError('deadline', 'req_5'));
    const shutdown = located(new UpstreamCancelledError('shutdown', 'req_6'));

    expect(isUnexpectedError(deadline)).toBe(false);
    expect(toGraphQLError(deadline).toJSON()).toEqual({
      message: 'The operation ran out of time before the upstream API answered.',
      path: ['customer', 'accounts'],
      extensions: { code: 'UPSTREAM_TIMEOUT', requestId: 'req_5' },
    });
    expect(toGraphQLError(shutdown).toJSON()).toEqual({
      message: 'The facade is shutting down; send the request again.',
      path: ['customer', 'accounts'],
      extensions: { code: 'SHUTTING_DOWN', retryable: true, requestId: 'req_6' },
    });
  });

  test("gives a mutation's error its idempotency key, whatever the error, a masked one included", () => {
    const upstream = located(new MutationFailure('key-1', new UpstreamCancelledError('deadline', 'req_7')));
    const bug = located(new MutationFailure('key-2', new TypeError('x is undefined')));

    expect(toGraphQLError(upstream).extensions).toEqual({
      code: 'UPSTREAM_TIMEOUT',
      requestId: 'req_7',
      idempotencyKey: 'key-1',
    });
    expect(isUnexpectedError(bug)).toBe(true);
    expect(toGraphQLError(bug).toJSON()).toMatchObject({
      message: 'Unexpected error.',
      extensions: { code: 'INTERNAL_SERVER_ERROR', idempotencyKey: 'key-2' },
    });
  });

  test("says plainly that a document is too deep for the parser, instead of the parser's stack overflow", () => {
    const overflow = new GraphQLError('Maximum call stack size exceeded', {
      extensions: { code: 'GRAPHQL_PARSE_FAILED' },
    });

    expect(toGraphQLError(overflow).toJSON()).toEqual({
      message: 'Syntax Error: The document is nested too deeply to be parsed.',
      extensions: { code: 'GRAPHQL_PARSE_FAILED' },
    });
  });

  test('masks anything else and keeps its location', () => {
    const error = toGraphQLError(located(new Error('ECONNREFUSED 10.0.0.7:5432 password=hunter2')));

    expect(error.toJSON()).toEqual({
      message: 'Unexpected error.',
      path: ['customer', 'accounts'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    expect(isUnexpectedError(located(new Error('x')))).toBe(true);
  });

  test('masks values that are not errors at all', () => {
    expect(toGraphQLError('a string').toJSON()).toEqual({
      message: 'Unexpected error.',
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    expect(toGraphQLError(undefined).extensions.code).toBe('INTERNAL_SERVER_ERROR');
  });

  test("passes GraphQL's own errors through, without Apollo's http hint", () => {
    const validation = new GraphQLError('Cannot query field "x".', {
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', http: { status: 400 } },
    });

    expect(toGraphQLError(validation).toJSON()).toEqual({
      message: 'Cannot query field "x".',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
    expect(isUnexpectedError(validation)).toBe(false);
  });

  test('passes through a variable coercion error Apollo labelled BAD_USER_INPUT', () => {
    const coercion = new GraphQLError('Variable "$at" got invalid value "yesterday".', {
      originalError: new TypeError('DateTime must be RFC 3339'),
      extensions: { code: 'BAD_USER_INPUT' },
    });

    expect(toGraphQLError(coercion).extensions.code).toBe('BAD_USER_INPUT');
    expect(toGraphQLError(coercion).message).toBe('Variable "$at" got invalid value "yesterday".');
  });

  test('passes a deliberate GraphQLError thrown by a resolver through with its code', () => {
    const deliberate = new GraphQLError('first must be at most 100.', {
      extensions: { code: 'BAD_USER_INPUT' },
    });

    expect(toGraphQLError(located(deliberate)).toJSON()).toEqual({
      message: 'first must be at most 100.',
      path: ['customer', 'accounts'],
      extensions: { code: 'BAD_USER_INPUT' },
    });
  });

  test('adds a stack trace only when asked', () => {
    const upstream = new UpstreamProblemError(problem({ status: 500, code: 'internal_error' }));

    expect(toGraphQLError(upstream).extensions.stacktrace).toBeUndefined();
    expect(toGraphQLError(upstream, { includeStacktrace: true }).extensions.stacktrace).toEqual(
      expect.arrayContaining([expect.stringContaining('UpstreamProblemError')]),
    );
  });
});

describe('createFormatError', () => {
  const formatted: GraphQLFormattedError = { message: 'boom', path: ['a'], extensions: { code: 'X' } };

  test('never throws, even for an error whose members throw', () => {
    const hostile = new Proxy(new Error('x'), {
      get() {
        throw new Error('no access');
      },
      getPrototypeOf() {
        throw new Error('no access');
      },
    });

    expect(createFormatError()(formatted, hostile)).toEqual({
      message: 'Unexpected error.',
      path: ['a'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
  });

  test('formats through toGraphQLError', () => {
    const upstream = new UpstreamProblemError(problem({ status: 403, code: 'forbidden' }));

    expect(createFormatError()(formatted, located(upstream))).toMatchObject({
      message: 'A detail.',
      path: ['customer', 'accounts'],
      extensions: { code: 'FORBIDDEN' },
    });
  });
});
