/**
 * Why an operation's upstream calls may be cut short: its total time ran out, or the process is
 * shutting down. The operation's `AbortSignal` carries one of these; the client cancels what is in
 * flight and sends nothing more, so a late caller gets an answer instead of waiting on the upstream.
 */

/** `deadline`: the operation's time budget ran out; `shutdown`: the process is stopping. */
export type CancelReason = 'deadline' | 'shutdown';

/** The reason an operation signal is aborted with (other than the deadline's own TimeoutError). */
export class OperationCancellation extends Error {
  readonly reason: CancelReason;

  constructor(reason: CancelReason) {
    super(reason === 'deadline' ? 'The operation ran out of time.' : 'The process is shutting down.');
    this.name = 'OperationCancellation';
    this.reason = reason;
  }
}

/**
 * The signal of one operation: aborted when `timeoutMs` have passed (a `TimeoutError`, read as
 * `deadline`) or when `shutdown` is aborted, whichever comes first.
 */
function createOperationSignal(timeoutMs: number, shutdown?: AbortSignal): AbortSignal {
  const deadline = AbortSignal.timeout(timeoutMs);
  return shutdown ? AbortSignal.any([deadline, shutdown]) : deadline;
}

/**
 * The same signal, made when an upstream call first asks for it: an operation that calls nothing
 * (`{ __typename }`, an answer from loaders primed by a list) pays for no timer and no listener on
 * `shutdown`. The deadline still runs from now: asked for later, the signal has what is left of
 * `timeoutMs`, and is already aborted when nothing is.
 */
export function deferredOperationSignal(timeoutMs: number, shutdown?: AbortSignal): () => AbortSignal {
  const startedAt = performance.now();
  let signal: AbortSignal | undefined;
  return () => {
    if (signal !== undefined) return signal;
    const left = Math.ceil(timeoutMs - (performance.now() - startedAt));
    if (left > 0) {
      signal = createOperationSignal(left, shutdown);
    } else {
      const expired = AbortSignal.abort(new DOMException('The operation timed out.', 'TimeoutError'));
      signal = shutdown ? AbortSignal.any([expired, shutdown]) : expired;
    }
    return signal;
  };
}

/** Why `signal` was aborted. */
export function cancelReasonOf(signal: AbortSignal): CancelReason {
  const reason: unknown = signal.reason;
  if (reason instanceof OperationCancellation) return reason.reason;
  return 'deadline';
}
