/**
 * What the game day's supervisor (bench/gameday.ts) and its load process (bench/gameday/load.ts)
 * say to each other over the IPC channel, and the documents the load sends (the trusted-documents
 * rollout lists the ones that reach the replicas as they are written here).
 */
import type { Environment } from './topology.ts';

/** A subscriber's transport and the way it reaches the facade. */
export const SUBSCRIBER_TRANSPORTS = ['graphql-ws', 'sse', 'multipart'] as const;
export type SubscriberTransport = (typeof SUBSCRIBER_TRANSPORTS)[number];

export interface LoadConfig {
  /** Keeps idempotency keys of two runs apart. */
  runId: string;
  /** The gateway's GraphQL endpoint (HTTP; its WebSocket twin for graphql-ws). */
  gatewayUrl: string;
  /** The facade Service's base URL (SSE, multipart and the `@live` watchers go there). */
  serviceUrl: string;
  emulatorUrl: string;
  tokens: Record<Environment, string>;
  producerKeys: Record<Environment, string>;
  customers: Record<Environment, { customerId: string; accountId: string }>;
  /** Subscribers per transport: graphql-ws through the gateway, SSE and multipart to the Service. */
  subscribers: Record<SubscriberTransport, number>;
  /** Share of each transport's subscribers that are live callers (the rest sandbox). */
  liveShare: number;
  /** `@live` watchers of the sandbox account, over graphql-ws to the Service. */
  watchers: number;
  /** Queries a second through the gateway (a third of them live callers'). */
  queryRate: number;
  /** Sandbox top-ups a second through the gateway, each retried with its key until acknowledged. */
  mutationRate: number;
  /** The platform's own changes: one per interval per environment, made at the emulator. */
  producerIntervalMs: Record<Environment, number>;
}

/** The amount of a top-up through the facade: whole units. */
export const MUTATION_AMOUNT = '1';
/** The amount of a top-up the platform makes itself: one millionth, so the ledger tells the two apart. */
export const PRODUCER_AMOUNT = '0.000001';

/** One operation: `[kind, environment, startedAt (ms, wall clock), latency ms, failure or null]`. */
export type OperationRecord = [
  kind: 'query' | 'mutation',
  environment: Environment,
  startedAt: number,
  latencyMs: number,
  failure: string | null,
];

/** One subscription of a subscriber, from its start (acknowledged) to its end. */
export interface SessionRecord {
  /** When it was asked for. */
  asked: number;
  /** When the facade (or gateway) accepted it; undefined if it never did. */
  started?: number;
  ended?: number;
  /** Why it ended: `complete`, a close code, an error code. */
  ending?: string;
}

export interface SubscriberRecord {
  id: string;
  transport: SubscriberTransport | 'live-query';
  environment: Environment;
  /** `[eventId, receivedAt]` in arrival order (for a watcher: `[available balance, receivedAt]`). */
  received: [string, number][];
  sessions: SessionRecord[];
  /** Errors in results and refusals, by code. */
  errors: Record<string, number>;
}

export interface MutationRecord {
  key: string;
  firstAt: number;
  attempts: number;
  /** When it was acknowledged; undefined if it never was (given up). */
  acknowledgedAt?: number;
  /** The last failure, when it was given up. */
  lastFailure?: string;
}

/** What the load did between two checkpoints. */
export interface CheckpointCounts {
  /** Distinct top-up keys acknowledged through the facade. */
  acknowledged: number;
  /** Keys given up without an acknowledgement (the write may or may not have been applied). */
  unresolved: number;
  /** The platform's own top-ups the emulator answered 200 (each applied once). */
  producerApplied: Record<Environment, number>;
  producerFailed: Record<Environment, number>;
}

export interface LoadReport {
  operations: OperationRecord[];
  subscribers: SubscriberRecord[];
  mutations: MutationRecord[];
}

export type ToLoad =
  | { op: 'start'; config: LoadConfig }
  /** Pause writes, let every pending key finish, answer with the counts since the last checkpoint. */
  | { op: 'checkpoint'; id: number }
  | { op: 'resume' }
  /** No new operations or writes; subscribers stay. */
  | { op: 'stop' }
  | { op: 'report' }
  | { op: 'close' };

export type FromLoad =
  | { op: 'live'; subscribers: number; watchers: number }
  | { op: 'checkpoint'; id: number; counts: CheckpointCounts }
  | { op: 'report'; report: LoadReport }
  | { op: 'progress'; line: string }
  | { op: 'failed'; message: string };

/** The subscription every subscriber runs: its customer's accounts, resumed with `after`. */
export const SUBSCRIPTION_DOCUMENT =
  'subscription GamedayAccounts($customerId: ID!, $after: String) { accountChanged(customerId: $customerId, after: $after) { eventId cursor type replayed } }';

/** The `@live` watchers' query: the sandbox account's balance, answered again when it changes. */
export const LIVE_QUERY_DOCUMENT =
  'query GamedayWatch($customerId: ID!, $id: ID!) @live { account(customerId: $customerId, id: $id) { id balances { available currency } } }';

export const SANDBOX_QUERY_DOCUMENT =
  'query GamedayAccount($customerId: ID!, $id: ID!) { account(customerId: $customerId, id: $id) { id balances { available currency } } }';

export const LIVE_QUERY_READ_DOCUMENT =
  'query GamedayCustomer($id: ID!) { customer(id: $id) { id displayName } }';

export const TOP_UP_DOCUMENT =
  'mutation GamedayTopUp($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { replayed topUp { id } } }';

/** Every document the load sends. */
export const GAMEDAY_DOCUMENTS = [
  SUBSCRIPTION_DOCUMENT,
  LIVE_QUERY_DOCUMENT,
  SANDBOX_QUERY_DOCUMENT,
  LIVE_QUERY_READ_DOCUMENT,
  TOP_UP_DOCUMENT,
];
