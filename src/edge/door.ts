/**
 * The door: every transport admits callers and operations through these checks, in the one order
 * {@link ADMISSION_ORDER} declares, and nothing else admits them. It knows nothing of HTTP or
 * WebSocket; an adapter (`http.ts`, `graphql-ws.ts`, `sse.ts`) reads what its transport carries,
 * asks here, and translates the answer: an admitted connection or operation, or a {@link Refusal}
 * it answers through the table in `refusal.ts`. Live transports take their operations through
 * `live-connections.ts`; HTTP through its middleware and Apollo Server, which parses and validates
 * with the door's options and hands the rest back to the door's plugin (`http.ts`).
 */
import {
  getOperationAST,
  NoSchemaIntrospectionCustomRule,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';
import { createHash } from 'node:crypto';
import type { Authenticator, Credentials } from '../auth/authenticate.ts';
import type { Caller } from '../auth/caller.ts';
import type { PlatformEnvironment } from '../events/event-types.ts';
import { createQueryLimitsRules, type OperationMeasure, type QueryLimits } from '../graph/query-limits.ts';
import { mayReadServiceSdl, SERVICE_SDL_FORBIDDEN, selectsService } from '../graph/service-sdl-access.ts';
import type { Logger } from '../logger.ts';
import type { TrustedDocumentsMode } from './config.ts';
import { createCallBudget, createPooledCallBudget, type CallBudget } from '../upstream/call-budget.ts';
import type { UpstreamProbe } from '../upstream/probe.ts';
import { isAnonymousDocument } from './anonymous-documents.ts';
import type { QuotaState } from './client-budgets.ts';
import { createDocumentPreparer } from './documents.ts';
import { checkOrigin } from './origin.ts';
import { callLimitOf, checkOperation, type TransportRules } from './operation-checks.ts';
import type { RateBucket, RateKey, RateLimits } from './rate-limits.ts';
import { isRefusal, rateLimited, refuse, type Refusal } from './refusal.ts';
import { boundEnvironment } from '../upstream/environment-keys.ts';
import {
  resolveTrustedDocument,
  type TrustedDocumentRequest,
  type TrustedDocumentResolution,
  type TrustedDocumentStore,
} from './trusted-documents.ts';

/**
 * The door's steps, in the one order every transport takes them. `on`: which connections take the
 * step (`live`: graphql-ws, SSE and every later live transport; `every`: HTTP too). A test pins
 * each transport to this list (test/integration/edge-admission-order.test.ts), through the
 * `onStep` hook each step reports to.
 */
const ADMISSION_ORDER = [
  /**
   * Who is this: the credential is verified (auth/); a failing one spends the address's
   * failed-authentication budget (a verifying one is never refused for it). An anonymous request
   * goes on only for the landing page or an anonymous-safe document; a live connection must act
   * for some customer (its scope is not empty), spends its caller's connection budget and learns
   * its key's environment. Once per connection.
   */
  { step: 'connect', on: 'every' },
  /** The caller's running-operation cap (`RATE_LIMIT_SUBSCRIPTIONS`), over every live transport. */
  { step: 'hold', on: 'live' },
  /** The credential still holds (its `exp`, with the verifier's clock tolerance); asked again after every wait. */
  { step: 'credential-current', on: 'live' },
  /** The caller's operation budget (the address's when anonymous). */
  { step: 'operation-budget', on: 'every' },
  /** Trusted documents: a listed id's stored body, or the request's own listed text. */
  { step: 'trusted-document', on: 'every' },
  /** Parse with the token limit (`QUERY_MAX_TOKENS`); Apollo does it for HTTP, with these options. */
  { step: 'parse', on: 'every' },
  /** Validation with the query limits and the one cost measure; Apollo does it for HTTP, with these rules. */
  { step: 'validate', on: 'every' },
  /**
   * The transport serves the operation type, input strings, the cost with the variables; the
   * operation's upstream call budget derived from the cost.
   */
  { step: 'operation-checks', on: 'every' },
  /**
   * Execution. A subscription's resolver checks the caller's scope (the customer it names) first,
   * before anything is registered with the reconciler, any customer is watched, a queue opened or
   * a cursor judged (src/graph/, src/events/delivery/).
   */
  { step: 'execute', on: 'every' },
] as const satisfies readonly { step: string; on: 'every' | 'live' }[];

/** One step of {@link ADMISSION_ORDER}. */
export type AdmissionStep = (typeof ADMISSION_ORDER)[number]['step'];

/** The steps a connection of `kind` takes before execution, in order. */
export function admissionStepsOf(kind: ConnectRequest['kind']): AdmissionStep[] {
  return ADMISSION_ORDER.filter((entry) => entry.on === 'every' || kind === 'live')
    .map((entry) => entry.step)
    .filter((step) => step !== 'execute');
}

/** Why an operation is not a trusted document. */
export type UntrustedReason = Extract<TrustedDocumentResolution, { ok: false }>['reason'];

export type { TransportRules } from './operation-checks.ts';

/** Options of {@link createDoor}. */
export interface DoorOptions {
  schema: GraphQLSchema;
  authenticator: Authenticator;
  rateLimits: RateLimits;
  /** `RATE_LIMIT_SUBSCRIPTIONS`: long-lived operations one caller may run at once; none when absent. */
  maxOperationsPerCaller?: number | undefined;
  /** `TRUSTED_DOCUMENTS`; absent, any document is accepted. */
  trustedDocuments?: TrustedDocumentStore | undefined;
  /**
   * `TRUSTED_DOCUMENTS_MODE`: `log-only` runs a request's own `query` that the manifest does not
   * list (logged and counted) instead of refusing it. Default `enforce`.
   */
  trustedDocumentsMode?: TrustedDocumentsMode | undefined;
  /** Told of every operation missing from the manifest, refused or let through (metrics); must not throw. */
  onUntrustedDocument?(reason: UntrustedReason, action: 'refused' | 'logged'): void;
  /** `QUERY_MAX_*`: the parser's token limit, the validation limits and the one cost measure. */
  queryLimits: QueryLimits;
  /** `AUTH_CLOCK_TOLERANCE_SECONDS`: the leeway on `exp` the verifier gave when it accepted a token. */
  clockToleranceSeconds: number;
  /** `CORS_ORIGINS`: browser origins besides the facade's own host that may connect. */
  allowedOrigins: readonly string[];
  /** `INTROSPECTION=public`: anonymous callers may introspect. */
  publicIntrospection: boolean;
  /**
   * `INTROSPECTION=off`: no caller introspects, only operators and schema readers read
   * `_service`, and validation errors suggest no names. Apollo Server enforces it over HTTP; the door enforces it for the transports that
   * execute themselves (a live query is a query, and may select either).
   */
  introspectionOff?: boolean;
  /** `UPSTREAM_MAX_CALLS_PER_OPERATION`: the ceiling of every operation's call budget. */
  maxCallsPerOperation: number;
  /** Retries one operation may spend (`UPSTREAM_RETRY_BUDGET`): each is one more call. */
  retriesPerOperation: number;
  /**
   * The upstream environment of a key (the facade's own when undefined), remembered per key: what
   * a live connection hears depends on it.
   */
  environmentOf(
    apiKey: string | undefined,
    environment: PlatformEnvironment | undefined,
  ): Promise<UpstreamProbe>;
  /**
   * The environments the facade holds a key of its own for (`UPSTREAM_API_KEY_SANDBOX`,
   * `UPSTREAM_API_KEY_LIVE`): every caller is then bound to one by its token, and a token that
   * binds it to none is refused. Absent with `UPSTREAM_API_KEY` alone.
   */
  environments?: readonly PlatformEnvironment[] | undefined;
  /** Told of every refusal by a rate limit, by bucket (metrics); must not throw. */
  onRateLimited?(bucket: RateBucket): void;
  /** Told of each step of {@link ADMISSION_ORDER} as an operation or a connection takes it; must not throw. */
  onStep?(step: AdmissionStep): void;
  logger: Logger;
  /** The clock, for tests. */
  now?: () => number;
}

/** Who is on the other side of a request or a connection, once the door let it in. */
export interface Connection {
  /** Undefined for an anonymous request (only `_service` or public introspection may go on). */
  readonly caller: Caller | undefined;
  /** The caller's own platform key, when it authenticated with one. */
  readonly apiKey: string | undefined;
  /** The client's address (after `TRUST_PROXY`), which budgets count before authentication. */
  readonly address: string;
  /**
   * The environment the connection is in: the one its token binds it to when the facade holds a
   * key per environment; otherwise its key's, known for live connections only.
   */
  readonly environment?: PlatformEnvironment;
}

/** What an adapter reads from its transport to connect. */
export interface ConnectRequest {
  credentials: Credentials;
  /** The client's address, as `clientAddress` reads it (`TRUST_PROXY` applied). */
  address: string;
  /**
   * `request`: one request, which may be anonymous (its operation is then checked with
   * {@link Door.mayRunAnonymously}); `live`: a long-lived connection of a caller who may hear
   * events, counted in the caller's connection budget.
   */
  kind: 'request' | 'live';
}

/** An operation as a transport carries it (the GraphQL-over-HTTP request shape). */
export interface OperationRequest extends TrustedDocumentRequest {
  operationName?: string | null | undefined;
  variables?: Readonly<Record<string, unknown>> | null | undefined;
}

/** An operation the door let in: what to execute, and with how many upstream calls at most. */
export interface AdmittedOperation {
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly operationName: string | undefined;
  readonly variables: Readonly<Record<string, unknown>> | undefined;
  readonly measure: OperationMeasure;
  /** The operation's upstream call budget: its cost plus its retries, at most the ceiling. */
  readonly callLimit: number;
  /** Its text is a listed trusted document (metrics label such operations by name). */
  readonly trustedDocument?: boolean;
}

/** The door of one app. */
export interface Door {
  /** The validation rules of the query limits, for an executor that validates itself (Apollo). */
  readonly validationRules: readonly ValidationRule[];
  /** The parser options (`QUERY_MAX_TOKENS`), for an executor that parses itself (Apollo). */
  readonly parseOptions: { readonly maxTokens: number };
  /** An executor that takes a step itself (Apollo: `parse`, `validate`) says so, for the order's record. */
  took(step: AdmissionStep): void;
  /** Whether a browser page of `origin` may connect to `host` (transports without CORS). */
  checkOrigin(origin: string | undefined, host: string | undefined): Refusal | undefined;
  /** Who is this: the connection, or why not. */
  connect(request: ConnectRequest): Promise<Connection | Refusal>;
  /**
   * Whether `connection`'s credential still holds: a refusal once its `exp` (with the clock
   * tolerance) has passed. Asked before every operation of a long-lived connection.
   */
  checkCurrent(connection: Connection): Refusal | undefined;
  /** When `connection`'s credential stops holding (ms since the epoch, tolerance included). */
  expiresAt(connection: Connection): number | undefined;
  /** Whether an anonymous request may run `query` (`_service`, or introspection when public). */
  mayRunAnonymously(query: unknown): boolean;
  /**
   * Spends one operation from the caller's budget (its client's when `RATE_LIMIT_BY_CLIENT` names
   * it, the address's when anonymous); `onQuota` hears what is left of it (RateLimit headers).
   */
  spendOperation(connection: Connection, onQuota?: (quota: QuotaState) => void): Promise<Refusal | undefined>;
  /**
   * The text to run for `request` under trusted documents: a listed id's stored body, or the
   * request's own text when listed; undefined when nothing limits it (no manifest, an operator,
   * an anonymous request) and the request's own `query` runs.
   */
  trustedQuery(connection: Connection, request: TrustedDocumentRequest): string | undefined | Refusal;
  /**
   * The checks once the document is parsed and valid and the variables known: the transport serves
   * its type, input strings, the cost with the variables; the operation's call budget.
   */
  checkOperation(
    document: DocumentNode,
    operationName: string | null | undefined,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    transport: TransportRules,
  ): AdmittedOperation | Refusal;
  /**
   * Everything an operation passes, in order, for a transport that executes itself: the credential
   * still holds, the operation budget, trusted documents, parse, validation, {@link checkOperation}.
   */
  admit(
    connection: Connection,
    request: OperationRequest,
    transport: TransportRules,
  ): Promise<AdmittedOperation | Refusal>;
  /**
   * Holds one long-lived operation of the caller until the returned release is called; a refusal
   * when it already runs `RATE_LIMIT_SUBSCRIPTIONS` of them, over every connection and transport.
   */
  holdOperation(connection: Connection, transport: TransportRules): (() => void) | Refusal;
  /**
   * The call budget of one event's execution for one subscription: its own cost-derived limit, and
   * a pool the caller's other subscriptions share for the same event, so however many subscriptions
   * it runs, one event costs the caller at most `maxCallsPerOperation` upstream calls.
   */
  eventCallBudget(connection: Connection, eventId: string, callLimit: number): CallBudget;
}

/** Builds the door of one app. */
export function createDoor(options: DoorOptions): Door {
  const now = options.now ?? Date.now;
  const logger = options.logger.child({ component: 'door' });
  const validationRules = createQueryLimitsRules(options.queryLimits);
  const took = (step: AdmissionStep): void => options.onStep?.(step);
  const prepare = createDocumentPreparer({
    schema: options.schema,
    validationRules,
    maxTokens: options.queryLimits.maxTokens,
    hideSchemaDetails: options.introspectionOff === true,
    onStep: took,
  });
  const toleranceMs = options.clockToleranceSeconds * 1000;
  const budgets = createDoorBudgets(options);
  const holds = createOperationHolds(options.maxOperationsPerCaller, (connection) =>
    budgets.callerKey(connection),
  );
  const eventPools = createEventCallPools(options.maxCallsPerOperation, now);

  const door: Door = {
    validationRules,
    parseOptions: { maxTokens: options.queryLimits.maxTokens },
    took,

    checkOrigin: (origin, host) => checkOrigin(origin, host, options.allowedOrigins),

    async connect(request) {
      took('connect');
      return connectCaller(options, budgets, logger, request);
    },

    checkCurrent(connection) {
      const expiresAt = door.expiresAt(connection);
      if (expiresAt === undefined || now() < expiresAt) return undefined;
      return refuse('credentials-expired', 'The access token has expired: connect again with a fresh one.');
    },

    expiresAt(connection) {
      const exp = connection.caller?.expiresAt;
      return exp === undefined ? undefined : exp + toleranceMs;
    },

    mayRunAnonymously: (query) => isAnonymousDocument(query, options.publicIntrospection),

    spendOperation(connection, onQuota) {
      took('operation-budget');
      return budgets.spend('request', budgets.operationsKey(connection), onQuota);
    },

    trustedQuery(connection, request) {
      took('trusted-document');
      return trustedQueryOf(options, logger, connection, request);
    },

    checkOperation(document, operationName, variables, transport) {
      took('operation-checks');
      return checkOperationOf(options, document, operationName, variables, transport);
    },

    async admit(connection, request, transport) {
      took('credential-current');
      const stale = door.checkCurrent(connection);
      if (stale !== undefined) return stale;
      const limited = await door.spendOperation(connection);
      if (limited !== undefined) return limited;
      const trusted = door.trustedQuery(connection, request);
      if (isRefusal(trusted)) return trusted;
      const query = trusted ?? request.query;
      if (typeof query !== 'string' || query === '') {
        return refuse(
          'parse-failed',
          'The request names no operation: send `query` (or a listed `documentId`).',
        );
      }
      const document = prepare(query);
      if (isRefusal(document)) return document;
      if (options.introspectionOff === true) {
        const hidden = checkHiddenSchema(document, connection.caller, options.schema);
        if (hidden !== undefined) return hidden;
      }
      const admitted = door.checkOperation(document, request.operationName, request.variables, transport);
      if (isRefusal(admitted) || options.trustedDocuments?.isTrustedBody(query) !== true) return admitted;
      return { ...admitted, trustedDocument: true };
    },

    holdOperation(connection, transport) {
      took('hold');
      return holds.hold(connection, transport);
    },

    eventCallBudget: (connection, eventId, callLimit) =>
      eventPools.budget(budgets.callerKey(connection), eventId, callLimit),
  };
  return door;
}

/**
 * With introspection off: introspection refused as Apollo Server refuses it over HTTP, and
 * `_service` refused to a caller without the operator or schema-reader role.
 */
function checkHiddenSchema(
  document: DocumentNode,
  caller: Caller | undefined,
  schema: GraphQLSchema,
): Refusal | undefined {
  const reach = schemaReachOf(document, schema);
  if (reach.introspection !== undefined) return refuse('validation-failed', reach.introspection);
  if (reach.service && (caller === undefined || !mayReadServiceSdl(caller))) {
    return refuse('forbidden', SERVICE_SDL_FORBIDDEN);
  }
  return undefined;
}

/** What a document reaches of the hidden schema: the same for every caller who sends it. */
interface SchemaReach {
  /** The introspection refusal's message, when the document introspects. */
  readonly introspection: string | undefined;
  /** Whether it selects `_service` (the SDL). */
  readonly service: boolean;
}

/** Per parsed document (the preparer shares one per text), so a subscribe validates it once. */
const schemaReaches = new WeakMap<DocumentNode, SchemaReach>();

function schemaReachOf(document: DocumentNode, schema: GraphQLSchema): SchemaReach {
  let reach = schemaReaches.get(document);
  if (reach === undefined) {
    const [introspects] = validate(schema, document, [NoSchemaIntrospectionCustomRule]);
    reach = { introspection: introspects?.message, service: selectsService(document) };
    schemaReaches.set(document, reach);
  }
  return reach;
}

/** The door's rate-limit buckets: whose budget a connection spends, and the refusal once it is spent. */
interface DoorBudgets {
  /** The caller's key (the address's when anonymous), in its environment. */
  callerKey(connection: Connection): RateKey;
  /** A verified caller's key in `environment`. */
  subjectKey(caller: Caller, environment: PlatformEnvironment | undefined): RateKey;
  /** The operations budget of `connection`: its client's, when that has one of its own. */
  operationsKey(connection: Connection): RateKey;
  spend(
    bucket: RateBucket,
    key: RateKey,
    onQuota?: (quota: QuotaState) => void,
  ): Promise<Refusal | undefined>;
  /** A failing attempt: spends the address's budget, and is told to wait once it is spent. */
  failed(address: string): Promise<Refusal>;
  /** Whether the address may still fail (so it may have a caller's key checked upstream). */
  mayFail(address: string): Promise<boolean>;
}

function createDoorBudgets(
  options: Pick<DoorOptions, 'rateLimits' | 'onRateLimited' | 'environments'>,
): DoorBudgets {
  const { rateLimits } = options;
  const addressKey = (address: string): RateKey => `ip:${address}`;
  // With a key per environment, every budget is the caller's in its environment: a sandbox
  // caller's traffic is never charged to the same subject's or client's live budget.
  const inEnvironment = (environment: PlatformEnvironment | undefined): string =>
    options.environments === undefined || environment === undefined ? '' : `${environment}:`;
  const subjectKey: DoorBudgets['subjectKey'] = (caller, environment) =>
    `sub:${inEnvironment(environment)}${caller.subject}`;
  const callerKey = (connection: Connection): RateKey =>
    connection.caller === undefined
      ? addressKey(connection.address)
      : subjectKey(connection.caller, connection.environment);
  const spend: DoorBudgets['spend'] = async (bucket, key, onQuota) => {
    const decision = await rateLimits.consume(bucket, key);
    if (decision.allowed) {
      if (decision.quota !== undefined) onQuota?.(decision.quota);
      return undefined;
    }
    options.onRateLimited?.(bucket);
    return rateLimited(decision.retryAfterSeconds, undefined, decision.quota);
  };
  return {
    callerKey,
    subjectKey,
    operationsKey(connection) {
      const clientId = connection.caller?.clientId;
      return clientId !== undefined && rateLimits.hasClientBudget(clientId)
        ? `client:${inEnvironment(connection.environment)}${clientId}`
        : callerKey(connection);
    },
    spend,
    failed: async (address) =>
      (await spend('failed-auth', addressKey(address))) ??
      refuse('invalid-credentials', UNAUTHENTICATED_MESSAGE),
    mayFail: async (address) => (await rateLimits.check('failed-auth', addressKey(address))).allowed,
  };
}

/**
 * Who is this (the `connect` step): the credential verified, a failing one spending the address's
 * budget; a live connection must act for some customer, spends its caller's connection budget and
 * learns its key's environment.
 */
async function connectCaller(
  options: DoorOptions,
  budgets: DoorBudgets,
  logger: Logger,
  { credentials, address, kind }: ConnectRequest,
): Promise<Connection | Refusal> {
  const authentication = await options.authenticator.authenticate(credentials, {
    // A caller's own key costs an upstream check: an address that has failed too often pays
    // with a refusal instead (a bearer token is checked locally and never asks).
    mayCheckApiKey: () => budgets.mayFail(address),
  });
  switch (authentication.outcome) {
    case 'unavailable':
      logger.warn('could not check a credential: the issuer keys or the upstream are unavailable');
      return refuse(
        'credentials-unavailable',
        'The access token cannot be checked right now; try again shortly.',
        {
          retryAfterSeconds: 5,
        },
      );
    case 'invalid':
      logger.debug('refused a credential', { reason: authentication.reason });
      return budgets.failed(address);
    case 'anonymous':
      // A long-lived connection without a credential is a failing attempt like a bad one.
      if (kind === 'live') return budgets.failed(address);
      return { caller: undefined, apiKey: undefined, address };
    case 'authenticated':
      break;
  }
  const { caller, apiKey } = authentication;
  const bound =
    options.environments === undefined
      ? undefined
      : boundEnvironment(caller.environment, options.environments);
  if (options.environments !== undefined && bound === undefined) {
    return refuse('forbidden', noEnvironmentMessage(caller.environment, options.environments));
  }
  if (kind === 'request')
    return { caller, apiKey, address, ...(bound === undefined ? {} : { environment: bound }) };
  if (!caller.operator && caller.scope.kind === 'customers' && caller.scope.customerIds.size === 0) {
    return refuse('forbidden', 'This caller may act for no customer: there is nothing to hear.');
  }
  const limited = await budgets.spend('ws-connect', budgets.subjectKey(caller, bound));
  if (limited !== undefined) return limited;
  const probe = await options.environmentOf(apiKey, bound);
  if (probe.outcome === 'refused') {
    return probe.problem.status === 401
      ? refuse('invalid-credentials', UNAUTHENTICATED_MESSAGE)
      : refuse('forbidden', 'The upstream refuses this key.');
  }
  if (probe.outcome !== 'ready') {
    logger.warn('could not learn the upstream environment of a live connection', { outcome: probe.outcome });
    return refuse('credentials-unavailable', 'The upstream cannot be reached now; try again shortly.', {
      retryAfterSeconds: 5,
    });
  }
  return { caller, apiKey, address, environment: probe.discovery.environment };
}

/** The `trusted-document` step: see {@link Door.trustedQuery}. */
function trustedQueryOf(
  options: Pick<DoorOptions, 'trustedDocuments' | 'trustedDocumentsMode' | 'onUntrustedDocument'>,
  logger: Logger,
  connection: Connection,
  request: TrustedDocumentRequest,
): string | undefined | Refusal {
  const store = options.trustedDocuments;
  // Operators keep free-form documents (and so Sandbox in their hands); an anonymous request
  // gets here only with `_service` or public introspection.
  if (store === undefined || connection.caller === undefined || connection.caller.operator) return undefined;
  const resolution = resolveTrustedDocument(store, request);
  if (resolution.ok) return resolution.query;
  // Log-only runs the request's own text; with no text (an unknown id alone) nothing could run.
  const ownQuery = typeof request.query === 'string' && request.query !== '' ? request.query : undefined;
  const runsAnyway = options.trustedDocumentsMode === 'log-only' && ownQuery !== undefined;
  options.onUntrustedDocument?.(resolution.reason, runsAnyway ? 'logged' : 'refused');
  if (!runsAnyway) {
    return refuse('not-trusted-document', 'This operation is not in the list of trusted documents.');
  }
  logger.warn('operation not in the trusted documents: run anyway (TRUSTED_DOCUMENTS_MODE=log-only)', {
    reason: resolution.reason,
    subject: connection.caller.subject,
    // The client's own name, cut short: the text itself may be long, its hash identifies it.
    operationName:
      typeof request.operationName === 'string' ? request.operationName.slice(0, 100) : undefined,
    documentSha256: createHash('sha256').update(ownQuery).digest('hex'),
  });
  return undefined;
}

/** The `operation-checks` step: see {@link Door.checkOperation}. */
function checkOperationOf(
  options: Pick<DoorOptions, 'schema' | 'queryLimits' | 'retriesPerOperation' | 'maxCallsPerOperation'>,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Readonly<Record<string, unknown>> | null | undefined,
  transport: TransportRules,
): AdmittedOperation | Refusal {
  const operation = getOperationAST(document, operationName);
  if (operation === null || operation === undefined) {
    return refuse(
      'validation-failed',
      operationName
        ? `Unknown operation named "${operationName}".`
        : 'Must provide operation name if query contains multiple operations.',
    );
  }
  const vars = variables ?? undefined;
  const measure = checkOperation(
    options.schema,
    document,
    operation,
    vars,
    options.queryLimits.maxCost,
    transport,
  );
  if (isRefusal(measure)) return measure;
  return {
    document,
    operation,
    operationName: operationName ?? undefined,
    variables: vars,
    measure,
    callLimit: callLimitOf(measure, options.retriesPerOperation, options.maxCallsPerOperation),
  };
}

/** The `hold` step: each caller's running long-lived operations, over every connection and transport. */
function createOperationHolds(max: number | undefined, callerKey: (connection: Connection) => RateKey) {
  const runningBySubject = new Map<string, number>();
  return {
    hold(connection: Connection, transport: TransportRules): (() => void) | Refusal {
      const subject = callerKey(connection);
      const running = runningBySubject.get(subject) ?? 0;
      if (max !== undefined && running >= max) {
        return refuse(
          'too-many-operations',
          `This caller already runs ${max} operations over ${transport.name} and the other live transports together, the most allowed; complete one before starting another.`,
        );
      }
      runningBySubject.set(subject, running + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (runningBySubject.get(subject) ?? 1) - 1;
        if (left <= 0) runningBySubject.delete(subject);
        else runningBySubject.set(subject, left);
      };
    },
  };
}

/** How long an event's pool of upstream calls is kept for a caller's subscriptions. */
const EVENT_POOL_WINDOW_MS = 10_000;

/** Each caller's pool of upstream calls per event: see {@link Door.eventCallBudget}. */
function createEventCallPools(maxCallsPerOperation: number, now: () => number) {
  const pools = new Map<string, { pool: CallBudget; createdAt: number }>();
  return {
    budget(callerKey: RateKey, eventId: string, callLimit: number): CallBudget {
      const at = now();
      // In creation order, so the expired ones are always at the front.
      for (const [key, entry] of pools) {
        if (at - entry.createdAt < EVENT_POOL_WINDOW_MS) break;
        pools.delete(key);
      }
      const key = JSON.stringify([callerKey, eventId]);
      let entry = pools.get(key);
      if (entry === undefined) {
        entry = { pool: createCallBudget(maxCallsPerOperation), createdAt: at };
        pools.set(key, entry);
      }
      return createPooledCallBudget(callLimit, entry.pool);
    },
  };
}

/** Why a valid token is refused where every caller must be in one of `configured`. */
function noEnvironmentMessage(
  claimed: PlatformEnvironment | undefined,
  configured: readonly PlatformEnvironment[],
): string {
  const served = configured.join(' or ');
  return claimed === undefined
    ? `This token names no upstream environment: its environment claim must be ${served}.`
    : `This facade serves no ${claimed} environment: the token's environment claim must be ${served}.`;
}

/** The same message whatever was wrong with a credential, so it helps no forger. */
export const UNAUTHENTICATED_MESSAGE =
  'Authentication required: send a valid access token as "Authorization: Bearer <token>".';
