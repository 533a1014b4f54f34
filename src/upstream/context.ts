/**
 * What every upstream call of one GraphQL operation shares: the client, the credentials, the
 * request id, the retry budget and the call budget. Resolvers and loaders pass it to the upstream functions as `up`.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { UpstreamScope } from './access.ts';
import { createCallBudget, type CallBudget } from './call-budget.ts';
import type { SharedReadCache, UpstreamClient } from './client.ts';
import { createCredentials, type UpstreamCredentials, type UpstreamKey } from './credentials.ts';
import { resolveRequestId } from './request-id.ts';
import { createAnswerSources, type AnswerSources } from './response-cache.ts';
import { createRetryBudget, type RetryBudget } from './retry.ts';
import { createDegradedReads, type DegradedReads } from './outage.ts';

/** Who an operation's upstream calls are made for: an authenticated caller. */
export interface UpstreamActor {
  /** The caller's token subject (`key:<digest>` for a caller's own platform key). */
  readonly subject: string;
  /** The OAuth client it called through, when its token names one. */
  readonly client: string | null;
  /** The environment it is bound to, when the facade holds a key per environment. */
  readonly environment?: PlatformEnvironment;
}

export interface UpstreamContext {
  readonly client: UpstreamClient;
  /** The one place that decides which key the upstream sees for this operation. */
  readonly credentials: UpstreamCredentials;
  /** The customers and roles of the caller: every request is checked against it before it is sent. */
  readonly scope: UpstreamScope;
  /** Who the calls are made for (the caller's subject and client), for the audit trail. */
  readonly actor: UpstreamActor | undefined;
  /**
   * The environment the operation is bound to when the facade holds a key per environment (its
   * key is that environment's); undefined with one key.
   */
  readonly environment?: PlatformEnvironment;
  /** Sent as `X-Request-Id` on every call of the operation; the upstream echoes it as `correlationId`. */
  readonly requestId: string;
  /** The facade's own id of the operation (the audit trail's `requestId`); see `request-id.ts`. */
  readonly facadeRequestId: string;
  /** The caller's own `X-Request-Id` when it became `requestId` (the audit trail keeps it apart). */
  readonly callerRequestId?: string | undefined;
  /** Retries the whole operation may still spend. */
  readonly retryBudget: RetryBudget;
  /** Upstream calls the whole operation may still make. */
  readonly callBudget: CallBudget;
  /** Aborted at the operation's deadline or at shutdown; calls in flight are then cancelled. */
  readonly signal?: AbortSignal;
  /**
   * Whose Idempotency-Keys the operation sends (the caller's subject). The upstream keeps keys per
   * API key, which every caller of the facade shares: a caller's key is sent as a digest of it and
   * its owner, so one caller's key can neither block nor reveal another's. Undefined: sent as is.
   */
  readonly idempotencyOwner?: string | undefined;
  /** GET answers shared with operations that read alike (see `client.ts`); absent: none. */
  readonly readCache?: SharedReadCache;
  /** Every read asks the upstream, not the response cache (`Cache-Control: no-cache`). */
  readonly readThrough?: boolean;
  /**
   * The held answers the operation reads, so its whole result may be kept (HTTP queries, when the
   * answer cache is on); absent: nothing is recorded.
   */
  readonly answerSources?: AnswerSources;
  /** What the operation met of an upstream outage (answers served stale, calls failed). */
  readonly degraded: DegradedReads;
}

export interface UpstreamContextOptions {
  /**
   * The key to call the upstream with: the caller's own, or the facade's configured key source
   * (read at each attempt, so calls follow a rotation).
   */
  apiKey: UpstreamKey;
  /**
   * What the caller may reach. Required, so no context is built without deciding it; the facade's
   * own work (registration, readiness) passes `PLATFORM_SCOPE`.
   */
  scope: UpstreamScope;
  /** Who the calls are made for; undefined for the facade's own work. */
  actor?: UpstreamActor | undefined;
  /** See {@link UpstreamContext.environment}. */
  environment?: PlatformEnvironment | undefined;
  /** The request's id (`assignRequestId`); a fresh one is generated when absent or unusable. */
  requestId?: string | undefined;
  /** The facade's own id of the request (`assignRequestId`); `requestId` when absent. */
  facadeRequestId?: string | undefined;
  /** The caller's own `X-Request-Id`, already checked (`acceptCallerRequestId`). */
  callerRequestId?: string | undefined;
  /** Retries the operation may spend; defaults to the client's configured budget. */
  retries?: number;
  /**
   * The operation's deadline and shutdown signal (see `cancellation.ts`), or what makes it when a
   * call first reads it (`deferredOperationSignal`); none: no deadline.
   */
  signal?: AbortSignal | (() => AbortSignal);
  /** See {@link UpstreamContext.idempotencyOwner}. */
  idempotencyOwner?: string | undefined;
  /** See {@link UpstreamContext.readCache}. */
  readCache?: SharedReadCache | undefined;
  /** The operation's call budget when the door set it already; default: the client's ceiling. */
  callBudget?: CallBudget | undefined;
  /** See {@link UpstreamContext.readThrough}. */
  readThrough?: boolean | undefined;
  /** Record what the operation reads ({@link UpstreamContext.answerSources}). */
  recordAnswerSources?: boolean | undefined;
}

/** Builds the upstream context of one GraphQL operation (or one subscription event). */
export function createUpstreamContext(
  client: UpstreamClient,
  options: UpstreamContextOptions,
): UpstreamContext {
  const requestId = resolveRequestId(options.requestId);
  const given = options.signal;
  // Read through a getter, so a deferred signal is made when a call first reads it.
  const signal = typeof given === 'function' ? given : () => given;
  return {
    client,
    credentials: createCredentials(options.apiKey),
    scope: options.scope,
    actor: options.actor,
    ...(options.environment === undefined ? {} : { environment: options.environment }),
    requestId,
    facadeRequestId: options.facadeRequestId ?? requestId,
    ...(options.callerRequestId === undefined ? {} : { callerRequestId: options.callerRequestId }),
    retryBudget: createRetryBudget(options.retries ?? client.retryPolicy.budget),
    callBudget: options.callBudget ?? createCallBudget(client.maxCallsPerOperation),
    get signal() {
      return signal();
    },
    idempotencyOwner: options.idempotencyOwner,
    ...(options.readCache === undefined ? {} : { readCache: options.readCache }),
    ...(options.readThrough === true ? { readThrough: true } : {}),
    ...(options.recordAnswerSources === true ? { answerSources: createAnswerSources() } : {}),
    degraded: createDegradedReads(),
  };
}
