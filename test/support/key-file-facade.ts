/**
 * `node src/main.ts` as a real process reading its upstream key from a file (`UPSTREAM_API_KEY_FILE`,
 * a Kubernetes-style mounted secret), for the tests that signal it (SIGHUP) and read every line it
 * writes, to see which key it keeps and that no key is ever printed.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { waitFor } from './harness/wait.ts';
import type { Processes } from './processes.ts';

export interface KeyFileFacade {
  child: ChildProcess;
  /** The log lines so far whose `msg` starts with `prefix`. */
  logged(prefix: string): Record<string, unknown>[];
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Asks `{ customer(id: "cus_acme") { id } }` with no token (`AUTH_MODE=none`). */
  customer(): Promise<{ status: number; body: Record<string, unknown> }>;
}

/** Starts the facade over `emulatorUrl` with its key in `keyFile`; resolves once it listens. */
export async function startKeyFileFacade(
  processes: Processes,
  emulatorUrl: string,
  keyFile: string,
): Promise<KeyFileFacade> {
  const { UPSTREAM_API_KEY: _key, ...inherited } = process.env;
  const child = processes.spawn(process.execPath, ['src/main.ts'], {
    cwd: new URL('../..', import.meta.url),
    env: {
      ...inherited,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      AUTH_MODE: 'none',
      UPSTREAM_BASE_URL: emulatorUrl,
      UPSTREAM_API_KEY_FILE: keyFile,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let output = '';
  child.stderr!.on('data', (chunk) => (output += String(chunk)));
  child.stdout!.on('data', (chunk) => (output += String(chunk)));
  createInterface({ input: child.stdout! }).on('line', (line) =>
    lines.push(JSON.parse(line) as Record<string, unknown>),
  );
  const logged = (prefix: string) =>
    lines.filter((line) => typeof line['msg'] === 'string' && line['msg'].startsWith(prefix));
  await waitFor(() => logged('facade listening').length === 1, 'the facade to listen', 30_000);
  const graphqlUrl = logged('facade listening')[0]!['url'] as string;
  return {
    child,
    logged,
    output: () => output,
    async customer() {
      const response = await fetch(graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ customer(id: "cus_acme") { id } }' }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
  };
}
