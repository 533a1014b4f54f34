/**
 * The door as each of its audiences sees it: every transport's adapter ({@link TransportDoor}), the
 * live connections ({@link LiveDoor}), an event's executions ({@link EventCallPools}), the upstream
 * calls' meters, and an executor that words a refused document itself ({@link ExecutorDoor});
 * {@link Door} is all of them, what `createDoor` builds. Above the door's words (`door.ts`) and the
 * request admissions (`requests.ts`), so neither of those imports back.
 */
import type { ValidationRule } from 'graphql';
import type { CallBudget } from '../../upstream/call-budget.ts';
import type { Refusal } from '../refusal.ts';
import type {
  AdmittedOperation,
  Connection,
  ConnectRequest,
  OperationRequest,
  StepRefusal,
  TransportRules,
} from './door.ts';
import type { BatchAdmission, BatchToAdmit, RequestAdmission, RequestToAdmit } from './requests.ts';
import type { UpstreamMeters } from './upstream-calls.ts';

/** A live operation the door let in, holding one of its caller's running operations until released. */
export interface LiveAdmission {
  readonly operation: AdmittedOperation;
  /** Gives the caller's running operation back. Idempotent. */
  readonly release: () => void;
}

/** What every transport's adapter uses. */
export interface TransportDoor {
  /** Whether a browser page of `origin` may connect to `host` (transports without CORS). */
  checkOrigin(origin: string | undefined, host: string | undefined): Refusal | undefined;
  /** Who is this (the `connect` step): the connection, or why not. */
  connect(request: ConnectRequest): Promise<Connection | Refusal>;
  /**
   * One request and its one operation, every step in order: connect, the rule for anonymous
   * callers, the operation budget, trusted documents, parse, validation, the operation checks.
   */
  admitRequest(request: RequestToAdmit, transport: TransportRules): Promise<RequestAdmission | StepRefusal>;
  /**
   * One request of several operations: connect once (an anonymous batch only when every operation
   * is anonymous-safe), then each operation every later step, in the batch's order.
   */
  admitBatch(batch: BatchToAdmit, transport: TransportRules): Promise<BatchAdmission | StepRefusal>;
}

/** What the live connections use, per operation of an open connection. */
export interface LiveDoor {
  /**
   * One operation of a live connection, every step in order: the caller's running-operation hold,
   * the credential still holding, the operation budget, trusted documents, parse, validation, the
   * operation checks. A refusal releases the hold.
   */
  admit(
    connection: Connection,
    request: OperationRequest,
    transport: TransportRules,
  ): Promise<LiveAdmission | StepRefusal>;
  /**
   * Whether `connection`'s credential still holds: a refusal once its `exp` (with the clock
   * tolerance) has passed. Asked again after every wait.
   */
  checkCurrent(connection: Connection): Refusal | undefined;
  /** When `connection`'s credential stops holding (ms since the epoch, tolerance included). */
  expiresAt(connection: Connection): number | undefined;
}

/** What an event's executions use: the caller's one pool of upstream calls per event. */
export interface EventCallPools {
  /**
   * The call budget of one event's execution for one subscription: its own cost-derived limit, and
   * a pool the caller's other subscriptions share for the same event, so however many subscriptions
   * it runs, one event costs the caller at most `maxCallsPerOperation` upstream calls. A live
   * query's re-runs use it too, with a round of theirs for `eventId` (one per invalidation, one per
   * refresh window of `windowMs`, `live-queries.ts`); `windowMs` (10 s unless given) is how long
   * the pool is kept.
   */
  eventCallBudget(connection: Connection, eventId: string, callLimit: number, windowMs?: number): CallBudget;
}

/**
 * What an executor that words a refused document itself uses (Apollo Server over HTTP): the same
 * parser options and validation rules, so its words for the door's refusal are the door's reasons.
 */
export interface ExecutorDoor {
  readonly validationRules: readonly ValidationRule[];
  readonly parseOptions: { readonly maxTokens: number };
}

/** The door of one app: every audience's part. */
export interface Door extends TransportDoor, LiveDoor, EventCallPools, UpstreamMeters, ExecutorDoor {}
