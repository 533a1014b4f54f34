/**
 * The one place where a failure becomes the GraphQL error a client sees: upstream problems keep
 * everything they said, transport failures become UPSTREAM_UNAVAILABLE, GraphQL's own errors pass
 * through, and anything else is masked.
 */
import { GraphQLError, type GraphQLErrorExtensions } from 'graphql';
import {
  describeUnavailableReason,
  UpstreamAccessDeniedError,
  UpstreamCallBudgetSpentError,
  UpstreamCallLimitError,
  UpstreamCancelledError,
  UpstreamProblemError,
  UpstreamUnavailableError,
} from '../upstream/errors.ts';
import type { FieldError, Problem } from '../upstream/types.ts';
import { errorCodeForProblem, type FacadeErrorCode } from './error-codes.ts';
import { type InputPath, parameterToArgumentPath, pointerToInputPath } from './input-path.ts';
import { findIdempotencyKey } from './mutation-failure.ts';
import { findIdRefusal } from './id-argument.ts';
import { MAX_ID_LENGTH } from '../upstream/rest-path.ts';
import { STATUS_REASON_ACTOR_VALUES } from '../enum-values.ts';
import { CursorExpiredError } from './cursor-expired.ts';

export interface ToGraphQLErrorOptions {
  /** Add `extensions.stacktrace` (development only: stack traces reveal internals). */
  includeStacktrace?: boolean;
}

/** A field error of an upstream problem, with the GraphQL input path it names (when known). */
export type GraphQLFieldError = FieldError & { path?: InputPath };

/**
 * `statusReason` as the schema's typed fields spell it: `actor` is the `StatusReasonActor` enum name
 * (a key of `STATUS_REASON_ACTOR_VALUES`), or the upstream's value as it came when outside that set.
 */
export type GraphQLStatusReason = Omit<NonNullable<Problem['statusReason']>, 'actor'> & {
  actor: string;
};

/**
 * `extensions.problem`: the upstream problem, whole, its field errors given GraphQL paths and its
 * `statusReason.actor` spelled as the `StatusReasonActor` enum (one spelling per concept).
 */
export type GraphQLProblem = Omit<Problem, 'errors' | 'statusReason'> & {
  errors?: GraphQLFieldError[];
  statusReason?: GraphQLStatusReason;
};

export const MASKED_MESSAGE = 'Unexpected error.';

/**
 * Codes Apollo Server and graphql-js attach to request errors (parse, validation, variable
 * coercion); such errors describe the caller's document and pass through unchanged.
 */
const PASS_THROUGH_CODES = new Set([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
  'OPERATION_RESOLUTION_FAILURE',
]);

/**
 * Turns any error raised while serving a GraphQL request into the GraphQL error to send.
 *
 * - An {@link UpstreamProblemError} (found anywhere in the `originalError`/`cause` chain) becomes an
 *   error whose message is the problem's detail (or title), whose `extensions.code` follows the
 *   table in docs/errors.md, and whose `extensions.problem` is the whole problem; every field error
 *   keeps its `pointer` and gains the GraphQL input `path` it names.
 * - An id refused before it could reach an upstream path (`UnsafeIdError`, or an `IdArgumentError`
 *   naming the argument it came from) becomes `BAD_USER_INPUT`, with `extensions.inputPath` (and
 *   `argumentName`, the same path dotted) when the argument is known.
 * - An {@link UpstreamUnavailableError} becomes `UPSTREAM_UNAVAILABLE` with its reason (and
 *   `retryable: true` when an open circuit refused it, nothing sent, or the upstream refused the
 *   facade's own key, nothing done: `credential_refused`, which says nothing of the key).
 * - An {@link UpstreamCallLimitError} becomes `TOO_MANY_UPSTREAM_CALLS` with the limit.
 * - An {@link UpstreamCancelledError} becomes `UPSTREAM_TIMEOUT` (the operation's deadline passed)
 *   or `SHUTTING_DOWN` (retryable: the process is stopping).
 * - A {@link CursorExpiredError} (a subscription resumed after a cursor the event log no longer
 *   holds everything after) becomes `CURSOR_EXPIRED` with the cursor and `oldestCursor` (when the
 *   error carries one: never for a scoped caller, see `delivery/subscriber-queue.ts`).
 * - A parse failure caused by the parser's own recursion limit gets a plain message.
 * - An error of a mutation carries `extensions.idempotencyKey`, the key the mutation was sent with.
 * - A GraphQLError raised on purpose (by graphql-js, Apollo Server or a resolver) passes through.
 * - Anything else is masked: `INTERNAL_SERVER_ERROR` with a generic message.
 *
 * The response path and locations of `error` are kept. Never throws for any input.
 */
