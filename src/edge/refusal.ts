/**
 * Every way the door says no, and how each reads on every transport. A check in the door answers a
 * {@link Refusal}; an adapter only translates it with {@link httpAnswerOf} (status, headers, a
 * GraphQL-shaped body), {@link graphQLErrorOf} (an `error` message of one operation) or
 * {@link closeOf} (a close code and reason, when the refusal ends the connection). The table
 * {@link REFUSALS} is the one place that pairs them; docs/security.md prints it.
 *
 * Close codes are graphql-ws's own where it has one (4400, 4401, 4403, 4500) and RFC 6455's
 * otherwise (1001 going away, 1013 try again later). 4429 is not used: graphql-ws means it as "too
 * many initialisation requests", and a client reading it as a rate limit would be misled.
 */
import { GraphQLError } from 'graphql';
import { CloseCode } from 'graphql-ws';
import { rateLimitExtension, rateLimitHeaders, type QuotaState } from './client-budgets.ts';

/** Why an operation or a connection is refused. */
export type RefusalReason =
  /** No credential, and the operation is not one an anonymous caller may run. */
  | 'unauthenticated'
  /** A credential was presented and it is not valid (bad signature, wrong audience, expired ...). */
  | 'invalid-credentials'
  /** The credential of an open connection has expired since it was accepted. */
  | 'credentials-expired'
  /** The issuer's keys (or the upstream, for a caller's own key) cannot be reached now. */
  | 'credentials-unavailable'
  /** A browser page of an origin that may not call the facade. */
  | 'origin-not-allowed'
  /** A valid caller that may see nothing over this transport (no customers, not an operator). */
  | 'forbidden'
  /** A budget of the caller (or, before authentication, of its address) is spent for now. */
  | 'rate-limited'
  /** The caller already runs as many long-lived operations as it may. */
  | 'too-many-operations'
  /** One connection already runs as many operations as a connection of its transport may. */
  | 'too-many-on-connection'
  /** Trusted documents are on and this operation is not listed. */
  | 'not-trusted-document'
  /** The document does not parse, or has more tokens than `QUERY_MAX_TOKENS`. */
  | 'parse-failed'
  /** The document is not valid, or over a limit (depth, aliases, directives, cost). */
  | 'validation-failed'
  /** A variable or literal holds a string the upstream must never see (malformed, empty id). */
  | 'bad-input'
  /** The operation type is not served over this transport (a subscription over HTTP ...). */
  | 'wrong-transport'
  /** A batched request holds more operations than one request may (`HTTP_BATCH_MAX_OPERATIONS`). */
  | 'batch-too-large'
  /** The connection is not open any more (the socket is closing); nothing more runs on it. */
  | 'connection-closing'
  /** The server is shutting down. */
  | 'shutting-down';

/** One refusal: its reason, the message the caller reads, and extensions beside `code`. */
export interface Refusal {
  readonly refused: RefusalReason;
  readonly message: string;
  /** Extensions beside `code` (`retryAfterSeconds`, `maxCost` ...). */
  readonly extensions?: Readonly<Record<string, unknown>>;
  /** Seconds until trying again makes sense (`Retry-After`), when the refusal is temporary. */
  readonly retryAfterSeconds?: number;
  /** HTTP headers of this refusal beside the table's (the RateLimit fields of a spent budget). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The errors as the check made them (validation can report several at once, with locations). */
  readonly errors?: readonly GraphQLError[];
}

/**
 * How a refusal reads over WebSocket transports. `close` is the close code and reason when it ends
 * a connection (always, when it refuses a connection); `operation` says what it does to one
 * operation on an open connection: an `error` message for that operation alone, or `close` the
 * connection. `upgrade`: answered to the HTTP upgrade request, before any socket exists (the HTTP
 * row applies).
 */
export interface WebSocketAnswer {
  readonly close: { readonly code: number; readonly reason: string };
  readonly operation: 'error' | 'close' | 'upgrade';
}

