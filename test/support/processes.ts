/**
 * The processes a test starts (`npm start`, a facade, a subgraph, a shell session), started and
 * stopped one way so that none outlives its test, and waited on with a budget that grows with the
 * machine's load instead of a fixed one.
 *
 * - Each leads a process group of its own (`detached`), and stopping it signals the whole group
 *   (`npm start`'s node, a shell's children), not only the pid the test holds; then every process
 *   still carrying its mark (owned-processes.ts), which reaches what left the group. SIGTERM first,
 *   SIGKILL to what is left after the grace.
 * - `useProcesses()` stops what a test started after that test, passed, failed or timed out, and what
 *   a `beforeAll` started after the file. A worker told to stop (SIGTERM, SIGINT, SIGHUP), or exiting,
 *   kills every group it still holds first: a detached group no longer gets the terminal's ^C.
 * - Loaded as a setup file, this module puts the run's mark in the worker's environment, so even a
 *   process started without it carries the mark, and the run's teardown (process-global-setup.ts)
 *   ends whatever still carries it.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeEach, inject } from 'vitest';
import { describeLoad, loadScaledMs } from './load-budget.ts';
import {
  endOwnedProcesses,
  ownedProcesses,
  PROCESS_OWNER_VARIABLE,
  STOP_GRACE_MS,
} from './owned-processes.ts';

/** Where a worker keeps its {@link WorkerProcesses}. */
const WORKER = Symbol.for('test-support.processes');

/**
 * This worker's started processes, by the mark each carries, until stopped: one table per worker
 * process, however many times a worker evaluates this module, so its exit handlers see them all.
 */
const worker = ((globalThis as { [WORKER]?: WorkerProcesses })[WORKER] ??= installWorkerHandlers());
const running = worker.running;

/** The run's mark, from the global setup (or, where none ran, this worker's own). */
function runMark(): string {
  return (process.env[PROCESS_OWNER_VARIABLE] ??= inject('processOwner') ?? `worker-${process.pid}`);
}

/**
 * Starts `command` leading a process group of its own, its environment (`options.env`, default this
 * process's) carrying a mark of its own. Stop it with {@link stopProcess}.
 */
export function spawnProcess(
  command: string,
  args: readonly string[],
  options: SpawnOptions = {},
): ChildProcess {
  worker.started += 1;
  const mark = `${runMark()}:${String(process.pid)}.${String(worker.started)}`;
  const child = spawn(command, args, {
    ...options,
    env: { ...(options.env ?? process.env), [PROCESS_OWNER_VARIABLE]: mark },
    detached: true,
  });
  running.set(child, mark);
  return child;
}

/** Whether `child` has not been reaped yet: then its pid, and so its process group's id, is still its own. */
function unreaped(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (!unreaped(child)) return;
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // The group has ended.
  }
}

/**
 * Stops `child` and everything it started: SIGTERM to its process group, then to every process still
 * carrying its mark, SIGKILL to what is left after `graceMs`. Resolves once none is left and the
 * child's exit has been seen (its output and exit code are then final).
 */
export async function stopProcess(child: ChildProcess, graceMs = STOP_GRACE_MS): Promise<void> {
  const mark = running.get(child);
  if (mark === undefined) return;
  const exited = unreaped(child) ? new Promise((resolve) => child.once('exit', resolve)) : Promise.resolve();
  signalGroup(child, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (unreaped(child) && Date.now() < deadline) await sleep(25);
  signalGroup(child, 'SIGKILL');
  await endOwnedProcesses(mark, Math.max(0, deadline - Date.now()));
  await exited;
  running.delete(child);
}

/**
 * Resolves once `ready()` holds, polling; rejects, saying what was awaited (and what `output()`
 * gives, when given), if `child` exits first or the budget, {@link loadScaledMs} of `quietMs`, runs out.
 */
export async function waitUntilReady(
  child: ChildProcess,
  ready: () => boolean | Promise<boolean>,
  what: string,
  { quietMs = 20_000, output }: { quietMs?: number; output?: () => string } = {},
): Promise<void> {
  const budgetMs = loadScaledMs(quietMs);
  const deadline = Date.now() + budgetMs;
  const shown = (): string => (output === undefined ? '' : `\n${output()}`);
  for (;;) {
    if (await ready()) return;
    if (!unreaped(child))
      throw new Error(
        `${what}: the process exited (${String(child.exitCode ?? child.signalCode)}) first${shown()}`,
      );
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${String(budgetMs)} ms (${describeLoad()})${shown()}`);
    await sleep(20);
  }
}

/** What {@link useProcesses} gives: the processes of a file's tests. */
export type Processes = ReturnType<typeof useProcesses>;

/**
 * Processes for the tests of a file: `spawn` starts one (see {@link spawnProcess}). What a test
 * started is stopped after that test, however it ended; what a `beforeAll` started, after the file.
 */
export function useProcesses(): {
  spawn(command: string, args: readonly string[], options?: SpawnOptions): ChildProcess;
} {
  const ofTest: ChildProcess[] = [];
  const ofFile: ChildProcess[] = [];
  let inTest = false;
  beforeEach(() => {
    inTest = true;
  });
  afterEach(async () => {
    inTest = false;
    await Promise.all(ofTest.splice(0).map((child) => stopProcess(child)));
  });
  afterAll(async () => {
    await Promise.all(ofFile.splice(0).map((child) => stopProcess(child)));
  });
  return {
    spawn(command, args, options) {
      const child = spawnProcess(command, args, options);
      (inTest ? ofTest : ofFile).push(child);
      return child;
    },
  };
}

interface WorkerProcesses {
  running: Map<ChildProcess, string>;
  started: number;
}

/**
 * The worker's table, with handlers that SIGKILL everything in it when the worker exits or is
 * signalled: the worker is ending and cannot wait.
 */
function installWorkerHandlers(): WorkerProcesses {
  const table: WorkerProcesses = { running: new Map(), started: 0 };
  const killEverything = (): void => {
    for (const [child, mark] of table.running) {
      signalGroup(child, 'SIGKILL');
      for (const { pid } of ownedProcesses(mark)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Ended meanwhile.
        }
      }
    }
    table.running.clear();
  };
  process.once('exit', killEverything);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killEverything();
      // Then end as the signal ends a process that has no listener for it.
      process.kill(process.pid, signal);
    });
  }
  return table;
}

runMark();
