/**
 * The context of one operation, from whom the door admitted: the caller's upstream key (or the
 * facade's), its scope, who the writes are made for, the deadline, and the call budget the door
 * set. The same for every transport; built per HTTP request and per subscription event.
 */
import type { Caller } from '../auth/caller.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import { ANONYMOUS_SCOPE, scopeOf } from '../upstream/access.ts';
import { createCallBudget, type CallBudget } from '../upstream/call-budget.ts';
import { deferredOperationSignal } from '../upstream/cancellation.ts';
import type { SharedReadCache, UpstreamClient } from '../upstream/client.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { createGraphContext, type GraphContext } from './context.ts';

/** What an operation's context is built from. */
export interface OperationContextInput {
  /** Who the door admitted (the caller undefined for an anonymous request). */
  connection: {
    readonly caller: Caller | undefined;
    readonly apiKey: string | undefined;
    /** The environment the door bound the caller to (a key per environment). */
    readonly environment?: PlatformEnvironment | undefined;
  };
  /** The request's id (the caller's of a safe form, or the facade's); generated when absent or unusable. */
  requestId?: string | undefined;
  /** The facade's own id of the request (audit lines record it); `requestId` when absent. */
  facadeRequestId?: string | undefined;
  /** The caller's own `X-Request-Id`, when of a safe form (audit lines keep it apart). */
  callerRequestId?: string | undefined;
  /** Ask the upstream rather than the response cache (the request's `Cache-Control: no-cache`). */
  readThrough?: boolean | undefined;
  /** GET answers shared with operations that read alike (one event's subscribers); none when absent. */
  readCache?: SharedReadCache | undefined;
  /** The operation's call budget when the door set it already (live transports). */
  callBudget?: CallBudget | undefined;
  /** Record the held answers the operation reads, so its result may be kept (`answer-cache.ts`). */
  recordAnswerSources?: boolean | undefined;
}

/** The upstream client and the facade's own key (its source) of one environment. */
export interface EnvironmentUpstream {
  readonly client: UpstreamClient;
  readonly key: UpstreamKey;
}

export interface OperationContextsOptions {
  /**
   * The client and configured key an operation of `environment` uses (callers without a key of
   * their own use the key): with a key per environment, that environment's; otherwise the one.
   */
  upstreamOf: (environment: PlatformEnvironment | undefined) => EnvironmentUpstream;
  /** Whether the facade holds a key per environment, so each caller is bound to one. */
  bindsEnvironments: boolean;
  /** `OPERATION_TIMEOUT_MS`. */
  operationTimeoutMs: number;
  /** Aborted when a shutdown's drain window has passed. */
  shutdown: AbortSignal;
  /** What each upstream call of an operation of `connection` is charged to (its caller's budget). */
  upstreamMeterOf?: (connection: OperationContextInput['connection']) => {
    readonly sent: () => void;
    readonly beforeSend: () => void;
  };
}

/** Builds the factory of operation contexts of one app. */
export function createOperationContexts(
  options: OperationContextsOptions,
): (input: OperationContextInput) => GraphContext {
  return ({
    connection,
    requestId,
    facadeRequestId,
    callerRequestId,
    readThrough,
    readCache,
    callBudget,
    recordAnswerSources,
  }) => {
    const { caller, apiKey, environment } = connection;
    // Bound only with a key per environment: the live connections of one key learn its environment
    // too, and that changes nothing then.
    const bound =
      caller?.via === 'token' && environment !== undefined && options.bindsEnvironments
        ? environment
        : undefined;
    const upstream = options.upstreamOf(bound);
    const budget = callBudget ?? createCallBudget(upstream.client.maxCallsPerOperation);
    if (options.upstreamMeterOf !== undefined) {
      const meter = options.upstreamMeterOf(connection);
      budget.onSent = meter.sent;
      budget.beforeSend = meter.beforeSend;
    }
    return createGraphContext(
      createUpstreamContext(upstream.client, {
        apiKey: apiKey ?? upstream.key,
        scope: caller === undefined ? ANONYMOUS_SCOPE : scopeOf(caller),
        // The open facade (AUTH_MODE=none) has no one to name: its writes are the configured key's.
        actor:
          caller === undefined || caller.via === 'open'
            ? undefined
            : {
                subject: caller.subject,
                client: caller.clientId ?? null,
                ...(bound === undefined ? {} : { environment: bound }),
              },
        environment: bound,
        requestId,
        facadeRequestId,
        callerRequestId,
        signal: deferredOperationSignal(options.operationTimeoutMs, options.shutdown),
        // Callers share the upstream key's Idempotency-Keys: each caller's are its own.
        idempotencyOwner: caller?.subject,
        readCache,
        readThrough,
        callBudget: budget,
        recordAnswerSources,
      }),
      caller,
    );
  };
}
