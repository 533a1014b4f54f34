/**
 * The contract between the emulator's HTTP core and the code behind it (domain handlers, reset,
 * webhook delivery log). The HTTP core authenticates, routes, validates against
 * `schema/upstream/openapi.yaml` and applies idempotency before a {@link RouteHandler} runs, so a
 * handler sees only well-formed input and only decides the business outcome.
 */

/** Sandbox and live are two separate stores; the API key selects one. */
export type Environment = 'sandbox' | 'live';

/** `read_only` keys get 403 `forbidden` on POST, PUT, PATCH and DELETE. */
export type ApiKeyScope = 'read_write' | 'read_only';

/** A configured API key. The secret `key` never leaves the auth step. */
export type ApiKeyConfig = {
  /** The secret sent in `X-API-Key`. */
  key: string;
  /** A non-secret name for logs, idempotency scoping and handlers, e.g. `sandbox-default`. */
  id: string;
  environment: Environment;
  scope: ApiKeyScope;
};

/** What a handler learns about the caller's key: never the secret itself. */
export type ApiKeyIdentity = Omit<ApiKeyConfig, 'key'>;

/** Every operationId of the contract; the router checks at start-up that both lists agree. */
export type OperationId =
  | 'listCustomers'
  | 'createCustomer'
  | 'getCustomer'
  | 'listRelatedParties'
  | 'createRelatedParty'
  | 'getRelatedParty'
  | 'archiveRelatedParty'
  | 'listAccounts'
  | 'createAccount'
  | 'getAccount'
  | 'archiveAccount'
  | 'getAccountFees'
  | 'replaceAccountFees'
  | 'discoverCapabilities'
  | 'listCapabilities'
  | 'createCapability'
  | 'getCapability'
  | 'listDocuments'
  | 'getDocument'
  | 'archiveDocument'
  | 'listRecipients'
  | 'getRecipient'
  | 'listTasks'
  | 'getTask'
  | 'listTaskSubmissions'
  | 'getTaskSubmission'
  | 'listQuotes'
  | 'getQuote'
  | 'executeQuote'
  | 'listTransfers'
  | 'getTransfer'
  | 'listRules'
  | 'createRule'
  | 'getRule'
  | 'updateRuleStatus'
  | 'archiveRule'
  | 'listInstitutions'
  | 'getInstitution'
  | 'listWebhookEndpoints'
  | 'createWebhookEndpoint'
  | 'getWebhookEndpoint'
  | 'updateWebhookEndpoint'
  | 'archiveWebhookEndpoint'
  | 'sandboxTopUp'
  | 'sandboxSetCapabilityStatus';

/** Query parameters after validation. `limit` always holds a value (default 25) for lists. */
export type ListQuery = {
  /** 1 to 100; 25 when the caller sent none. */
  limit: number;
  /** The opaque `nextCursor` of a previous page, not yet decoded (see `paginate`). */
  cursor?: string;
  /** RFC 3339 timestamp, as sent. */
  updatedSince?: string;
};

/** A request that passed authentication, routing, validation and the idempotency check. */
export type EmulatorRequest = {
  operationId: OperationId;
  /** Method and path template, e.g. `GET /v3/customers/{customerId}`. */
  route: string;
  method: string;
  /** The concrete path, without query. */
  path: string;
  /** Path parameters by name, decoded. */
  params: Record<string, string>;
  query: ListQuery;
  /** The parsed JSON body, already valid against the operation's request schema; undefined when none. */
  body: unknown;
  environment: Environment;
  apiKey: ApiKeyIdentity;
  /** Equals the response's `X-Request-Id` and every problem's `correlationId`. */
  requestId: string;
  idempotencyKey?: string;
};

/** What a handler returns. JSON `body` is serialised by the core; problems are thrown as `ProblemError`. */
export type EmulatorResponse = {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
};

/**
 * Decides one operation's outcome. Throw a `ProblemError` (from `emulator/http/problem.ts`) for an
 * expected failure; anything else thrown becomes 500 `internal_error` and is logged.
 */
export type RouteHandler = (request: EmulatorRequest) => EmulatorResponse | Promise<EmulatorResponse>;

/** Handlers by operationId. A missing one answers 501 `not_implemented`. */
export type RouteHandlers = Partial<Record<OperationId, RouteHandler>>;

/** The starting data of both environments. */
export type DataSet = 'demo' | 'empty';

/**
 * What the business side of the emulator gives the HTTP core: the handlers, and the hooks behind
 * `POST /_emulator/reset` and `GET /_emulator/webhook-deliveries`.
 */
export type EmulatorBackend = {
  handlers: RouteHandlers;
  /** Replaces both environments' data with a fresh copy of `data`. */
  reset(data: DataSet): void;
  /** Every webhook delivery attempt with its outcome, oldest first. */
  webhookDeliveries(): unknown[];
  /** Stops timers (settlements, webhook retries) so the process can exit. */
  close(): Promise<void>;
};

/** Minimal logger; the emulator never passes API keys or webhook secrets to it. */
export type EmulatorLogger = {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
};
