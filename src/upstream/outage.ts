/**
 * What an upstream outage means for one operation: which failures are the upstream's (and let a
 * held answer be served past its freshness), what the operation met of them, and how a live
 * delivery waits for the upstream's return before it reads again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { DegradedReads, UpstreamCircuit } from './call.ts';

export type { DegradedReads } from './call.ts';
import { UpstreamCancelledError, UpstreamProblemError, UpstreamUnavailableError } from './errors.ts';

/** An empty record: nothing met. */
export function createDegradedReads(): DegradedReads {
  return { staleAgeSeconds: undefined, failed: false };
}

/** Whether `degraded` records anything: an answer served stale or a call failed for the upstream. */
export function isDegraded(degraded: DegradedReads | undefined): boolean {
  return degraded !== undefined && (degraded.failed || degraded.staleAgeSeconds !== undefined);
}

/** Records that a read was served `ageSeconds` past its reading (the oldest one is kept). */
export function recordStaleRead(degraded: DegradedReads | undefined, ageSeconds: number): void {
  if (degraded === undefined) return;
  degraded.staleAgeSeconds = Math.max(degraded.staleAgeSeconds ?? 0, ageSeconds);
}

/**
 * Whether a call failed for the upstream rather than for its caller: no answer (refused, reset,
 * timed out, unreadable, or an open circuit), a 5xx, or the operation's deadline while the upstream
 * did not answer. A held answer may stand in for such a failure; never for a refusal (4xx), which
 * is the upstream's answer, or for a shutdown, whose caller retries on another replica.
 */
export function isUpstreamOutage(error: unknown): boolean {
  if (error instanceof UpstreamUnavailableError) return true;
  if (error instanceof UpstreamProblemError) return error.status >= 500;
  return error instanceof UpstreamCancelledError && error.reason === 'deadline';
}

/** The first wait before a live delivery reads again after an outage; doubling up to the most. */
const RETRY_FIRST_MS = 250;
const RETRY_MOST_MS = 5_000;

/**
 * Waits before a live delivery reads again after its read met an outage (its `retry`-th time,
 * from 1): while the circuit is open, until it closes (the probe was answered: nothing is read
 * before the upstream is back); else a backoff, doubling up to 5 s (a failure that did not open
 * the circuit). Resolves early, without throwing, when `signal` aborts.
 */
export async function waitForUpstream(
  circuit: UpstreamCircuit | undefined,
  retry: number,
  signal: AbortSignal,
): Promise<void> {
  if (circuit !== undefined && circuit.state !== 'closed') {
    await circuit.whenClosed(signal);
    return;
  }
  const delayMs = Math.min(RETRY_MOST_MS, RETRY_FIRST_MS * 2 ** (retry - 1));
  await sleep(delayMs, undefined, { signal, ref: false }).catch(() => undefined);
}
