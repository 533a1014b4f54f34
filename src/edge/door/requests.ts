/**
 * The door's admission of the requests of a transport that carries its operations in requests
 * (HTTP): one operation per request, or a batch of them in one request. Each connects once (the
 * rule for anonymous callers applied to every operation it holds), then runs the order from the
 * step after `connect` for each operation; what a refusal at each step is (the request's, or the
 * operation's alone) is said here.
 */
import type { GraphQLSchema } from 'graphql';
import { isRefusal, type Refusal } from '../refusal.ts';
import { refuseAnonymous } from './connect.ts';
import type { QuotaState } from '../client-budgets.ts';
import type { ParsedDocument } from './documents.ts';
import type {
  AdmittedOperation,
  Connection,
  ConnectRequest,
  DoorStep,
  OperationRequest,
  StepRefusal,
  TransportRules,
} from './door.ts';

/** One request of a transport that carries one operation per request (HTTP), as its adapter reads it. */
export interface RequestToAdmit extends Omit<ConnectRequest, 'kind'> {
  /** The operation it names; undefined when it names none (its executor answers it, and runs nothing). */
  request: OperationRequest | undefined;
  /** The request's own document text as sent, read by the rule for anonymous callers. */
  ownQuery?: unknown;
  /** It asks for the landing page, which holds no data: an anonymous caller may have it. */
  page?: boolean;
  /** Told what is left of the operation budget it spent (the RateLimit header fields). */
  onQuota?: ((quota: QuotaState) => void) | undefined;
}

/** The door's verdict on one operation of a request: what its executor runs, or answers, for it. */
export interface OperationAdmission {
  /**
   * Admitted, refused, or undefined when the request names no operation. A single request's
   * operation is refused here from `parse` on only (an earlier refusal is the request's); an
   * operation of a batch, at any step after `connect`.
   */
  readonly operation: AdmittedOperation | StepRefusal | undefined;
  /** The text the door read for the operation, when it found one. */
  readonly query: string | undefined;
  /** Whether trusted documents gave that text (a listed id's body): the executor must run it. */
  readonly listed: boolean;
}

/**
 * A request the door let in: who sent it, and its operation's verdict. A refusal of the operation
 * (from `parse` on) is the operation's, not the request's: the adapter hands it to its executor,
 * which answers it as it answers an operation it refuses, and runs nothing.
 */
export interface RequestAdmission extends OperationAdmission {
  readonly connection: Connection;
  /** The caller's schema (its contract's): the executor words a refusal and runs the operation with it. */
  readonly schema: GraphQLSchema;
}

/**
 * A batch the door let in (one request holding several operations, a JSON array): who sent it,
 * once, and each operation's own verdict, in the batch's order. Each operation took every step
 * after `connect` on its own (its operation budget, its trusted document, its checks); a refusal
 * of one is that operation's answer alone.
 */
export interface BatchAdmission {
  readonly connection: Connection;
  /** The caller's schema (its contract's), every operation's. */
  readonly schema: GraphQLSchema;
  readonly operations: readonly OperationAdmission[];
}

/** One batch of a transport that carries several operations in one request (HTTP), as its adapter reads it. */
export interface BatchToAdmit extends Omit<RequestToAdmit, 'request' | 'ownQuery' | 'page'> {
  /** Each operation, in order (an empty one where an element names none), with its own text as sent. */
  operations: readonly { request: OperationRequest; ownQuery: unknown }[];
}

/** One operation's admission under way: what its steps read, and what each leaves for the next. */
export interface Admission {
  readonly kind: ConnectRequest['kind'];
  readonly transport: TransportRules;
  readonly connection: Connection;
  readonly request: OperationRequest;
  readonly onQuota?: RequestToAdmit['onQuota'];
  /** Trusted documents gave the text (a listed id's body). */
  listed: boolean;
  /** The caller's schema, as `schemaOf` answered at `connect`. */
  readonly schema: GraphQLSchema;
  query?: string;
  parsed?: ParsedDocument;
  admitted?: AdmittedOperation;
  release?: () => void;
}

