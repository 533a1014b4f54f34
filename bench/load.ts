/**
 * A closed-loop load generator: `concurrency` workers each run `operation` back to back until
 * `total` operations have started or `durationMs` has passed, whichever comes first. Always
 * bounded, so a run always ends.
 */

/** What one load run measured. */
export interface LoadResult {
  operations: number;
  failures: number;
  durationMs: number;
  operationsPerSecond: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
}

/**
 * Runs `operation` up to `total` times (and for at most `durationMs`, when given) with `concurrency`
 * in flight; an operation that throws counts as a failure.
 */
export async function runLoad(options: {
  total: number;
  durationMs?: number;
  concurrency: number;
  operation: () => Promise<void>;
}): Promise<LoadResult> {
  const latencies: number[] = [];
  let started = 0;
  let failures = 0;
  const deadline = performance.now() + (options.durationMs ?? Number.POSITIVE_INFINITY);

  const worker = async (): Promise<void> => {
    while (started < options.total && performance.now() < deadline) {
      started += 1;
      const begin = performance.now();
      try {
        await options.operation();
      } catch {
        failures += 1;
      }
      latencies.push(performance.now() - begin);
    }
  };

  const begin = performance.now();
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const durationMs = performance.now() - begin;
  latencies.sort((a, b) => a - b);
  return {
    operations: latencies.length,
    failures,
    durationMs,
    operationsPerSecond: (latencies.length / durationMs) * 1000,
    p50Ms: percentile(latencies, 0.5),
    p95Ms: percentile(latencies, 0.95),
    p99Ms: percentile(latencies, 0.99),
  };
}

/** The value at `fraction` (0 to 1) of `sorted`, ascending; NaN when it is empty. */
export function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}
