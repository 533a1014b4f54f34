/**
 * The scripted twin of compose.yaml, for machines without Docker: reads compose.yaml and starts
 * the same processes (each service's own `command`) with the same environment, on loopback ports
 * instead of container ports.
 *
 * What differs from `docker compose up`, and why:
 * - addresses: `<service>:<port>` becomes `127.0.0.1:<free port>`; `platform` (both replicas'
 *   network alias, round-robin in compose) is facade-a, so the gateway's traffic goes to one replica;
 * - files a service mounts (`./<file>:<path>`) and its secrets (`/run/secrets/<name>`) are read
 *   where they are (a secret copied into the twin's own directory, so it can be rewritten there);
 * - the event log's Redis: the same start script (deploy/kubernetes/redis-ha.sh) with Debian's
 *   `redis-server` instead of the redis image, each member's data in a directory of the twin's own
 *   (`REDIS_DATA_DIR`) and listening on loopback (`REDIS_BIND`);
 * - the gateway: the `hive-gateway` CLI of `@graphql-hive/gateway` (what the official image runs)
 *   with the mounted deploy/gateway.config.ts, serving HTTP, SSE and graphql-ws as the image does.
 *
 * As a command: `npm run compose-twin` runs the topology until Ctrl-C and prints its addresses. As
 * a module, tests start it with {@link startComposeTwin}; any service but the one-shot supergraph can
 * be stopped and started again (bench/rolling-restart.ts restarts the replicas one at a time behind a
 * balancer of its own, given as `platformPort`).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewayConfigSupergraph, GatewayPlugin } from '@graphql-hive/gateway-runtime';
import { useJWT } from '@graphql-mesh/plugin-jwt-auth';
import { parse } from 'yaml';
import { createGatewayConfig, type EdgeOptions } from '../deploy/gateway.config.ts';
import { findFreePort } from './redis-server.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** A service of compose.yaml, as far as the twin reads it. */
export interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  secrets?: string[];
}

/** A service as YAML gives it: an unquoted value (`PORT: 4000`) is a number or a boolean. */
interface ParsedComposeService extends Omit<ComposeService, 'command' | 'environment'> {
  command?: unknown[];
  environment?: Record<string, unknown>;
}

/**
 * Reads and parses compose.yaml (YAML merge keys resolved), with command parts and environment
 * values as the text a process gets.
 */
export function readComposeFile(path = join(ROOT, 'compose.yaml')): {
  services: Record<string, ComposeService>;
  /** The file each secret is read from, relative to compose.yaml. */
  secrets: Record<string, string>;
} {
  const parsed = parse(readFileSync(path, 'utf8'), { merge: true }) as {
    services: Record<string, ParsedComposeService>;
    secrets?: Record<string, { file: string }>;
  };
  const services: Record<string, ComposeService> = {};
  for (const [name, { command, environment, ...service }] of Object.entries(parsed.services)) {
    services[name] = {
      ...service,
      ...(command === undefined ? {} : { command: command.map(String) }),
      ...(environment === undefined
        ? {}
        : {
            environment: Object.fromEntries(
              Object.entries(environment).map(([key, value]) => [key, String(value)]),
            ),
          }),
    };
  }
  const secrets = Object.fromEntries(
    Object.entries(parsed.secrets ?? {}).map(([name, { file }]) => [name, file]),
  );
  return { services, secrets };
}

/** The event log's Redis, started first: the data servers, then the Sentinels (as compose orders them). */
export const REDIS_SERVICES = ['redis-1', 'redis-2', 'sentinel-1', 'sentinel-2', 'sentinel-3'] as const;
/** Services the twin runs as processes after Redis, in start order (the gateway last). */
export const PROCESS_SERVICES = [
  'emulator',
  'dev-issuer',
  'facade-a',
  'facade-b',
  'support-notes',
  'supergraph',
  'gateway',
] as const;
/** Every service compose.yaml must have for the twin to mirror it. */
export const TWIN_SERVICES = [...REDIS_SERVICES, ...PROCESS_SERVICES] as const;

/** Variables the twin adds to a Redis member's environment: where its data goes, where it listens. */
export const TWIN_REDIS_VARIABLES = ['REDIS_DATA_DIR', 'REDIS_BIND'] as const;

