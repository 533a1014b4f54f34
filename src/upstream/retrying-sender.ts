/**
 * A call's attempts: retried while what failed may be retried and the operation's budgets allow,
 * sent again at once with a rotated key the old one was refused for, under a span of its own when
 * tracing is on.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logger.ts';
import {
  cancelled,
  describeFailure,
  observe,
  type AttemptSender,
  type SentResponse,
} from './attempt-sender.ts';
import { spendCall } from './call-budget.ts';
import type { UpstreamCall, UpstreamObserver, UpstreamTracer } from './call.ts';
import { answeredBy, failsCircuit, type CircuitBreaker } from './circuit-breaker.ts';
import { UpstreamProblemError, UpstreamUnavailableError } from './errors.ts';
import { isUpstreamOutage } from './outage.ts';
import { backoffDelayMs, isRetryable, type RetryConfig } from './retry.ts';
import type { UpstreamRequest } from './types.ts';

/** A call with its retries (and its span, when tracing is on); `progress.attempts` counts attempts. */
export type CallSender = (
  call: UpstreamCall,
  request: UpstreamRequest,
  progress?: { attempts: number },
) => Promise<SentResponse>;

/** Sends a call's attempts, retrying what may be retried, under a span of its own when tracing is on. */
export function createRetryingSender(parts: {
  sendOnce: AttemptSender;
  policy: RetryConfig;
  logger: Logger;
  observer: UpstreamObserver | undefined;
  tracer: UpstreamTracer | undefined;
  /** The environment's circuit: asked before every attempt, told how every call ended. */
  circuit: CircuitBreaker;
}): CallSender {
  const { sendOnce, policy, logger, observer, tracer, circuit } = parts;

  /**
   * Tells the circuit how `call` ended with `error` after `attempts` attempts, and the operation
   * what it met of an outage; returns what the call failed with: `error`, or for a refusal of the
   * facade's own key, the facade's outage ({@link asFacadeOutage}).
   */
  function ended(call: UpstreamCall, error: unknown, attempts: number): unknown {
    // The circuit hears the upstream's answer as it was: a refused key is the upstream answering.
    if (failsCircuit(error, attempts)) circuit.record('failed', describeFailure(error));
    else if (answeredBy(error)) circuit.record('answered');
    const failure = asFacadeOutage(call, error);
    if (call.degraded !== undefined && isUpstreamOutage(failure)) call.degraded.failed = true;
    return failure;
  }

  /** Tells the observer and the circuit of a call's failure; returns `error`. */
  function failed(call: UpstreamCall, request: UpstreamRequest, attempts: number, error: unknown): unknown {
    if (observer?.call) {
      observe(() => observer.call?.({ call, request, attempts, response: undefined, error }));
    }
    return ended(call, error, attempts);
  }

  /** Sends `request`, retrying what may be retried; `progress.attempts` counts attempts made. */
  async function sendWithRetries(
    call: UpstreamCall,
    request: UpstreamRequest,
    progress: { attempts: number },
    traceHeaders: Readonly<Record<string, string>> | undefined,
  ): Promise<SentResponse> {
    let resentWithNewKey = false;
    let lastFailure: unknown;
    for (let attempt = 1; ; attempt++) {
      // Past the deadline (or in shutdown) nothing more is sent, retries included.
      if (call.signal?.aborted) throw cancelled(call);
      // An open circuit sends nothing: a mutation is refused before anything leaves, and a call
      // whose circuit opened during its backoff ends at once with its last failure.
      try {
        circuit.admit(call.requestId);
      } catch (refused) {
        throw failed(call, request, attempt - 1, lastFailure ?? refused);
      }
      // The key current at this attempt: a retry after a rotation sends the new one.
      const apiKey = call.credentials.apiKey;
      // Every attempt is a call the upstream serves, so retries spend the budget too.
      try {
        call.callBudget.beforeSend?.();
        spendCall(call.callBudget);
        call.callBudget.sent += 1;
        call.callBudget.onSent?.();
        progress.attempts = attempt;
        const response = await sendOnce(call, request, attempt, traceHeaders, apiKey);
        if (observer?.call) {
          observe(() => observer.call?.({ call, request, attempts: attempt, response, error: undefined }));
        }
        circuit.record('answered');
        return response;
      } catch (error) {
        // The old key refused just after a rotation (revoked while this call was on its way):
        // sent once more, at once, with the new one. A refused request changed nothing upstream,
        // and a write carries its Idempotency-Key, so this can only do the write once.
        if (!resentWithNewKey && isRefusedKey(error) && call.credentials.apiKey !== apiKey) {
          resentWithNewKey = true;
          logger.info('upstream key rotated during the call: sending it again with the new key', {
            method: request.method,
            path: request.path,
            attempt,
            requestId: call.requestId,
          });
          continue;
        }
        if (
          attempt >= policy.maxAttempts ||
          !isRetryable(error) ||
          call.retryBudget.remaining <= 0 ||
          // Opened by other calls' failures meanwhile: no retry piles onto a dead upstream.
          circuit.state !== 'closed'
        ) {
          throw failed(call, request, attempt, error);
        }
        lastFailure = error;
        call.retryBudget.remaining -= 1;
        const delayMs = backoffDelayMs(attempt, policy);
        logger.info('retrying upstream call', {
          method: request.method,
          path: request.path,
          attempt,
          delayMs,
          reason: describeFailure(error),
          requestId: call.requestId,
        });
        try {
          await sleep(delayMs, undefined, { signal: call.signal });
        } catch (sleepError) {
          throw ended(call, cancelled(call, sleepError), attempt);
        }
      }
    }
  }

  // Without tracing, the retries' own promise is the call's: no wrapper around it.
  if (tracer === undefined) {
    return (call, request, progress = { attempts: 0 }) => sendWithRetries(call, request, progress, undefined);
  }
  return async (call, request, progress = { attempts: 0 }) => {
    const traced = tracer.startCall(call, request);
    try {
      const response = await sendWithRetries(call, request, progress, traced.headers);
      observe(() => traced.end({ call, request, attempts: progress.attempts, response, error: undefined }));
      return response;
    } catch (error) {
      observe(() => traced.end({ call, request, attempts: progress.attempts, response: undefined, error }));
      throw error;
    }
  };
}

/** A 401: the upstream did not accept the key the attempt was sent with. */
function isRefusedKey(error: unknown): boolean {
  return error instanceof UpstreamProblemError && error.status === 401;
}

/**
 * A call's final failure as its caller meets it. A 401 to a call made with the facade's own key
 * (not a caller's) is no verdict on the caller: every caller of that environment gets it, until an
 * operator installs a key the upstream takes. So it is the facade's outage, `credential_refused`:
 * queries answer a retryable UPSTREAM_UNAVAILABLE instead of telling a caller with a valid token
 * that its credentials are wrong, a held answer may stand in for it (stale-if-error), and a live
 * delivery waits and reads again instead of dropping the event as refused to its subscriber.
 */
function asFacadeOutage(call: UpstreamCall, error: unknown): unknown {
  if (call.credentials.configured !== true || !isRefusedKey(error)) return error;
  return new UpstreamUnavailableError('credential_refused', call.requestId, { cause: error });
}
