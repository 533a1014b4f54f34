/**
 * Starts the emulator and the facade as child processes, so each has its own event loop and its own
 * memory, as in production. The benchmark process only generates load and reads results.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../scripts/redis-server.ts';

/** A child process serving HTTP on a loopback port. */
export interface ServiceProcess {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
  /** The child process itself (its IPC channel, when started with `ipc`). */
  readonly child: ChildProcess;
  /** Resident set size in bytes, read from /proc. */
  rssBytes(): Promise<number>;
  /** CPU time (user + system) the process has used so far, in milliseconds, read from /proc. */
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
}

/** A loopback port that was free a moment ago, never one handed out before in this process. */
export { findFreePort };

/**
 * Spawns `node <script>` with `env`, then polls `readyPath` until it answers 200.
 * Output is kept and shown only if the process fails to become ready.
 */
export async function startService(options: {
  name: string;
  script: string;
  port: number;
  env: Record<string, string>;
  readyPath: string;
  /** Node options before the script (e.g. `--expose-gc`, `--import <preload>`). */
  nodeArgs?: readonly string[];
  /** Opens an IPC channel to the child (`child.send`, `child.on('message')`). */
  ipc?: boolean;
}): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), options.script], {
    env: { ...process.env, ...options.env },
    stdio: options.ipc === true ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));

  const url = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    try {
      const response = await fetch(`${url}${options.readyPath}`);
      await response.arrayBuffer();
      if (response.ok) return serviceProcess(options.name, url, child, () => output);
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`${options.name} did not become ready at ${url}${options.readyPath}:\n${output}`);
}

/** Clock ticks per second, the unit of CPU times in /proc/<pid>/stat. */
let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * The facade (`src/main.ts`) as a process of its own over the emulator at `emulatorUrl`, on free
 * ports (its metrics too), as production runs it without rate limits: `env` adds to or overrides
 * that (its keys, its callers, `LOG_LEVEL`, which is `warn` unless given).
 */
export async function startFacadeService(
  name: string,
  emulatorUrl: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const port = await findFreePort();
  return startService({
    name,
    script: fileURLToPath(new URL('../src/main.ts', import.meta.url)),
    port,
    env: {
      PORT: String(port),
      METRICS_PORT: String(await findFreePort()),
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: emulatorUrl,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_ENABLED: 'false',
      ...env,
    },
    readyPath: '/readyz',
  });
}

/** Starts the emulator (`emulator/main.ts`, demo data) on a free port; every benchmark's upstream. */
export async function startEmulatorService(): Promise<ServiceProcess> {
  const port = await findFreePort();
  return startService({
    name: 'emulator',
    script: fileURLToPath(new URL('../emulator/main.ts', import.meta.url)),
    port,
    env: { EMULATOR_PORT: String(port), EMULATOR_DATA: 'demo' },
    readyPath: '/_emulator/requests',
  });
}

/** Resident set size of process `pid` in bytes (`VmRSS` of /proc/<pid>/status). */
export async function readRssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

/** CPU time (user + system) process `pid` has used so far, in milliseconds (/proc/<pid>/stat). */
export async function readCpuMs(pid: number): Promise<number> {
  const { userMs, systemMs } = await readCpuSplitMs(pid);
  return userMs + systemMs;
}

/**
 * CPU time process `pid` has used so far in its own code (user) and in the kernel on its behalf
 * (system: its system calls, a socket write's TCP work among them), in milliseconds.
 */
export async function readCpuSplitMs(pid: number): Promise<{ userMs: number; systemMs: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ms = (ticks: string | undefined): number => (Number(ticks) / ticksPerSecond()) * 1000;
  return { userMs: ms(fields[11]), systemMs: ms(fields[12]) };
}

function serviceProcess(
  name: string,
  url: string,
  child: ChildProcess,
  lastOutput: () => string,
): ServiceProcess {
  const pid = child.pid ?? 0;
  let stopping = false;
  // A service that ends before the benchmark stops it would otherwise leave only figures that stop
  // making sense: say so, with what it last wrote.
  child.once('exit', (code, signal) => {
    if (stopping) return;
    console.error(
      `${name} (pid ${pid}) exited during the run (${signal ?? `code ${String(code)}`}); its last output:\n${lastOutput()}`,
    );
  });
  return {
    name,
    url,
    pid,
    child,
    rssBytes: () => readRssBytes(pid),
    cpuMs: () => readCpuMs(pid),
    async stop() {
      stopping = true;
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