export function toGraphQLError(error: unknown, options: ToGraphQLErrorOptions = {}): GraphQLError {
  const converted = convert(error, options);
  const idempotencyKey = findIdempotencyKey(error);
  if (idempotencyKey === undefined || converted.extensions.idempotencyKey === idempotencyKey)
    return converted;
  return new GraphQLError(converted.message, {
    nodes: converted.nodes,
    source: converted.source,
    positions: converted.positions,
    path: converted.path,
    extensions: { ...converted.extensions, idempotencyKey },
  });
}

/** Messages of a document nested beyond what the parser's recursion can take. */
const STACK_OVERFLOW = /maximum call stack size exceeded/i;

function convert(error: unknown, options: ToGraphQLErrorOptions): GraphQLError {
  const located = isGraphQLError(error) ? error : undefined;
  const refusedId = findIdRefusal(error);
  if (refusedId) {
    const inputPath = 'inputPath' in refusedId ? refusedId.inputPath : undefined;
    return build(
      located,
      refusedId,
      describeRefusedId(refusedId.id, inputPath),
      inputPath
        ? { code: 'BAD_USER_INPUT' satisfies FacadeErrorCode, argumentName: inputPath.join('.'), inputPath }
        : { code: 'BAD_USER_INPUT' satisfies FacadeErrorCode },
      options,
    );
  }
  const cause = findUpstreamError(error);
  if (cause instanceof UpstreamProblemError) {
    return build(
      located,
      cause,
      cause.problem.detail || cause.problem.title,
      {
        code: errorCodeForProblem(cause.problem),
        problem: toGraphQLProblem(cause.problem),
      },
      options,
    );
  }
  if (cause instanceof UpstreamUnavailableError) {
    return build(
      located,
      cause,
      describeUnavailableReason(cause.reason),
      {
        code: 'UPSTREAM_UNAVAILABLE' satisfies FacadeErrorCode,
        reason: cause.reason,
        // Refused by an open circuit (nothing was sent) or for the facade's own key (the upstream
        // did nothing): the same request later is always safe.
        ...(cause.reason === 'circuit_open' || cause.reason === 'credential_refused'
          ? { retryable: true }
          : {}),
        requestId: cause.requestId,
      },
      options,
    );
  }
  if (cause instanceof UpstreamCancelledError) {
    return build(
      located,
      cause,
      cause.message,
      cause.reason === 'deadline'
        ? { code: 'UPSTREAM_TIMEOUT' satisfies FacadeErrorCode, requestId: cause.requestId }
        : { code: 'SHUTTING_DOWN' satisfies FacadeErrorCode, retryable: true, requestId: cause.requestId },
      options,
    );
  }
  if (located?.extensions.code === 'GRAPHQL_PARSE_FAILED' && STACK_OVERFLOW.test(located.message)) {
    // graphql-js reports its own stack overflow as the document's syntax error; say what it means.
    return build(
      located,
      located,
      'Syntax Error: The document is nested too deeply to be parsed.',
      { code: 'GRAPHQL_PARSE_FAILED' },
      options,
    );
  }
  if (cause instanceof UpstreamCallLimitError) {
    return build(
      located,
      cause,
      cause.message,
      {
        code: 'TOO_MANY_UPSTREAM_CALLS' satisfies FacadeErrorCode,
        // The caller's budget over time, not the operation's: when it is whole again.
        ...(cause instanceof UpstreamCallBudgetSpentError
          ? { retryAfterSeconds: cause.retryAfterSeconds }
          : { limit: cause.limit }),
      },
      options,
    );
  }
  const expired = findCursorExpired(error);
  if (expired !== undefined) {
    return build(
      located,
      expired,
      expired.message,
      {
        code: 'CURSOR_EXPIRED' satisfies FacadeErrorCode,
        cursor: expired.cursor,
        ...(expired.oldest === undefined ? {} : { oldestCursor: expired.oldest }),
      },
      options,
    );
  }
  if (cause instanceof UpstreamAccessDeniedError) {
    // The reason stays in the server's logs: it would tell a prober which rule it met.
    return build(located, cause, cause.message, { code: 'FORBIDDEN' satisfies FacadeErrorCode }, options);
  }
  if (located && !isUnexpectedError(located)) {
    const { http: _http, stacktrace: _stacktrace, ...extensions } = located.extensions;
    return build(
      located,
      located.originalError ?? located,
      located.message,
      {
        ...extensions,
        code: typeof extensions.code === 'string' ? extensions.code : 'INTERNAL_SERVER_ERROR',
      },
      options,
    );
  }
  return build(
    located,
    located?.originalError ?? error,
    MASKED_MESSAGE,
    {
      code: 'INTERNAL_SERVER_ERROR' satisfies FacadeErrorCode,
    },
    options,
  );
}