/** The network alias both replicas answer to in compose; the twin sends it to facade-a. */
const PLATFORM_ALIAS = 'platform';
/** Variables naming the port a service listens on. */
const PORT_VARIABLES = ['PORT', 'EMULATOR_PORT', 'DEV_ISSUER_PORT', 'METRICS_PORT'];
/** Variables naming the interface a service listens on. */
const HOST_VARIABLES = ['HOST', 'EMULATOR_HOST', 'DEV_ISSUER_HOST'];
/** The Hive Gateway CLI's entry point, as `npx hive-gateway` runs it (the official image's command). */
const HIVE_GATEWAY_BIN = join(ROOT, 'node_modules/@graphql-hive/gateway/dist/bin.js');

export interface TwinOptions {
  /** Called with every line a process writes. Default: nothing. */
  onLine?: (service: string, line: string) => void;
  /**
   * Starts a service's process, in a process group of its own (`close()` signals the group). Default:
   * node's `spawn`; a test passes one that also stops what it started when the test ends.
   */
  spawn?: (
    command: string,
    args: readonly string[],
    options: SpawnOptions & { detached: true },
  ) => ChildProcess;
  /** How long each service may take to answer once started. Default 30 s. */
  readyWithinMs?: number;
  /**
   * Where the alias `platform` (both replicas in compose) goes: a port on loopback that balances
   * between the replicas itself, as compose's DNS or a Kubernetes Service does. Default facade-a's.
   */
  platformPort?: number;
  /**
   * Added to both replicas' environment, over compose.yaml's (a benchmark's own settings); called
   * once the emulator answers, with its URL, so it can prepare the upstream first.
   */
  replicaEnvironment?: (emulatorUrl: string) => Promise<Record<string, string>>;
}

export interface ComposeTwin {
  /**
   * Base URL (no path) of each service by compose name, and of the facades' metrics servers; a
   * Redis member's is `redis://127.0.0.1:<port>`.
   */
  urls: Record<string, string>;
  /** Where each compose secret is, by name: the twin's own copy, which may be rewritten. */
  secrets: Record<string, string>;
  /** `${urls.gateway}/graphql` */
  gatewayUrl: string;
  /** The environment each process was started with, by service (PATH and HOME aside). */
  environments: Record<string, Record<string, string>>;
  /** What each process wrote so far, line by line. */
  lines(service: string): string[];
  /**
   * SIGTERM to a running service's process group; resolves with its exit code once it has exited
   * (SIGKILL after `graceMs`, as a container runtime does after the grace period; `graceMs` 0: SIGKILL
   * at once, as `kill -9`).
   */
  stop(service: RestartableService, graceMs?: number): Promise<number | null>;
  /** Starts a stopped service again, same command, environment and ports; resolves once it answers. */
  start(service: RestartableService): Promise<void>;
  close(): Promise<void>;
}

/** The services the twin can stop and start again (all but the one-shot supergraph composition). */
export type RestartableService = Exclude<(typeof TWIN_SERVICES)[number], 'supergraph'>;

/** The facade replicas, which {@link ComposeTwin.stop} and {@link ComposeTwin.start} restart. */
export const REPLICAS = ['facade-a', 'facade-b'] as const;

