/**
 * Problem details (`application/problem+json`) as the spec's Errors section defines them: one
 * builder fills `type`, `title`, `retryable` and `correlationId` the same way for every error.
 */

/** Field error codes of `docs/upstream-assumptions.md`. */
export type FieldErrorCode =
  | 'required'
  | 'invalid_type'
  | 'invalid_length'
  | 'invalid_characters'
  | 'invalid_format'
  | 'invalid_value'
  | 'out_of_range'
  | 'unknown_field'
  | 'not_found';

/** One invalid field: `pointer` for body fields, `parameter` for query parameters and headers. */
export type FieldError = {
  pointer?: string;
  parameter?: string;
  code: FieldErrorCode;
  message: string;
};

/** The spec's closed `actor` enum; `platform` is the service operator. */
export type StatusReasonActor = 'customer' | 'developer' | 'provider' | 'network' | 'platform';

export type ProblemStatusReason = {
  code: string;
  message: string;
  actor: StatusReasonActor;
  retryable: boolean;
};

export type BlockingResource = {
  type: 'account' | 'transfer';
  id: string;
  requiredAction: 'archive_account' | 'cancel_transfer' | 'wait_for_transfer' | 'resolve_transfer';
};

/** The optional members a problem may carry besides the always-present ones. */
export type ProblemExtras = {
  /** Overrides the default title of the code. */
  title?: string;
  /** Overrides the spec's default for the code. */
  retryable?: boolean;
  errors?: FieldError[];
  statusReason?: ProblemStatusReason;
  /** Sorted by type, then id, by the builder. */
  blockingResources?: BlockingResource[];
  capabilities?: string[];
  transferId?: string;
  reviewAnswer?: string | null;
};

/** The serialised problem object. */
export type Problem = {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  correlationId: string;
} & Omit<ProblemExtras, 'title'>;

/**
 * An expected failure. Handlers throw it; the HTTP core turns it into a problem response with the
 * request's correlation id.
 *
 * @example throw new ProblemError(404, 'customer_not_found', `No customer ${id} exists.`);
 */
export class ProblemError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly extras: ProblemExtras;

  constructor(status: number, code: string, detail: string, extras: ProblemExtras = {}) {
    super(`${status} ${code}: ${detail}`);
    this.name = 'ProblemError';
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.extras = extras;
  }
}

/** 400 `validation_error` naming each invalid field. */
export function validationError(errors: FieldError[], detail = describeFieldErrors(errors)): ProblemError {
  return new ProblemError(400, 'validation_error', detail, { errors });
}

/** 409 `conflict` with the state-conflict reason the spec's `statusReason` member carries. */
export function conflict(
  detail: string,
  statusReason: { code: string; message?: string; actor?: StatusReasonActor; retryable?: boolean },
  extras: Omit<ProblemExtras, 'statusReason'> = {},
): ProblemError {
  return new ProblemError(409, 'conflict', detail, {
    ...extras,
    statusReason: {
      code: statusReason.code,
      message: statusReason.message ?? detail,
      actor: statusReason.actor ?? 'developer',
      retryable: statusReason.retryable ?? false,
    },
  });
}

function describeFieldErrors(errors: FieldError[]): string {
  // The empty pointer is the body itself, which no reader would recognise from an empty name.
  const names = errors.map((error) =>
    error.pointer === '' ? 'the body' : (error.pointer ?? error.parameter ?? 'the body'),
  );
  return `The request has invalid fields: ${[...new Set(names)].join(', ')}. See errors[] for each one.`;
}

const TITLES: Record<string, string> = {
  validation_error: 'Validation Error',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not Found',
  customer_not_found: 'Customer Not Found',
  method_not_allowed: 'Method Not Allowed',
  conflict: 'Conflict',
  idempotency_conflict: 'Idempotency Conflict',
  idempotency_request_in_progress: 'Idempotency Request In Progress',
  quote_already_executed: 'Quote Already Executed',
  payload_too_large: 'Payload Too Large',
  unsupported_media_type: 'Unsupported Media Type',
  invalid_capability: 'Invalid Capability',
  internal_error: 'Internal Error',
  not_implemented: 'Not Implemented',
  request_failed: 'Request Failed',
};

/** The spec's `retryable` column; codes it leaves blank carry no `retryable` member. */
const RETRYABLE: Record<string, boolean> = {
  validation_error: false,
  unauthorized: false,
  forbidden: false,
  conflict: false,
  idempotency_conflict: false,
  idempotency_request_in_progress: true,
  internal_error: true,
  request_failed: true,
};

/** `https://docs.platform.test/v3`, the `{docs_url}` of every problem `type`. */
export const DEFAULT_DOCS_URL = 'https://docs.platform.test/v3';

/**
 * Builds the problem object: `type` is `{docsUrl}/errors/<code with hyphens>`, `correlationId` the
 * request id, `retryable` the spec's value for the code unless `extras` overrides it.
 */
export function buildProblem(error: ProblemError, context: { requestId: string; docsUrl?: string }): Problem {
  const { title, blockingResources, ...extras } = error.extras;
  const retryable = extras.retryable ?? RETRYABLE[error.code];
  const problem: Problem = {
    type: `${context.docsUrl ?? DEFAULT_DOCS_URL}/errors/${error.code.replaceAll('_', '-')}`,
    title: title ?? TITLES[error.code] ?? titleFromCode(error.code),
    status: error.status,
    code: error.code,
    detail: error.detail,
    correlationId: context.requestId,
    ...extras,
  };
  if (retryable === undefined) delete problem.retryable;
  else problem.retryable = retryable;
  if (blockingResources) problem.blockingResources = sortBlockingResources(blockingResources);
  return problem;
}

function sortBlockingResources(resources: BlockingResource[]): BlockingResource[] {
  return [...resources].sort((a, b) =>
    a.type === b.type ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.type < b.type ? -1 : 1,
  );
}

function titleFromCode(code: string): string {
  return code
    .split('_')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join(' ');
}
