/**
 * The context of one operation, from whom the door admitted: the caller's upstream key (or the
 * facade's), its scope, who the writes are made for, the deadline, and the call budget the door
 * set. The same for every transport; built per HTTP request and per subscription event.
 */
import type { Caller } from '../auth/caller.ts';
import { ANONYMOUS_SCOPE, scopeOf } from '../upstream/access.ts';
import type { CallBudget } from '../upstream/call-budget.ts';
import { deferredOperationSignal } from '../upstream/cancellation.ts';
import type { SharedReadCache, UpstreamClient } from '../upstream/client.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { createGraphContext, type GraphContext } from './context.ts';

/** What an operation's context is built from. */
export interface OperationContextInput {
  /** Who the door admitted (the caller undefined for an anonymous request). */
  connection: { readonly caller: Caller | undefined; readonly apiKey: string | undefined };
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
}

export interface OperationContextsOptions {
  upstreamClient: UpstreamClient;
  /** The facade's configured key (its source), for callers without one of their own. */
  defaultApiKey: UpstreamKey;
  /** `OPERATION_TIMEOUT_MS`. */
  operationTimeoutMs: number;
  /** Aborted when a shutdown's drain window has passed. */
  shutdown: AbortSignal;
}

/** Builds the factory of operation contexts of one app. */
export function createOperationContexts(
  options: OperationContextsOptions,
): (input: OperationContextInput) => GraphContext {
  return ({
    connection: { caller, apiKey },
    requestId,
    facadeRequestId,
    callerRequestId,
    readThrough,
    readCache,
    callBudget,
  }) =>
    createGraphContext(
      createUpstreamContext(options.upstreamClient, {
        apiKey: apiKey ?? options.defaultApiKey,
        scope: caller === undefined ? ANONYMOUS_SCOPE : scopeOf(caller),
        // The open facade (AUTH_MODE=none) has no one to name: its writes are the configured key's.
        actor:
          caller === undefined || caller.via === 'open'
            ? undefined
            : { subject: caller.subject, client: caller.clientId ?? null },
        requestId,
        facadeRequestId,
        callerRequestId,
        signal: deferredOperationSignal(options.operationTimeoutMs, options.shutdown),
        // Callers share the upstream key's Idempotency-Keys: each caller's are its own.
        idempotencyOwner: caller?.subject,
        readCache,
        readThrough,
        callBudget,
      }),
      caller,
    );
}
