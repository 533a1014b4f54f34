/**
 * `npm start` as a real process, as a newcomer runs it: the embedded emulator and OpenID provider,
 * JSON log lines on stdout, and the demo operator's token got the way the printed `curl` gets it.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { afterEach } from 'vitest';
import { demoToken, loggedIssuer } from './demo-token.ts';
import { type Processes, useProcesses, waitUntilReady } from './processes.ts';

export interface NpmStart {
  child: ChildProcess;
  /** Every log line so far, parsed. */
  lines: Record<string, unknown>[];
  /** The log lines whose `msg` is `msg`. */
  logged(msg: string): Record<string, unknown>[];
  /** What the process wrote to stderr so far. */
  stderr(): string;
  /** The facade's `/graphql` URL. */
  graphqlUrl: string;
  /** The facade's `/metrics` URL (its own port). */
  metricsUrl: string;
  /** The embedded emulator's base URL. */
  emulatorUrl: string;
  /** A token of the demo operator. */
  token: string;
}

/**
 * The environment a user's shell gives, with `env` over it: the test run's own upstream, issuer and
 * Redis variables removed, NODE_ENV production (vitest's NODE_ENV=test would switch off Apollo
 * Server's own signal handling).
 */
export function userEnvironment(env: Record<string, string>): NodeJS.ProcessEnv {
  const {
    UPSTREAM_BASE_URL: _base,
    UPSTREAM_API_KEY: _key,
    REDIS_URL: _redis,
    AUTH_ISSUER: _issuer,
    AUTH_AUDIENCE: _audience,
    ...inherited
  } = process.env;
  return { ...inherited, NODE_ENV: 'production', ...env };
}

/** Runs `script` (`scripts/start.ts`, `src/main.ts`) through `processes` with `env` as a user would. */
function runAsUser(processes: Processes, script: string, env: Record<string, string>): ChildProcess {
  return processes.spawn(process.execPath, [script], {
    cwd: new URL('../..', import.meta.url),
    env: userEnvironment(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs `script` as {@link runAsUser} does, to its exit; its exit code and what it wrote. */
async function runToExit(
  processes: Processes,
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runAsUser(processes, script, env);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += String(chunk)));
  child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/**
 * Starts `scripts/start.ts` through `processes` with the facade and its OpenID provider on free
 * loopback ports and `env` over production defaults (see {@link userEnvironment}), and resolves
 * once it listens.
 */
async function startNpmStart(
  processes: Processes,
  env: Record<string, string>,
  via: StartedVia = 'node',
): Promise<NpmStart> {
  const startEnv = {
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'debug',
    DEV_ISSUER_PORT: '0',
    METRICS_PORT: '0',
    ...env,
  };
  const child =
    via === 'npm'
      ? processes.spawn('npm', ['start'], {
          cwd: new URL('../..', import.meta.url),
          env: userEnvironment(startEnv),
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : runAsUser(processes, 'scripts/start.ts', startEnv);
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    // npm prints the script it runs before the facade's first line.
    if (via === 'npm' && !line.startsWith('{')) return;
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  // A child process's app cannot be watched through `app.lifecycle` (test/support/harness/
  // lifecycle-watch.ts): its log lines are what tells a test when something happened.
  const logged = (msg: string) => lines.filter((entry) => entry.msg === msg);
  await waitUntilReady(child, () => logged('facade listening').length === 1, 'the facade to listen', {
    output: () => stderr,
  });
  return {
    child,
    lines,
    logged,
    stderr: () => stderr,
    graphqlUrl: logged('facade listening')[0]!.url as string,
    metricsUrl: logged('facade listening')[0]!.metrics as string,
    emulatorUrl: logged('upstream: in-process emulator with demo data')[0]!.upstream as string,
    token: await demoToken(loggedIssuer(lines)),
  };
}

/**
 * How a start is run: `node scripts/start.ts` (what `npm start` runs, without npm), or `npm start`
 * itself, for what only the package's start script gives (its node options, such as `--expose-gc`).
 */
export type StartedVia = 'node' | 'npm';

/**
 * `npm start` processes for the tests of a file: `start` starts one and waits for it to listen (see
 * {@link startNpmStart}), `run` and `runToExit` run a script as a user would, `spawn` anything else;
 * `keep` registers a client to dispose. After each test the clients are disposed, then every process
 * the test started is stopped (test/support/processes.ts).
 */
export function useNpmStart(): Processes & {
  start(env: Record<string, string>, via?: StartedVia): Promise<NpmStart>;
  run(script: string, env: Record<string, string>): ChildProcess;
  runToExit(script: string, env: Record<string, string>): ReturnType<typeof runToExit>;
  keep<C extends { dispose(): Promise<void> }>(client: C): C;
} {
  const processes = useProcesses();
  const clients: { dispose(): Promise<void> }[] = [];
  // Registered after the processes' own: vitest runs afterEach hooks last registered first, so the
  // clients close before the processes they talk to stop.
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.dispose()));
  });
  return {
    spawn: processes.spawn,
    start: (env, via) => startNpmStart(processes, env, via),
    run: (script, env) => runAsUser(processes, script, env),
    runToExit: (script, env) => runToExit(processes, script, env),
    keep(client) {
      clients.push(client);
      return client;
    },
  };
}
