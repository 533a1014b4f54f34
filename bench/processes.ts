/**
 * Starts the emulator and the facade as child processes, so each has its own event loop and its own
 * memory, as in production. The benchmark process only generates load and reads results.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** A child process serving HTTP on a loopback port. */
export interface ServiceProcess {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
  /** Resident set size in bytes, read from /proc. */
  rssBytes(): Promise<number>;
  stop(): Promise<void>;
}

/** A loopback port that was free a moment ago. */
export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

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
}): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [options.script], {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
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
      if (response.ok) return serviceProcess(options.name, url, child);
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`${options.name} did not become ready at ${url}${options.readyPath}:\n${output}`);
}

function serviceProcess(name: string, url: string, child: ChildProcess): ServiceProcess {
  const pid = child.pid ?? 0;
  return {
    name,
    url,
    pid,
    async rssBytes() {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
      return match ? Number(match[1]) * 1024 : Number.NaN;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