/** What the request admissions use of the door being built. */
export interface RequestAdmissionParts {
  connect: (request: ConnectRequest) => Promise<Connection | Refusal>;
  /** Runs the order from the step after `after` through `last`, or to the first refusal. */
  run: (admission: Admission, after: DoorStep, last?: DoorStep) => Promise<StepRefusal | undefined>;
  /** `INTROSPECTION=public`: an anonymous caller may introspect. */
  publicIntrospection: boolean | undefined;
  /** The schema of a connection `connect` let in (its contract's). */
  servedTo: (connection: Connection) => GraphQLSchema;
}

/** The door's `admitRequest` and `admitBatch`. */
export function createRequestAdmissions({
  connect,
  run,
  publicIntrospection,
  servedTo,
}: RequestAdmissionParts) {
  /** Connects once for a request whose operations' own texts are `ownQueries`. */
  const connectRequest = async (
    ask: Omit<RequestToAdmit, 'request'>,
    ownQueries: readonly unknown[],
  ): Promise<Connection | StepRefusal> => {
    const connected = await connect({ credentials: ask.credentials, address: ask.address, kind: 'request' });
    if (isRefusal(connected)) return { ...connected, step: 'connect' };
    for (const ownQuery of ownQueries) {
      const refusal = refuseAnonymous(connected, { ...ask, ownQuery }, publicIntrospection === true);
      if (refusal !== undefined) return { ...refusal, step: 'connect' };
    }
    return connected;
  };

  /** One operation after `connect`: its refusal at any step, or its admission. */
  const admitOperation = async (
    connection: Connection,
    request: OperationRequest,
    ask: Pick<RequestToAdmit, 'onQuota'>,
    transport: TransportRules,
    last: DoorStep = 'operation-checks',
  ): Promise<{ admission: Admission; refusal: StepRefusal | undefined }> => {
    const admission: Admission = {
      kind: 'request',
      transport,
      connection,
      request,
      onQuota: ask.onQuota,
      listed: false,
      schema: servedTo(connection),
    };
    return { admission, refusal: await run(admission, 'connect', last) };
  };

  return {
    async admitRequest(
      ask: RequestToAdmit,
      transport: TransportRules,
    ): Promise<RequestAdmission | StepRefusal> {
      const connection = await connectRequest(ask, [ask.ownQuery]);
      if (isRefusal(connection)) return connection;
      // A request that names no operation spends its budget; its executor answers it, running nothing.
      const named = ask.request !== undefined;
      const { admission, refusal } = await admitOperation(
        connection,
        ask.request ?? {},
        ask,
        transport,
        named ? 'operation-checks' : 'operation-budget',
      );
      // A refusal of the request itself (its budget, its trusted document) is the adapter's to answer.
      if (refusal !== undefined && !concernsDocument(refusal.step)) return refusal;
      const { query, listed, schema } = admission;
      if (!named) return { connection, operation: undefined, query, listed, schema };
      return { connection, operation: refusal ?? admitted(admission), query, listed, schema };
    },

    async admitBatch(batch: BatchToAdmit, transport: TransportRules): Promise<BatchAdmission | StepRefusal> {
      const connection = await connectRequest(
        batch,
        batch.operations.map((operation) => operation.ownQuery),
      );
      if (isRefusal(connection)) return connection;
      const operations: OperationAdmission[] = [];
      // In order: the budget each spends is spent in the order the client sent them.
      for (const { request } of batch.operations) {
        const { admission, refusal } = await admitOperation(connection, request, batch, transport);
        const { query, listed } = admission;
        operations.push({ operation: refusal ?? admitted(admission), query, listed });
      }
      return { connection, schema: servedTo(connection), operations };
    },
  };
}

/** Whether a refusal at `step` is about the document (from `parse` on) rather than the request. */
function concernsDocument(step: DoorStep): boolean {
  return step === 'parse' || step === 'validate' || step === 'operation-checks';
}

function admitted(admission: Admission): NonNullable<Admission['admitted']> {
  if (admission.admitted === undefined) throw new Error('the door admitted an operation it never checked');
  return admission.admitted;
}