/** The row of one refusal reason in {@link REFUSALS}. */
export interface RefusalRow {
  /** `extensions.code` of the GraphQL error, over every transport. */
  readonly code: string;
  /** The HTTP status, and the headers beside `Retry-After` (added from the refusal). */
  readonly http: { readonly status: number; readonly headers?: Readonly<Record<string, string>> };
  /** How graphql-ws (and any WebSocket transport) answers it. */
  readonly ws: WebSocketAnswer;
}

/** RFC 6455: the server is going away (shutdown). */
const GOING_AWAY = 1001;
/** RFC 6455: try again later (a temporary refusal: a budget, an unreachable issuer). */
const TRY_AGAIN_LATER = 1013;

/** One row of {@link REFUSALS}: the code, the HTTP status (and headers), the WebSocket answer. */
function row(
  code: string,
  status: number,
  operation: WebSocketAnswer['operation'],
  closeCode: number,
  reason: string,
  headers?: Readonly<Record<string, string>>,
): RefusalRow {
  return {
    code,
    http: headers === undefined ? { status } : { status, headers },
    ws: { operation, close: { code: closeCode, reason } },
  };
}

/**
 * The one table: each refusal reason over HTTP and over graphql-ws. A row reads: `extensions.code`,
 * the HTTP status, what it does to a WebSocket operation, the close code and reason, the HTTP
 * headers beside `Retry-After`.
 */
export const REFUSALS: Readonly<Record<RefusalReason, RefusalRow>> = {
  unauthenticated: row('UNAUTHENTICATED', 401, 'close', CloseCode.Unauthorized, 'Unauthorized', {
    'www-authenticate': 'Bearer',
  }),
  'invalid-credentials': row('UNAUTHENTICATED', 401, 'close', CloseCode.Unauthorized, 'Unauthorized', {
    'www-authenticate': 'Bearer error="invalid_token"',
  }),
  'credentials-expired': row('UNAUTHENTICATED', 401, 'close', CloseCode.Unauthorized, 'Token expired', {
    'www-authenticate': 'Bearer error="invalid_token"',
  }),
  'credentials-unavailable': row('UNAVAILABLE', 503, 'close', TRY_AGAIN_LATER, 'Try again later', {
    'retry-after': '5',
  }),
  'origin-not-allowed': row('FORBIDDEN', 403, 'upgrade', CloseCode.Forbidden, 'Forbidden'),
  forbidden: row('FORBIDDEN', 403, 'close', CloseCode.Forbidden, 'Forbidden'),
  'rate-limited': row('RATE_LIMITED', 429, 'error', TRY_AGAIN_LATER, 'Too many requests'),
  'too-many-operations': row('RATE_LIMITED', 429, 'error', TRY_AGAIN_LATER, 'Too many operations'),
  'too-many-on-connection': row(
    'TOO_MANY_SUBSCRIPTIONS',
    429,
    'error',
    TRY_AGAIN_LATER,
    'Too many operations',
  ),
  'not-trusted-document': row(
    'PERSISTED_QUERY_NOT_IN_LIST',
    400,
    'error',
    CloseCode.BadRequest,
    'Bad request',
  ),
  'parse-failed': row('GRAPHQL_PARSE_FAILED', 400, 'error', CloseCode.BadRequest, 'Bad request'),
  'validation-failed': row('GRAPHQL_VALIDATION_FAILED', 400, 'error', CloseCode.BadRequest, 'Bad request'),
  'bad-input': row('BAD_USER_INPUT', 400, 'error', CloseCode.BadRequest, 'Bad request'),
  'wrong-transport': row('BAD_REQUEST', 400, 'error', CloseCode.BadRequest, 'Bad request'),
  'batch-too-large': row('BATCH_TOO_LARGE', 413, 'error', CloseCode.BadRequest, 'Bad request'),
  'connection-closing': row('UNAUTHENTICATED', 401, 'error', CloseCode.Unauthorized, 'Connection closing'),
  'shutting-down': row('SHUTTING_DOWN', 503, 'close', GOING_AWAY, 'Server shutting down', {
    'retry-after': '5',
  }),
};

