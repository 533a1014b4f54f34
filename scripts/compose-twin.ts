/**
 * The scripted twin of compose.yaml, for machines without Docker: reads compose.yaml and starts
 * the same processes (each service's own `command`) with the same environment, on loopback ports
 * instead of container ports, against a Redis that is already running (`REDIS_URL`).
 *
 * What differs from `docker compose up`, and why:
 * - addresses: `<service>:<port>` becomes `127.0.0.1:<free port>`; `platform` (both replicas'
 *   network alias, round-robin in compose) is facade-a, so the gateway's traffic goes to one replica;
 * - Redis: the one given, not a container; with `REDIS_KEY_PREFIX` added so runs never meet;
 * - the gateway: Hive Gateway's runtime in this process (`@graphql-hive/gateway-runtime`, with the
 *   same deploy/gateway.config.ts and the gateway service's environment) instead of the official
 *   image, which is the CLI over that runtime; the config's `jwt` option becomes the JWT plugin
 *   here as the CLI makes it there.
 *
 * As a command: `REDIS_URL=redis://127.0.0.1:6379 npm run compose-twin` runs the topology until
 * Ctrl-C and prints its addresses. As a module, tests start it with {@link startComposeTwin}; a
 * replica can be stopped and started again (bench/rolling-restart.ts restarts them one at a time
 * behind a balancer of its own, given as `platformPort`).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  createGatewayRuntime,
  type GatewayConfigSupergraph,
  type GatewayPlugin,
} from '@graphql-hive/gateway-runtime';
import { useJWT } from '@graphql-mesh/plugin-jwt-auth';
import { parse } from 'yaml';
import { createGatewayConfig, edgeOptionsFromEnv, type EdgeOptions } from '../deploy/gateway.config.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** A service of compose.yaml, as far as the twin reads it. */
export interface ComposeService {
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
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
} {
  const parsed = parse(readFileSync(path, 'utf8'), { merge: true }) as {
    services: Record<string, ParsedComposeService>;
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
  return { services };
}

/** Services the twin runs as processes, in start order (the gateway and Redis are handled apart). */
export const PROCESS_SERVICES = [
  'emulator',
  'dev-issuer',
  'facade-a',
  'facade-b',
  'support-notes',
  'supergraph',
] as const;
/** Every service compose.yaml must have for the twin to mirror it. */
export const TWIN_SERVICES = [...PROCESS_SERVICES, 'redis', 'gateway'] as const;

/** The network alias both replicas answer to in compose; the twin sends it to facade-a. */
const PLATFORM_ALIAS = 'platform';
/** Variables naming the port a service listens on. */
const PORT_VARIABLES = ['PORT', 'EMULATOR_PORT', 'DEV_ISSUER_PORT', 'METRICS_PORT'];
/** Variables naming the interface a service listens on. */
const HOST_VARIABLES = ['HOST', 'EMULATOR_HOST', 'DEV_ISSUER_HOST'];

export interface TwinOptions {
  /** The Redis every replica shares (compose's `redis` service). */
  redisUrl: string;
  /** Added to the replicas' environment so runs sharing a Redis never meet. Default `twin:<pid>:`. */
  redisKeyPrefix?: string;
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
  /** Base URL (no path) of each service by compose name, and of the facades' metrics servers. */
  urls: Record<string, string>;
  /** `${urls.gateway}/graphql` */
  gatewayUrl: string;
  /** The environment each process was started with, by service (PATH and HOME aside). */
  environments: Record<string, Record<string, string>>;
  /** What each process wrote so far, line by line. */
  lines(service: string): string[];
  /**
   * SIGTERM to a running service's process group; resolves with its exit code once it has exited
   * (SIGKILL after `graceMs`, as a container runtime does after the grace period).
   */
  stop(service: (typeof REPLICAS)[number], graceMs?: number): Promise<number | null>;
  /** Starts a stopped replica again, same command, environment and ports; resolves once it listens. */
  start(service: (typeof REPLICAS)[number]): Promise<void>;
  close(): Promise<void>;
}

/** The facade replicas, which {@link ComposeTwin.stop} and {@link ComposeTwin.start} restart. */
export const REPLICAS = ['facade-a', 'facade-b'] as const;

/** Starts the topology. Always `close()` it. */
export async function startComposeTwin(options: TwinOptions): Promise<ComposeTwin> {
  const compose = readComposeFile();
  for (const name of TWIN_SERVICES) {
    if (compose.services[name] === undefined) throw new Error(`compose.yaml has no service "${name}"`);
  }
  const workDir = mkdtempSync(join(tmpdir(), 'compose-twin-'));
  const children: { service: string; child: ChildProcess }[] = [];
  const running = new Map<string, ChildProcess>();
  const output: Record<string, string[]> = {};
  let gatewayServer: Server | undefined;
  let disposeGateway: (() => Promise<void>) | undefined;

  const close = async (): Promise<void> => {
    await disposeGateway?.();
    if (gatewayServer !== undefined) {
      gatewayServer.closeAllConnections();
      await new Promise<void>((done) => gatewayServer!.close(() => done()));
    }
    await Promise.all(children.map(({ child }) => stopProcessGroup(child)));
    rmSync(workDir, { recursive: true, force: true });
  };

  try {
    // 1. A loopback port for every `<service>:<port>` the file names, and for every listening variable.
    const addresses = new Map<string, number>();
    const metricsPorts = new Map<string, number>();
    for (const service of PROCESS_SERVICES) {
      const environment = compose.services[service]!.environment ?? {};
      const port = environment.PORT ?? environment.EMULATOR_PORT ?? environment.DEV_ISSUER_PORT;
      if (port !== undefined) addresses.set(`${service}:${port}`, await freePort());
      if (environment.METRICS_PORT !== undefined) metricsPorts.set(service, await freePort());
    }
    const facadeAPortText = compose.services['facade-a']!.environment?.PORT;
    if (facadeAPortText === undefined) throw new Error('compose.yaml gives service "facade-a" no PORT');
    const platformPort = options.platformPort ?? addresses.get(`facade-a:${facadeAPortText}`)!;
    const rewrite = (value: string): string => {
      let result = value.replace(/redis:\/\/redis:\d+/g, options.redisUrl);
      result = result.replace(new RegExp(`//${PLATFORM_ALIAS}:\\d+`, 'g'), `//127.0.0.1:${platformPort}`);
      for (const [address, port] of addresses)
        result = result.replaceAll(`//${address}`, `//127.0.0.1:${port}`);
      return result.replaceAll('/supergraph/', `${workDir}/`);
    };

    const environments: Record<string, Record<string, string>> = {};
    const urls: Record<string, string> = {};
    for (const service of PROCESS_SERVICES) {
      const declared = compose.services[service]!.environment ?? {};
      const environment: Record<string, string> = {};
      for (const [name, value] of Object.entries(declared)) {
        if (HOST_VARIABLES.includes(name)) environment[name] = '127.0.0.1';
        else if (name === 'METRICS_PORT') environment[name] = String(metricsPorts.get(service));
        else if (PORT_VARIABLES.includes(name))
          environment[name] = String(addresses.get(`${service}:${value}`));
        else environment[name] = rewrite(value);
      }
      if (declared.REDIS_URL !== undefined)
        environment.REDIS_KEY_PREFIX = options.redisKeyPrefix ?? `twin:${process.pid}:`;
      environments[service] = environment;
      const port = environment.PORT ?? environment.EMULATOR_PORT ?? environment.DEV_ISSUER_PORT;
      if (port !== undefined) urls[service] = `http://127.0.0.1:${port}`;
      if (environment.METRICS_PORT !== undefined)
        urls[`${service}-metrics`] = `http://127.0.0.1:${environment.METRICS_PORT}`;
    }
    const urlOf = (service: string): string => {
      const url = urls[service];
      if (url === undefined) throw new Error(`compose.yaml gives service "${service}" no port`);
      return url;
    };

    const run = (service: string): ChildProcess => {
      const command = (compose.services[service]!.command ?? []).map((part) => rewrite(part));
      if (command.length === 0) throw new Error(`compose.yaml gives service "${service}" no command`);
      const child = (options.spawn ?? spawn)(command[0]!, command.slice(1), {
        cwd: ROOT,
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
      children.push({ service, child });
      running.set(service, child);
      return child;
    };
    const listened = (service: string, from = 0): Promise<void> =>
      waitUntil(
        async () => output[service]!.slice(from).some((line) => line.includes('"msg":"facade listening"')),
        `${service} to listen`,
        // A busy machine starts a replica in tens of seconds.
        options.readyWithinMs ?? 120_000,
      );

    const { readyWithinMs } = options;
    // 2. The emulator, then the replicas and the example subgraph, then the supergraph from them.
    run('emulator');
    run('dev-issuer');
    await waitUntil(
      () => answers(`${urlOf('emulator')}/_emulator/health`),
      'the emulator to answer',
      readyWithinMs,
    );
    await waitUntil(
      () => answers(`${urlOf('dev-issuer')}/.well-known/openid-configuration`),
      'the OpenID provider to answer',
      readyWithinMs,
    );
    if (options.replicaEnvironment !== undefined) {
      const extra = await options.replicaEnvironment(urlOf('emulator'));
      for (const service of REPLICAS) Object.assign(environments[service]!, extra);
    }
    for (const service of REPLICAS) run(service);
    run('support-notes');
    for (const service of REPLICAS) await listened(service);
    await waitUntil(
      () => answers(`${urlOf('support-notes')}/.well-known/apollo/server-health`, true),
      'support-notes to answer',
      readyWithinMs,
    );
    const composer = run('supergraph');
    const [code] = (await once(composer, 'exit')) as [number | null];
    if (code !== 0)
      throw new Error(`the supergraph service failed (${String(code)}):\n${output.supergraph!.join('\n')}`);

    // 3. The gateway over the file the supergraph service wrote, with compose's gateway config.
    const gatewayCommand = compose.services.gateway!.command ?? [];
    const supergraphPath = rewrite(gatewayCommand[gatewayCommand.indexOf('supergraph') + 1] ?? '');
    const gatewayEnvironment = Object.fromEntries(
      Object.entries(compose.services.gateway!.environment ?? {}).map(([name, value]) => [
        name,
        rewrite(value),
      ]),
    );
    environments.gateway = gatewayEnvironment;
    const runtime = createGatewayRuntime({
      ...inProcessGatewayConfig(edgeOptionsFromEnv(gatewayEnvironment)),
      supergraph: readFileSync(supergraphPath, 'utf8'),
      logging: false,
    });
    disposeGateway = async () => {
      await runtime.dispose();
    };
    const server = createServer(runtime.requestListener);
    gatewayServer = server;
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen(0, '127.0.0.1', done);
    });
    urls.gateway = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    return {
      urls,
      gatewayUrl: `${urls.gateway}${runtime.graphqlEndpoint}`,
      environments,
      lines: (service) => output[service] ?? [],
      stop: async (service, graceMs = 30_000) => {
        const child = running.get(service);
        if (child === undefined) throw new Error(`${service} is not running`);
        await stopProcessGroup(child, graceMs);
        running.delete(service);
        return child.exitCode;
      },
      start: async (service) => {
        if (running.has(service)) throw new Error(`${service} is running already`);
        const from = output[service]?.length ?? 0;
        run(service);
        await listened(service, from);
      },
      close,
    };
  } catch (error) {
    const shown = Object.entries(output)
      .map(([service, lines]) => `--- ${service}\n${lines.slice(-20).join('\n')}`)
      .join('\n');
    await close();
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${shown}`, { cause: error });
  }
}

/**
 * deploy/gateway.config.ts for `edge`, as the official image's CLI runs it, for Hive Gateway's
 * runtime in process: the CLI turns the config's `jwt` option into the JWT plugin, so this does too.
 * Subscriptions need nothing more: the runtime loads `@graphql-mesh/transport-ws` for `kind: 'ws'`.
 */
export function inProcessGatewayConfig(edge: EdgeOptions): Omit<GatewayConfigSupergraph, 'supergraph'> {
  const { jwt, ...config } = createGatewayConfig(edge);
  // The plugin's type carries its context extension, which the runtime's plugin list does not name.
  const jwtPlugin = useJWT(jwt) as unknown as GatewayPlugin;
  return { ...config, plugins: () => [jwtPlugin] };
}

/** SIGTERM to the process group started for a service (npm and the node it runs), SIGKILL after `graceMs`. */
async function stopProcessGroup(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, 'exit');
  try {
    process.kill(-child.pid, 'SIGTERM');
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

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  probe.close();
  await once(probe, 'close');
  return port;
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  if (redisUrl === undefined || redisUrl === '') {
    process.stderr.write('REDIS_URL is required: the twin shares a running Redis between the replicas.\n');
    process.exit(1);
  }
  const twin = await startComposeTwin({
    redisUrl,
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