/** The message of a refused id, the id shown only as far as an id could be long. */
function describeRefusedId(id: string, inputPath: InputPath | undefined): string {
  const shown = JSON.stringify(id.length > MAX_ID_LENGTH ? `${id.slice(0, MAX_ID_LENGTH)}…` : id);
  const where = inputPath ? ` in "${inputPath.join('.')}"` : '';
  return (
    `${shown}${where} is not an id: ids are 1 to ${MAX_ID_LENGTH} letters, digits, "_" and "-", ` +
    'starting with a letter or a digit.'
  );
}

/**
 * Whether {@link toGraphQLError} masks `error`: true for anything that is neither an upstream
 * failure nor a GraphQLError raised on purpose. The server logs these, since the client sees
 * nothing of them.
 */
export function isUnexpectedError(error: unknown): boolean {
  if (findUpstreamError(error) || findIdRefusal(error) || findCursorExpired(error)) return false;
  if (!isGraphQLError(error)) return true;
  const original = error.originalError;
  // No original error: graphql-js or Apollo raised it about the document or the response shape.
  if (original === undefined || isGraphQLError(original)) return false;
  // Apollo wraps variable-coercion failures (a scalar's parseValue throwing) as BAD_USER_INPUT.
  const code = error.extensions.code;
  return !(typeof code === 'string' && PASS_THROUGH_CODES.has(code));
}

/** The problem as the client sees it: every field, field errors given their GraphQL paths. */
function toGraphQLProblem(problem: Problem): GraphQLProblem {
  const { errors, statusReason, ...rest } = problem;
  const mirrored: GraphQLProblem = { ...rest };
  if (statusReason) mirrored.statusReason = { ...statusReason, actor: toActorEnumName(statusReason.actor) };
  if (errors) mirrored.errors = errors.map(withInputPath);
  return mirrored;
}

/**
 * The enum name of an upstream actor (`developer` → `DEVELOPER`), as `StatusReason.actor` reads it;
 * a value outside the closed set (a breaking upstream change) passes through unchanged.
 */
function toActorEnumName(actor: string): string {
  const entry = Object.entries(STATUS_REASON_ACTOR_VALUES).find(([, upstream]) => upstream === actor);
  return entry ? entry[0] : actor;
}

function withInputPath(fieldError: FieldError): GraphQLFieldError {
  if (typeof fieldError.pointer === 'string')
    return { ...fieldError, path: pointerToInputPath(fieldError.pointer) };
  const path =
    typeof fieldError.parameter === 'string' ? parameterToArgumentPath(fieldError.parameter) : undefined;
  return path ? { ...fieldError, path } : { ...fieldError };
}

/** Follows `originalError` (GraphQL's wrapping) and `cause` (ours and DataLoader users') a few levels. */
/** The {@link CursorExpiredError} in `error`'s `originalError`/`cause` chain, if any. */
function findCursorExpired(error: unknown): CursorExpiredError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof CursorExpiredError) return current;
    current = isGraphQLError(current) ? (current.originalError ?? current.cause) : current.cause;
  }
  return undefined;
}

function findUpstreamError(
  error: unknown,
):
  | UpstreamProblemError
  | UpstreamUnavailableError
  | UpstreamCallLimitError
  | UpstreamAccessDeniedError
  | UpstreamCancelledError
  | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (
      current instanceof UpstreamProblemError ||
      current instanceof UpstreamUnavailableError ||
      current instanceof UpstreamCallLimitError ||
      current instanceof UpstreamAccessDeniedError ||
      current instanceof UpstreamCancelledError
    )
      return current;
    current = isGraphQLError(current) && current.originalError ? current.originalError : current.cause;
  }
  return undefined;
}

/**
 * Recognises a GraphQLError from any copy of graphql-js: a process can load the package twice (its
 * CommonJS and ESM builds), and `instanceof` fails across the two.
 */
function isGraphQLError(value: unknown): value is GraphQLError {
  return value instanceof GraphQLError || Object.prototype.toString.call(value) === '[object GraphQLError]';
}

function build(
  located: GraphQLError | undefined,
  source: unknown,
  message: string,
  extensions: GraphQLErrorExtensions,
  options: ToGraphQLErrorOptions,
): GraphQLError {
  const stack = source instanceof Error ? source.stack : undefined;
  return new GraphQLError(message, {
    nodes: located?.nodes,
    source: located?.source,
    positions: located?.positions,
    path: located?.path,
    extensions:
      options.includeStacktrace && stack !== undefined
        ? { ...extensions, stacktrace: stack.split('\n') }
        : extensions,
  });
}
