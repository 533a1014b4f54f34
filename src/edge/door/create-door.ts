/**
 * The door of one app, and the one function that runs {@link admissionStepsOf}'s order: each step
 * is an entry of one table, run in the order `door.ts` declares, for HTTP's requests and for every
 * live transport's operations alike. What each step knows is in its own file: `connect.ts` (who,
 * the rule for anonymous callers, budgets, expiry), `holds.ts`, `trusted.ts`, `documents.ts` (parse,
 * validate) and `operation-checks.ts`.
 */
import type { GraphQLSchema } from 'graphql';
import type { QueryLimits } from '../../graph/query-limits.ts';
import { createQueryLimitsRules } from '../../graph/query-limits.ts';
import type { Logger } from '../../logger.ts';
import { checkOrigin } from '../origin.ts';
import { isRefusal, refuse, type Refusal } from '../refusal.ts';
import { createDoorBudgets } from './budgets.ts';
import { connectCaller, createExpiry, type ConnectOptions } from './connect.ts';
import { createDocumentStepsOfSchemas, type DocumentSteps } from './documents.ts';
import type { Door } from './audiences.ts';
import {
  admissionStepsOf,
  type AdmissionStep,
  type Connection,
  type ConnectRequest,
  type DoorStep,
  type StepRefusal,
} from './door.ts';
import { createEventCallPools, createOperationHolds } from './holds.ts';
import { checkOperationOf, type OperationCheckOptions } from './operation-checks.ts';
import { createRequestAdmissions, type Admission } from './requests.ts';
import { trustedQueryOf, type TrustedDocumentOptions } from './trusted.ts';

/** Options of {@link createDoor}. */
export interface DoorOptions extends ConnectOptions, TrustedDocumentOptions, OperationCheckOptions {
  /** The whole schema: every caller's when `schemaOf` is absent. */
  schema: GraphQLSchema;
  /** `RATE_LIMIT_LIVE_OPERATIONS`: long-lived operations one caller may run at once; none when absent. */
  maxOperationsPerCaller?: number | undefined;
  /** `QUERY_MAX_*`: the parser's token limit, the validation limits and the one cost measure. */
  queryLimits: QueryLimits;
  /** `AUTH_CLOCK_TOLERANCE_SECONDS`: the leeway on `exp` the verifier gave when it accepted a token. */
  clockToleranceSeconds: number;
  /** `CORS_ORIGINS`: browser origins besides the facade's own host that may connect. */
  allowedOrigins: readonly string[];
  /** Told of each step of the order as an operation or a connection takes it; must not throw. */
  onStep?(step: AdmissionStep): void;
  logger: Logger;
  /** The clock, for tests. */
  now?: () => number;
}

/** One step of an operation (every step but `connect`, which makes the connection). */
type OperationStep = (admission: Admission) => Promise<Refusal | undefined> | Refusal | undefined;