/** Starts the topology. Always `close()` it. */
export async function startComposeTwin(options: TwinOptions): Promise<ComposeTwin> {
  const compose = readComposeFile();
  for (const name of TWIN_SERVICES) {
    if (compose.services[name] === undefined) throw new Error(`compose.yaml has no service "${name}"`);
  }
  const workDir = mkdtempSync(join(tmpdir(), 'compose-twin-'));
  const processes = createTwinProcesses(compose, workDir, options);
  try {
    const plan = await planTwin(compose, workDir, options);
    const { environments, urls, secrets } = plan;
    const { run, ready, output } = processes.bind(plan);
    // 1. The event log's Redis: the data servers, then the Sentinels, each once it answers.
    for (const service of REDIS_SERVICES) {
      run(service);
      await ready(service);
    }
    // 2. The emulator and the issuer, then the replicas and the example subgraph, then the supergraph.
    run('emulator');
    run('dev-issuer');
    await ready('emulator');
    await ready('dev-issuer');
    if (options.replicaEnvironment !== undefined) {
      const extra = await options.replicaEnvironment(urls.emulator!);
      for (const service of REPLICAS) Object.assign(environments[service]!, extra);
    }
    for (const service of REPLICAS) run(service);
    run('support-notes');
    for (const service of REPLICAS) await ready(service);
    await ready('support-notes');
    const composer = run('supergraph');
    const [code] = (await once(composer, 'exit')) as [number | null];
    if (code !== 0)
      throw new Error(`the supergraph service failed (${String(code)}):\n${output.supergraph!.join('\n')}`);
    // 3. The gateway (the Hive Gateway CLI) over the file the supergraph service wrote.
    run('gateway');
    await ready('gateway');

    return {
      urls,
      secrets,
      gatewayUrl: `${urls.gateway!}/graphql`,
      environments,
      lines: (service) => output[service] ?? [],
      stop: async (service, graceMs = 30_000) => processes.stop(service, graceMs),
      start: async (service) => {
        if (processes.isRunning(service)) throw new Error(`${service} is running already`);
        const from = output[service]?.length ?? 0;
        run(service);
        await ready(service, from);
      },
      close: () => processes.close(),
    };
  } catch (error) {
    const shown = Object.entries(processes.output)
      .map(([service, lines]) => `--- ${service}\n${lines.slice(-20).join('\n')}`)
      .join('\n');
    await processes.close();
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${shown}`, { cause: error });
  }
}

/** What each process is started with: its environment, and the addresses every service answers at. */
interface TwinPlan {
  environments: Record<string, Record<string, string>>;
  urls: Record<string, string>;
  secrets: Record<string, string>;
  /** A value of compose.yaml (a variable, a command's part) with the twin's addresses and files. */
  rewrite: (value: string) => string;
}

/**
 * A loopback port for every `<service>:<port>` compose.yaml names (a service's `PORT`-like variable,
 * a Redis member's `REDIS_ANNOUNCE`), each service's environment with those addresses, its mounted
 * files and secrets rewritten, and the URL each service answers at.
 */
async function planTwin(
  compose: ReturnType<typeof readComposeFile>,
  workDir: string,
  options: TwinOptions,
): Promise<TwinPlan> {
  const addresses = new Map<string, number>();
  const metricsPorts = new Map<string, number>();
  for (const service of TWIN_SERVICES) {
    const environment = compose.services[service]!.environment ?? {};
    const port =
      environment.PORT ??
      environment.EMULATOR_PORT ??
      environment.DEV_ISSUER_PORT ??
      environment.REDIS_ANNOUNCE?.split(':')[1];
    if (port !== undefined) addresses.set(`${service}:${port}`, await findFreePort());
    if (environment.METRICS_PORT !== undefined) metricsPorts.set(service, await findFreePort());
  }
  const facadeAPortText = compose.services['facade-a']!.environment?.PORT;
  if (facadeAPortText === undefined) throw new Error('compose.yaml gives service "facade-a" no PORT');
  const platformPort = options.platformPort ?? addresses.get(`facade-a:${facadeAPortText}`)!;
  const secrets: Record<string, string> = {};
  mkdirSync(join(workDir, 'secrets'));
  for (const [name, file] of Object.entries(compose.secrets)) {
    secrets[name] = join(workDir, 'secrets', name);
    copyFileSync(resolve(ROOT, file), secrets[name]);
  }
  const rewrite = (value: string): string => {
    let result = value.replace(new RegExp(`//${PLATFORM_ALIAS}:\\d+`, 'g'), `//127.0.0.1:${platformPort}`);
    // An address in a URL (`//facade-a:4000`) or in a list of them (`sentinel-1:26379,...`).
    for (const [address, port] of addresses)
      result = result.replace(new RegExp(`(^|//|,)${address}(?=$|[/,])`, 'g'), `$1127.0.0.1:${port}`);
    for (const [name, path] of Object.entries(secrets))
      result = result.replaceAll(`/run/secrets/${name}`, path);
    return result.replaceAll('/supergraph/', `${workDir}/`);
  };

  const environments: Record<string, Record<string, string>> = {};
  const urls: Record<string, string> = {};
  for (const service of TWIN_SERVICES) {
    const declared = compose.services[service]!.environment ?? {};
    const environment: Record<string, string> = {};
    for (const [name, value] of Object.entries(declared)) {
      if (HOST_VARIABLES.includes(name)) environment[name] = '127.0.0.1';
      else if (name === 'METRICS_PORT') environment[name] = String(metricsPorts.get(service));
      else if (PORT_VARIABLES.includes(name))
        environment[name] = String(addresses.get(`${service}:${value}`));
      else environment[name] = rewrite(value);
    }
    if (declared.REDIS_ANNOUNCE !== undefined) {
      environment.REDIS_DATA_DIR = join(workDir, service);
      environment.REDIS_BIND = '127.0.0.1';
      urls[service] = `redis://${environment.REDIS_ANNOUNCE!}`;
    }
    environments[service] = environment;
    const port = environment.PORT ?? environment.EMULATOR_PORT ?? environment.DEV_ISSUER_PORT;
    if (port !== undefined) urls[service] = `http://127.0.0.1:${port}`;
    if (environment.METRICS_PORT !== undefined)
      urls[`${service}-metrics`] = `http://127.0.0.1:${environment.METRICS_PORT}`;
  }
  return { environments, urls, secrets, rewrite };
}

