/**
 * The door's words and its one order. Every transport admits callers and operations through
 * the door, in the order {@link ADMISSION_ORDER} declares, and nothing else admits them: one
 * function runs that order (`create-door.ts`), for HTTP and for every live transport. The door
 * knows nothing of HTTP or WebSocket; an adapter reads what its transport carries, makes one call
 * here, and translates the answer: an admitted connection or operation, or a {@link Refusal} it
 * answers through the table in `../refusal.ts`.
 *
 * Each audience gets the part of the door it uses (`audiences.ts`): a transport's adapter, the live
 * connections, an event's executions, the upstream calls' meters, and an executor that words a
 * refused document itself. HTTP's requests and batches, as the door takes them: `requests.ts`.
 */
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode, OperationTypeNode } from 'graphql';
import type { Credentials } from '../../auth/authenticate.ts';
import type { Caller } from '../../auth/caller.ts';
import type { VerifiedGateway } from '../../auth/gateway-credential.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { OperationMeasure } from '../../graph/query-limits.ts';
import type { Refusal } from '../refusal.ts';
import type { TrustedDocumentRequest } from '../trusted-documents.ts';

/**
 * The door's steps, in the one order every transport takes them. `on`: which connections take the
 * step (`live`: graphql-ws, SSE, multipart and every later live transport; `every`: HTTP too). The
 * door runs this list itself, step after step (`create-door.ts`); a test pins each transport to it
 * (test/integration/edge-admission-order.test.ts), through the `onStep` hook each step reports to.
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
  /** The caller's running-operation cap (`RATE_LIMIT_LIVE_OPERATIONS`), over every live transport. */
  { step: 'hold', on: 'live' },
  /** The credential still holds (its `exp`, with the verifier's clock tolerance); asked again after every wait. */
  { step: 'credential-current', on: 'live' },
  /** The caller's operation budget (the address's when anonymous). */
  { step: 'operation-budget', on: 'every' },
  /** Trusted documents: a listed id's stored body, or the request's own listed text. */
  { step: 'trusted-document', on: 'every' },
  /** Parse with the token limit (`QUERY_MAX_TOKENS`); a document parsed and found valid before is kept. */
  { step: 'parse', on: 'every' },
  /** Validation with the query limits and the one cost measure; no introspection when it is off. */
  { step: 'validate', on: 'every' },
  /**
   * The transport serves the operation type, `_service` only for its readers when introspection is
   * off, input strings, the cost with the variables; the operation's upstream call budget derived
   * from the cost.
   */
  { step: 'operation-checks', on: 'every' },
  /**
   * Execution, by the transport's executor. A subscription's resolver checks the caller's scope
   * (the customer it names) first, before anything is registered with the reconciler, any customer
   * is watched, a queue opened or a cursor judged (src/graph/, src/events/delivery/).
   */
  { step: 'execute', on: 'every' },
] as const satisfies readonly { step: string; on: 'every' | 'live' }[];

/** One step of {@link ADMISSION_ORDER}. */
export type AdmissionStep = (typeof ADMISSION_ORDER)[number]['step'];

/** The steps the door itself takes (all but execution). */
export type DoorStep = Exclude<AdmissionStep, 'execute'>;

/** The steps a connection of `kind` takes before execution, in order. */
export function admissionStepsOf(kind: ConnectRequest['kind']): DoorStep[] {
  return ADMISSION_ORDER.flatMap((entry) =>
    entry.step !== 'execute' && (entry.on === 'every' || kind === 'live') ? [entry.step] : [],
  );
}

/** What a transport serves, and how to say so to a client that sent something else. */
export interface TransportRules {
  /** For logs and metrics: `http`, `graphql-ws`, `sse`, `multipart`. */
  readonly name: string;
  /** The operation types the transport runs; any other is refused as `wrong-transport`. */
  readonly serves: ReadonlySet<OperationTypeNode>;
  /** The message of that refusal: where the operation should go instead. */
  readonly elsewhere: string;
  /**
   * For a transport that serves queries but not subscriptions, what becomes of a query marked
   * `@live`: refused as `wrong-transport` with this message (HTTP, whose clients would otherwise
   * wait for updates that never come), or, when absent, answered once as the query it also is (MCP's
   * tools, whose callers ask for one answer). A transport that serves subscriptions serves live
   * queries as they are.
   */
  readonly liveQueryElsewhere?: string;
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
  /**
   * A live connection a federation gateway opened, proven by its own token holding the gateway
   * role: it multiplexes its caller's operations, so no per-connection cap applies to it while the
   * token holds (until `expiresAt`, ms since the epoch, tolerance included); the caller's own caps
   * always do.
   */
  readonly gateway?: VerifiedGateway;
}

/** What an adapter reads from its transport to connect. */
export interface ConnectRequest {
  credentials: Credentials;
  /** The client's address, as `clientAddress` reads it (`TRUST_PROXY` applied). */
  address: string;
  /**
   * `request`: one request, which may be anonymous (its operation must then be anonymous-safe);
   * `live`: a long-lived connection of a caller who may hear events, counted in the caller's
   * connection budget.
   */
  kind: 'request' | 'live';
}

/** An operation as a transport carries it (the GraphQL-over-HTTP request shape). */
export interface OperationRequest extends TrustedDocumentRequest {
  operationName?: string | null | undefined;
  variables?: Readonly<Record<string, unknown>> | null | undefined;
  /**
   * The text the transport's own cache of persisted queries holds for the request's hash (Apollo's
   * automatic persisted queries over HTTP): run when the request sends no `query` and no trusted
   * document names one.
   */
  persistedQuery?: string | undefined;
}

/** An operation the door let in: what to execute, and with how many upstream calls at most. */
export interface AdmittedOperation {
  /** The text admitted: the request's own, a listed document's, or a persisted query's. */
  readonly query: string;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  readonly operationName: string | undefined;
  readonly variables: Readonly<Record<string, unknown>> | undefined;
  readonly measure: OperationMeasure;
  /** The operation's upstream call budget: its cost plus its retries, at most the ceiling. */
  readonly callLimit: number;
  /** Its text is a listed trusted document (metrics label such operations by name). */
  readonly trustedDocument?: boolean;
  /** The caller's schema (its contract's, src/graph/audiences.ts): validated against, executed with. */
  readonly schema: GraphQLSchema;
}

/** A refusal, with the step that made it and, once the document was found valid, that document. */
export interface StepRefusal extends Refusal {
  readonly step: DoorStep;
  readonly document?: DocumentNode;
}
