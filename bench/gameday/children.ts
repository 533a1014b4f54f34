/**
 * Every process the game day starts, started one way and stopped one way: each leads a process
 * group of its own (so a signal reaches what it started too), its output is read line by line
 * (JSON log lines counted by level and message, the last lines kept for a failure's message), and
 * {@link Children.stopAll} ends every group still running: SIGTERM, then SIGKILL after the grace.
 * bench/gameday.ts calls it on a normal end, on an error and on SIGINT, SIGTERM or SIGHUP; inside its
 * own PID namespace the kernel ends whatever would still be left when it exits.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

/** How many of a process's last lines are kept for messages. */
const KEPT_LINES = 400;

/** A started process and what it wrote. */
export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  /** Wall-clock time it was started. */
  readonly startedAt: number;
  /** Its last lines (stdout and stderr). */
  lines(): readonly string[];
  /** Lines it wrote that are JSON log lines, counted by `level: msg`, since it started. */
  readonly messages: Map<string, number>;
  /** Resolves with the exit code (or the signal's name) once it has exited. */
  readonly exited: Promise<number | string>;
  /** Whether it is still running. */
  running(): boolean;
}

export interface SpawnRequest {
  name: string;
  file: string;
  args: readonly string[];
  options: Omit<SpawnOptions, 'stdio' | 'detached'>;
  /** Called with each line it writes, with the wall-clock time it was read. */
  onLine?: (line: string, at: number) => void;
}

/** The processes of one run. */
export interface Children {
  spawn(request: SpawnRequest): Child;
  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(child: Child, graceMs?: number): Promise<void>;
  /** SIGKILL to the whole group at once (`kill -9`); resolves once the process has exited. */
  kill(child: Child): Promise<void>;
  /** Stops every process still running, all at once. */
  stopAll(graceMs?: number): Promise<void>;
  /** The processes still running. */
  alive(): Child[];
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group has ended.
  }
}

/**
 * What a line counts as: a JSON log line as `level: msg`; another line that speaks of an error or a
 * warning (the gateway's, Redis's) as `text: <its words>`, numbers, ids and times blanked so that
 * lines alike count together; undefined for the rest.
 */
function messageKey(line: string): string | undefined {
  if (line.startsWith('{')) {
    try {
      const entry = JSON.parse(line) as { level?: unknown; msg?: unknown };
      return `${String(entry.level)}: ${String(entry.msg)}`;
    } catch {
      // Not a JSON log line.
    }
  }
  if (!/\b(err(or)?|warn(ing)?|fail(ed|ure)?)\b/i.test(line)) return undefined;
  // Colour codes out, then anything that differs from one line to the next alike.
  const words = line
    .replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), '')
    .replace(/[0-9a-f]{8,}|\d+([.:]\d+)*/gi, '#')
    .slice(0, 160);
  return `text: ${words}`;
}

/** A table of the run's processes. */
export function createChildren(): Children {
  const started = new Set<Child>();
  const stop = async (child: Child, graceMs = 10_000): Promise<void> => {
    if (!child.running()) return;
    signalGroup(child.process, 'SIGTERM');
    const timer = setTimeout(() => {
      signalGroup(child.process, 'SIGKILL');
    }, graceMs);
    await child.exited;
    clearTimeout(timer);
    // What the leader started and left behind in its group.
    signalGroup(child.process, 'SIGKILL');
  };
  return {
    spawn(request) {
      const child = spawn(request.file, request.args, {
        ...request.options,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      const kept: string[] = [];
      const messages = new Map<string, number>();
      const read = (line: string): void => {
        const at = Date.now();
        kept.push(line);
        if (kept.length > KEPT_LINES) kept.splice(0, kept.length - KEPT_LINES);
        const key = messageKey(line);
        if (key !== undefined) messages.set(key, (messages.get(key) ?? 0) + 1);
        request.onLine?.(line, at);
      };
      createInterface({ input: child.stdout }).on('line', read);
      createInterface({ input: child.stderr }).on('line', read);
      const exited = new Promise<number | string>((resolve) => {
        child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
        child.once('error', (error) => {
          kept.push(`spawn error: ${error.message}`);
          resolve('spawn error');
        });
      });
      const entry: Child = {
        name: request.name,
        process: child,
        startedAt: Date.now(),
        lines: () => kept,
        messages,
        exited,
        running: () => child.exitCode === null && child.signalCode === null && child.pid !== undefined,
      };
      started.add(entry);
      void exited.then(() => started.delete(entry));
      return entry;
    },
    stop,
    async kill(child) {
      signalGroup(child.process, 'SIGKILL');
      await child.exited;
    },
    async stopAll(graceMs = 10_000) {
      await Promise.all([...started].map((child) => stop(child, graceMs)));
    },
    alive: () => [...started].filter((child) => child.running()),
  };
}

/**
 * Resolves once `ready()` holds, polling every 100 ms; rejects, naming `what` and the child's last
 * lines, if `child` exits first or `timeoutMs` passes.
 */
export async function waitReady(
  child: Child,
  ready: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 120_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ready()) return;
    const tail = (): string => child.lines().slice(-30).join('\n');
    if (!child.running()) throw new Error(`${what}: ${child.name} exited first\n${tail()}`);
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n${tail()}`);
    await sleep(100);
  }
}

/** Whether `url` answers with `status` within `timeoutMs` (any answer when `status` is undefined). */
export async function answers(url: string, status?: number, timeoutMs = 3_000): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return status === undefined ? true : response.status === status;
  } catch {
    return false;
  }
}

/** Waits for `child`'s exit, at most `timeoutMs`; whether it exited. */
export async function exitedWithin(child: Child, timeoutMs: number): Promise<boolean> {
  return Promise.race([child.exited.then(() => true), sleep(timeoutMs).then(() => false)]);
}
