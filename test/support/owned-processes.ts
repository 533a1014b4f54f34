/**
 * Finding and ending the processes a test run started, by the mark each carries in its environment.
 * A process inherits its parent's environment, so the mark follows everything a started process
 * starts in turn (npm's node, a shell's servers, a daemon that left its process group), and a pid
 * reused by another program after ours ended (this machine's pid_max can be 32768) carries no mark.
 * Linux only: it reads /proc.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** The environment variable that marks a process as started by this test run. */
export const PROCESS_OWNER_VARIABLE = 'TEST_RUN_PROCESS_OWNER';

/** How long ended processes get between SIGTERM and SIGKILL. */
export const STOP_GRACE_MS = 5_000;

/** Whether a mark read from a process's environment is `mark` or one of its children's (`mark:n`). */
function carries(value: string, mark: string): boolean {
  return value === mark || value.startsWith(`${mark}:`);
}

/** A running process and the command it runs, for messages. */
export interface OwnedProcess {
  pid: number;
  command: string;
}

/** The processes alive now whose mark is `mark` or derived from it; never this process. */
export function ownedProcesses(mark: string): OwnedProcess[] {
  const prefix = `${PROCESS_OWNER_VARIABLE}=`;
  const found: OwnedProcess[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const variable = readFileSync(`/proc/${name}/environ`, 'utf8')
        .split('\0')
        .find((entry) => entry.startsWith(prefix));
      if (variable === undefined || !carries(variable.slice(prefix.length), mark)) continue;
      // A zombie has ended already; it only waits for its parent to read its status.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const command = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
      found.push({ pid, command });
    } catch {
      // It ended while being read, or is not ours to read.
    }
  }
  return found;
}

/** Sends `signal` to every process carrying `mark`; how many were signalled. */
export function signalOwned(mark: string, signal: NodeJS.Signals): number {
  let signalled = 0;
  for (const { pid } of ownedProcesses(mark)) {
    try {
      process.kill(pid, signal);
      signalled += 1;
    } catch {
      // Ended meanwhile.
    }
  }
  return signalled;
}

/**
 * Ends every process carrying `mark`: SIGTERM, then SIGKILL to what is left after `graceMs`.
 * Resolves with the processes that were running at the start, once none is left.
 */
export async function endOwnedProcesses(mark: string, graceMs = STOP_GRACE_MS): Promise<OwnedProcess[]> {
  const found = ownedProcesses(mark);
  if (found.length === 0) return found;
  signalOwned(mark, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (ownedProcesses(mark).length > 0 && Date.now() < deadline) await sleep(100);
  while (signalOwned(mark, 'SIGKILL') > 0) await sleep(100);
  return found;
}
