/**
 * Budgets for waiting on processes, stretched by the machine's load: on 2 cores under a load of 15
 * to 20 (a shared runner), `npm start` took 10 to 18 s to listen where it takes about 2 s quietly.
 * A fixed budget is either too short there or needlessly long everywhere else; a budget measured
 * against the load when the wait starts is neither. Only waits on processes are stretched: an
 * in-process test's time is its own code's.
 */
import { availableParallelism, loadavg } from 'node:os';

/**
 * The most the load stretches a budget: beyond it a wait is not slow but stuck. It bounds the
 * process tests' own timeout too (vitest.config.ts), so a start that never comes fails with its own
 * message before the test times out.
 */
export const MOST_SLOWDOWN = 8;

/** What a test that starts processes may take on a quiet machine, its starts and stops included. */
const QUIET_PROCESS_TEST_MS = 30_000;

/**
 * The timeout of a test, or hook, that starts processes: the quiet budget at the most slowdown.
 * Fixed, where the waits inside are measured, because the load when vitest reads its configuration
 * says nothing of the load minutes later when the test runs.
 */
export const PROCESS_TEST_TIMEOUT_MS = QUIET_PROCESS_TEST_MS * MOST_SLOWDOWN;

/**
 * How much slower than a quiet machine this one runs now: the one-minute load average per core,
 * from 1 to {@link MOST_SLOWDOWN}.
 */
export function machineSlowdown(): number {
  return Math.min(MOST_SLOWDOWN, Math.max(1, loadavg()[0]! / availableParallelism()));
}

/** `quietMs`, a budget that suffices on a quiet machine, stretched by {@link machineSlowdown}. */
export function loadScaledMs(quietMs: number): number {
  return Math.round(quietMs * machineSlowdown());
}

/** The load, for a message that says why a stretched budget ran out. */
export function describeLoad(): string {
  return `load ${loadavg()[0]!.toFixed(1)} on ${String(availableParallelism())} cores`;
}