/** Type guard: a check's answer is a refusal. */
export function isRefusal(value: unknown): value is Refusal {
  return typeof value === 'object' && value !== null && typeof (value as Refusal).refused === 'string';
}

/** Builds a refusal; the message is what the caller reads, so it never holds a credential. */
export function refuse(
  refused: RefusalReason,
  message: string,
  more: Omit<Refusal, 'refused' | 'message'> = {},
): Refusal {
  return { refused, message, ...more };
}

/**
 * The one rate-limit refusal, over every transport and for every budget. With the spent budget's
 * `quota`, it carries the RateLimit header fields over HTTP and the same figures in the
 * `rateLimit` extension, which is all a live transport's error message can carry.
 */
export function rateLimited(retryAfterSeconds: number, message?: string, quota?: QuotaState): Refusal {
  return refuse('rate-limited', message ?? `Too many requests; retry after ${retryAfterSeconds} s.`, {
    retryAfterSeconds,
    extensions:
      quota === undefined
        ? { retryAfterSeconds }
        : { retryAfterSeconds, rateLimit: rateLimitExtension(quota) },
    ...(quota === undefined ? {} : { headers: rateLimitHeaders(quota) }),
  });
}

/** The refusal's errors as GraphQL errors, each tagged with the table's code. */
export function graphQLErrorsOf(refusal: Refusal): GraphQLError[] {
  const code = REFUSALS[refusal.refused].code;
  if (refusal.errors !== undefined && refusal.errors.length > 0) {
    return refusal.errors.map((error) =>
      error.extensions['code'] === undefined
        ? new GraphQLError(error.message, {
            nodes: error.nodes,
            source: error.source,
            positions: error.positions,
            path: error.path,
            originalError: error.originalError,
            extensions: { ...error.extensions, code },
          })
        : error,
    );
  }
  return [graphQLErrorOf(refusal)];
}

/** The refusal as one GraphQL error (`extensions.code` from the table). */
export function graphQLErrorOf(refusal: Refusal): GraphQLError {
  const first = refusal.errors?.[0];
  if (first !== undefined) return graphQLErrorsOf(refusal)[0] ?? first;
  return new GraphQLError(refusal.message, {
    extensions: { code: REFUSALS[refusal.refused].code, ...refusal.extensions },
  });
}

/** An HTTP answer: status, headers and a GraphQL-shaped JSON body. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The refusal as an HTTP response (the table's status and headers, `Retry-After` when temporary). */
export function httpAnswerOf(refusal: Refusal): HttpAnswer {
  const row = REFUSALS[refusal.refused];
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...row.http.headers,
    ...refusal.headers,
  };
  if (refusal.retryAfterSeconds !== undefined) headers['retry-after'] = String(refusal.retryAfterSeconds);
  const errors = graphQLErrorsOf(refusal).map((error) => ({
    message: error.message,
    ...(error.locations === undefined ? {} : { locations: error.locations }),
    extensions: withoutHttp(error.extensions),
  }));
  return { status: row.http.status, headers, body: JSON.stringify({ errors }) };
}

/** The close a refusal ends a WebSocket connection with (the reason names the wait, if any). */
export function closeOf(refusal: Refusal): { code: number; reason: string } {
  const { close } = REFUSALS[refusal.refused].ws;
  const wait = refusal.retryAfterSeconds;
  return wait === undefined ? close : { code: close.code, reason: `${close.reason}; retry after ${wait} s` };
}

/** Whether the refusal of an operation on an open connection ends the connection. */
export function endsConnection(refusal: Refusal): boolean {
  return REFUSALS[refusal.refused].ws.operation === 'close';
}

/** Apollo's `extensions.http` says how to answer over HTTP; it is no part of what a client reads. */
function withoutHttp(extensions: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { http: _http, ...rest } = extensions;
  return rest;
}