/** The twin's processes: started from compose.yaml's commands, their output kept, stopped together. */
function createTwinProcesses(
  compose: ReturnType<typeof readComposeFile>,
  workDir: string,
  options: TwinOptions,
): {
  output: Record<string, string[]>;
  bind(plan: TwinPlan): {
    run: (service: string) => ChildProcess;
    ready: (service: string, from?: number) => Promise<void>;
    output: Record<string, string[]>;
  };
  isRunning(service: string): boolean;
  stop(service: string, graceMs: number): Promise<number | null>;
  close(): Promise<void>;
} {
  const children: ChildProcess[] = [];
  const running = new Map<string, ChildProcess>();
  const output: Record<string, string[]> = {};
  const close = async (): Promise<void> => {
    await Promise.all(children.map((child) => stopProcessGroup(child)));
    rmSync(workDir, { recursive: true, force: true });
  };
  const bind = ({ environments, urls, rewrite }: TwinPlan) => {
    const run = (service: string): ChildProcess => {
      const { program, args, cwd } = commandOf(compose, service, environments[service]!, rewrite);
      const child = (options.spawn ?? spawn)(program, args, {
        cwd,
        // Only what the file gives, plus what finds programs: nothing of this process's own environment.
        env: {
          PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
          HOME: process.env.HOME ?? tmpdir(),
          ...environments[service],
        },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      // A restarted service's lines follow its earlier ones.
      const lines: string[] = (output[service] ??= []);
      const collect = (chunk: Buffer): void => {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (line === '') continue;
          lines.push(line);
          options.onLine?.(service, line);
        }
      };
      child.stdout!.on('data', collect);
      child.stderr!.on('data', collect);
      children.push(child);
      running.set(service, child);
      return child;
    };
    const ready = (service: string, from = 0): Promise<void> =>
      // A busy machine starts a replica in tens of seconds.
      waitUntil(
        () => answersAsReady(service, urls, output[service]!.slice(from)),
        `${service} to answer`,
        options.readyWithinMs ?? 120_000,
      );
    return { run, ready, output };
  };
  return {
    output,
    bind,
    isRunning: (service) => running.has(service),
    async stop(service, graceMs) {
      const child = running.get(service);
      if (child === undefined) throw new Error(`${service} is not running`);
      await stopProcessGroup(child, graceMs);
      running.delete(service);
      return child.exitCode;
    },
    close,
  };
}

/**
 * The program a service runs, its arguments and working directory: its compose command with the
 * files it mounts read where they are, Debian's `redis-server` for the redis image's, and the
 * `hive-gateway` CLI (in the directory of the mounted configuration, where it looks for it) for the
 * gateway image's.
 */
function commandOf(
  compose: ReturnType<typeof readComposeFile>,
  service: string,
  environment: Record<string, string>,
  rewriteValue: (value: string) => string,
): { program: string; args: string[]; cwd: string } {
  const declared = compose.services[service]!;
  const mounts = (declared.volumes ?? [])
    .map((volume) => volume.split(':'))
    .filter(([source]) => source!.startsWith('./'))
    .map(([source, target]) => ({ source: resolve(ROOT, source!), target: target! }));
  const rewrite = (part: string): string => {
    const mount = mounts.find(({ target }) => part === target);
    return mount === undefined ? rewriteValue(part) : mount.source;
  };
  const command = (declared.command ?? []).map(rewrite);
  if (command.length === 0) throw new Error(`compose.yaml gives service "${service}" no command`);
  if (declared.image?.startsWith('ghcr.io/graphql-hive/gateway:') === true) {
    const config = mounts.find(({ target }) => target.endsWith('/gateway.config.ts'));
    if (config === undefined) throw new Error('compose.yaml mounts no gateway.config.ts into the gateway');
    return {
      program: process.execPath,
      args: [HIVE_GATEWAY_BIN, ...command, '--host', '127.0.0.1', '--port', environment.PORT!],
      cwd: dirname(config.source),
    };
  }
  return { program: command[0]!, args: command.slice(1), cwd: ROOT };
}

/** Whether a started service answers as its compose healthcheck or readiness would tell. */
async function answersAsReady(
  service: string,
  urls: Record<string, string>,
  lines: readonly string[],
): Promise<boolean> {
  const url = urls[service];
  if (url === undefined) throw new Error(`compose.yaml gives service "${service}" no port`);
  if (url.startsWith('redis://')) return redisAnswers(new URL(url));
  if (REPLICAS.includes(service as (typeof REPLICAS)[number]))
    return lines.some((line) => line.includes('"msg":"facade listening"'));
  const path =
    service === 'emulator'
      ? '/_emulator/health'
      : service === 'dev-issuer'
        ? '/.well-known/openid-configuration'
        : service === 'gateway'
          ? '/readiness'
          : '/.well-known/apollo/server-health';
  return answers(`${url}${path}`, service === 'support-notes');
}

/** Whether a Redis server or Sentinel answers PING (PONG, or NOAUTH from one that wants a password). */
async function redisAnswers(url: URL): Promise<boolean> {
  const socket = createConnection({ host: url.hostname, port: Number(url.port) });
  try {
    await once(socket, 'connect');
    socket.write('PING\r\n');
    const [reply] = (await Promise.race([
      once(socket, 'data'),
      sleep(1_000).then(() => [Buffer.alloc(0)]),
    ])) as [Buffer];
    return /^(\+PONG|-NOAUTH)/.test(reply.toString('latin1'));
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

/**
 * deploy/gateway.config.ts for `edge`, as the official image's CLI runs it, for Hive Gateway's
 * runtime in process: the CLI turns the config's `jwt` option into the JWT plugin, so this does too.
 * Subscriptions need nothing more: the runtime loads `@graphql-mesh/transport-ws` for `kind: 'ws'`.
 */
export function inProcessGatewayConfig(edge: EdgeOptions): Omit<GatewayConfigSupergraph, 'supergraph'> {
  // The CLI's drain at SIGTERM is the CLI's: the runtime in process has none.
  const { jwt, plugins, gracefulShutdownTimeout: _drain, ...config } = createGatewayConfig(edge);
  // The plugin's type carries its context extension, which the runtime's plugin list does not name.
  const jwtPlugin = useJWT(jwt) as unknown as GatewayPlugin;
  // The configuration's own plugins run too, after the JWT plugin (as the CLI orders them).
  return { ...config, plugins: (context) => [jwtPlugin, ...(plugins?.(context) ?? [])] };
}

/** SIGTERM to the process group started for a service (npm and the node it runs), SIGKILL after `graceMs`. */
async function stopProcessGroup(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, 'exit');
  try {
    // A grace of 0 is `kill -9`: nothing to finish first.
    process.kill(-child.pid, graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

async function answers(url: string, preflight = false): Promise<boolean> {
  try {
    const response = await fetch(url, preflight ? { headers: { 'apollo-require-preflight': 'true' } } : {});
    await response.body?.cancel();
    return response.status < 500;
  } catch {
    return false;
  }
}

async function waitUntil(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const twin = await startComposeTwin({
    onLine: (service, line) => process.stdout.write(`${service.padEnd(13)} | ${line}\n`),
  });
  process.stdout.write(`${JSON.stringify({ ...twin.urls, gatewayGraphQL: twin.gatewayUrl }, null, 2)}\n`);
  const stop = (): void => {
    twin.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.main) await main();