/** Builds the door of one app. */
export function createDoor(options: DoorOptions): Door {
  const now = options.now ?? Date.now;
  const logger = options.logger.child({ component: 'door' });
  const validationRules = createQueryLimitsRules(options.queryLimits);
  const budgets = createDoorBudgets(options);
  const expiry = createExpiry(options.clockToleranceSeconds, now);
  const callerKey = (connection: Connection) => budgets.callerKey(connection);
  const schemaOf: NonNullable<DoorOptions['schemaOf']> = (caller) =>
    options.schemaOf === undefined ? options.schema : options.schemaOf(caller);
  const steps = createOperationSteps(options, logger, {
    budgets,
    expiry,
    holds: createOperationHolds(options.maxOperationsPerCaller, callerKey),
    documentsOf: createDocumentStepsOfSchemas({
      validationRules,
      maxTokens: options.queryLimits.maxTokens,
      hideSchemaDetails: options.introspectionOff === true,
    }),
  });

  /** Runs the order from the step after `after` through `last`, or to the first refusal. */
  const run = async (
    admission: Admission,
    after: DoorStep,
    last: DoorStep = 'operation-checks',
  ): Promise<StepRefusal | undefined> => {
    const order = admissionStepsOf(admission.kind);
    for (const step of order.slice(order.indexOf(after) + 1, order.indexOf(last) + 1)) {
      // `connect` makes the connection every later step reads: it runs before, on its own.
      if (step === 'connect') continue;
      options.onStep?.(step);
      const refusal = await steps[step](admission);
      if (refusal === undefined) continue;
      admission.release?.();
      // A document refused by the operation checks is valid: an executor may word the refusal from it.
      const document = step === 'operation-checks' ? admission.parsed?.document : undefined;
      return { ...refusal, step, ...(document === undefined ? {} : { document }) };
    }
    return undefined;
  };

  const connect = async (request: ConnectRequest): Promise<Connection | Refusal> => {
    options.onStep?.('connect');
    return connectCaller(options, budgets, logger, request);
  };
  /** The schema of a connection `connect` let in (it refused any served none). */
  const servedTo = (connection: Connection) => stepInput(schemaOf(connection.caller));

  return {
    validationRules,
    parseOptions: { maxTokens: options.queryLimits.maxTokens },
    checkOrigin: (origin, host) => checkOrigin(origin, host, options.allowedOrigins),
    connect,

    ...createRequestAdmissions({
      connect,
      run,
      publicIntrospection: options.publicIntrospection,
      servedTo,
    }),

    async admit(connection, request, transport) {
      const schema = servedTo(connection);
      const admission: Admission = { kind: 'live', transport, connection, request, listed: false, schema };
      const refusal = await run(admission, 'connect');
      if (refusal !== undefined) return refusal;
      return { operation: stepInput(admission.admitted), release: stepInput(admission.release) };
    },

    checkCurrent: expiry.checkCurrent,
    expiresAt: expiry.expiresAt,
    ...createEventCallPools(options.maxCallsPerOperation, now, callerKey),
    upstreamMeter: budgets.upstreamMeter,
  };
}

/** The steps after `connect`, each reading what the ones before it left. */
function createOperationSteps(
  options: DoorOptions,
  logger: Logger,
  parts: {
    budgets: ReturnType<typeof createDoorBudgets>;
    expiry: ReturnType<typeof createExpiry>;
    holds: ReturnType<typeof createOperationHolds>;
    documentsOf: (schema: GraphQLSchema) => DocumentSteps;
  },
): Record<Exclude<DoorStep, 'connect'>, OperationStep> {
  const { budgets, expiry, holds, documentsOf } = parts;
  return {
    hold(admission) {
      const release = holds.hold(admission.connection, admission.transport);
      if (isRefusal(release)) return release;
      admission.release = release;
      return undefined;
    },
    'credential-current': (admission) => expiry.checkCurrent(admission.connection),
    // An operation, and the upstream calls its caller's operations sent so far.
    'operation-budget': async (admission) =>
      (await budgets.spendOperation(admission.connection, admission.onQuota)) ??
      budgets.checkUpstreamCalls(admission.connection),
    'trusted-document'(admission) {
      const { request } = admission;
      const trusted = trustedQueryOf(options, logger, admission.connection, request);
      if (isRefusal(trusted)) return trusted;
      admission.listed = trusted !== undefined;
      const own = typeof request.query === 'string' ? request.query : request.persistedQuery;
      const query = trusted ?? own;
      if (query !== undefined && query !== '') admission.query = query;
      return undefined;
    },
    parse(admission) {
      if (admission.query === undefined) {
        return refuse(
          'parse-failed',
          'The request names no operation: send `query` (or a listed `documentId`).',
        );
      }
      const parsed = documentsOf(admission.schema).parse(admission.query);
      if (isRefusal(parsed)) return parsed;
      admission.parsed = parsed;
      return undefined;
    },
    validate: ({ schema, query, parsed }) =>
      documentsOf(schema).validate(stepInput(query), stepInput(parsed)),
    'operation-checks'(admission) {
      const {
        connection: { caller },
        request,
        transport,
        schema,
      } = admission;
      const query = stepInput(admission.query);
      const { document } = stepInput(admission.parsed);
      const checked = checkOperationOf(options, schema, caller, query, document, request, transport);
      if (isRefusal(checked)) return checked;
      const trustedDocument = options.trustedDocuments?.isTrustedBody(query) === true;
      admission.admitted = trustedDocument ? { ...checked, trustedDocument } : checked;
      return undefined;
    },
  };
}

/** What an earlier step left: present, since the order ran that step first. */
function stepInput<T>(value: T | undefined): T {
  if (value === undefined) throw new Error('the door ran a step before the one it reads from');
  return value;
}
