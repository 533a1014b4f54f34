/**
 * An id refused before it could reach an upstream path becomes BAD_USER_INPUT in the one function
 * that maps errors, at the argument's input path when the argument is known.
 */
import { GraphQLError } from 'graphql';
import { describe, expect, test } from 'vitest';
import { IdArgumentError } from '../../src/errors/id-argument.ts';
import { MutationFailure } from '../../src/errors/mutation-failure.ts';
import { isUnexpectedError, toGraphQLError } from '../../src/errors/to-graphql-error.ts';
import { UnsafeIdError } from '../../src/upstream/errors.ts';
import { MAX_ID_LENGTH } from '../../src/upstream/rest-path.ts';

describe('toGraphQLError of a refused id', () => {
  test('names the argument it came from', () => {
    const error = toGraphQLError(
      new IdArgumentError(['input', 'trigger', 'accountId'], new UnsafeIdError('a/b')),
    );

    expect(error.message).toBe(
      '"a/b" in "input.trigger.accountId" is not an id: ids are 1 to 128 letters, digits, "_" and "-", starting with a letter or a digit.',
    );
    expect(error.extensions).toEqual({
      code: 'BAD_USER_INPUT',
      argumentName: 'input.trigger.accountId',
      inputPath: ['input', 'trigger', 'accountId'],
    });
  });

  test('keeps the response path of the field and the idempotency key of a mutation', () => {
    const located = new GraphQLError('wrapped', {
      path: ['archiveCustomerDocument'],
      originalError: new MutationFailure(
        'key-1',
        new IdArgumentError(['input', 'documentId'], new UnsafeIdError('..')),
      ),
    });

    const error = toGraphQLError(located);

    expect(error.path).toEqual(['archiveCustomerDocument']);
    expect(error.extensions).toEqual({
      code: 'BAD_USER_INPUT',
      argumentName: 'input.documentId',
      inputPath: ['input', 'documentId'],
      idempotencyKey: 'key-1',
    });
  });

  test('refused by restPath without a known argument, it is BAD_USER_INPUT with no input path', () => {
    const error = toGraphQLError(new GraphQLError('wrapped', { originalError: new UnsafeIdError('%2e%2e') }));

    expect(error.message).toMatch(/^"%2e%2e" is not an id:/);
    expect(error.extensions).toEqual({ code: 'BAD_USER_INPUT' });
    expect(isUnexpectedError(new UnsafeIdError('..'))).toBe(false);
  });

  test('shows no more of a long id than an id could hold', () => {
    const error = toGraphQLError(new UnsafeIdError(`${'x'.repeat(MAX_ID_LENGTH)}/${'y'.repeat(10_000)}`));

    expect(error.message).toContain(`"${'x'.repeat(MAX_ID_LENGTH)}…"`);
    expect(error.message.length).toBeLessThan(MAX_ID_LENGTH + 200);
  });
});
