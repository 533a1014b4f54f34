/**
 * A Redis that fails over, for the tests and the game day: Debian's `redis-server` as a primary, its
 * replicas and three Sentinels (`redis-server <conf> --sentinel`, the same binary: the
 * `redis-sentinel` package is not needed), each on a free loopback port, with AOF `everysec` on the
 * data nodes. A node can be killed, paused and restarted from its own files; the Sentinels then
 * promote a replica as they would in production (`down-after-milliseconds 1000`,
 * `failover-timeout 5000`).
 *
 * ```ts
 * const redis = await startRedisSentinel();
 * const env = redis.env();                 // REDIS_SENTINELS, REDIS_SENTINEL_MASTER, passwords
 * const killed = await redis.killPrimary();
 * const promoted = await redis.waitForPromotion(killed);
 * await redis.restartNode(killed.port);    // comes back, and the Sentinels make it a replica
 * await redis.stop();
 * ```
 *
 * As a command, `node scripts/redis-sentinel.ts` starts one (one replica, no passwords), prints the
 * facade's settings for it as JSON and runs until SIGINT or SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { findFreePort } from './redis-server.ts';

/** Where a node listens. */
export interface RedisAddress {
  host: string;
  port: number;
}

/** Options of {@link startRedisSentinel}. */
export interface RedisSentinelOptions {
  /** The name the Sentinels monitor the primary under (`REDIS_SENTINEL_MASTER`). Default `facade`. */
  masterName?: string;
  /** Replicas of the primary. Default 1. */
  replicas?: number;
  /** The data nodes' password (`requirepass` and `masterauth`; `REDIS_PASSWORD`). Default none. */
  password?: string;
  /** The Sentinels' own password (`REDIS_SENTINEL_PASSWORD`). Default none. */
  sentinelPassword?: string;
  /** Where configurations, AOF files and logs go; default a temporary folder removed by `stop()`. */
  dir?: string;
}

/** One data node: a primary or a replica, depending on what the Sentinels made of it. */
export interface RedisDataNode extends RedisAddress {
  /** Whether its process runs (a paused one runs). */
  running(): boolean;
  /** The process, while it runs. */
  readonly child: ChildProcess | undefined;
}

/** A running topology; every method is safe to call while a failover is under way. */
export interface RedisSentinelTopology {
  readonly masterName: string;
  readonly sentinels: readonly RedisAddress[];
  readonly nodes: readonly RedisDataNode[];
  /** The facade's settings for this topology (`REDIS_SENTINELS`, `REDIS_SENTINEL_MASTER`, passwords). */
  env(): Record<string, string>;
  /** The primary as a majority of the Sentinels name it now. */
  primaryAddress(): Promise<RedisAddress>;
  /** A plain connection to the node at `port` (the caller quits it). */
  connectTo(port: number): Redis;
  /** SIGKILLs the current primary (no final fsync: a crash); resolves with its address once it is gone. */
  killPrimary(): Promise<RedisAddress>;
  /** SIGKILLs the node at `port`. */
  killNode(port: number): Promise<void>;
  /**
   * Starts a killed node again from its configuration and its AOF, as a replica of the primary the
   * Sentinels name (as a deployment's start script asks them): left to come back as a primary, the
   * Sentinels would turn it into a replica only some 10 s later.
   */
  restartNode(port: number): Promise<void>;
  /** SIGSTOP: the node holds its connections and answers nothing (not even replication) until resumed. */
  pauseNode(port: number): void;
  /** SIGCONT of a paused node. */
  resumeNode(port: number): void;
  /**
   * Resolves once a majority of the Sentinels name a primary other than `previous` and it answers as
   * one, with how long that took from the call.
   */
  waitForPromotion(previous: RedisAddress, timeoutMs?: number): Promise<RedisAddress & { elapsedMs: number }>;
  /** Resolves once the primary has `count` replicas online whose link to it is up. */
  waitForReplicas(count: number, timeoutMs?: number): Promise<void>;
  /** Stops every process (SIGTERM, then SIGKILL) and removes the folder it created. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 15_000;

/** Starts a primary, its replicas and three Sentinels, and resolves once the Sentinels see them all. */
export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinelTopology> {
  const masterName = options.masterName ?? 'facade';
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'redis-sentinel-'));
  const processes = new Map<number, ChildProcess>();
  const password = options.password;
  const connectTo = (port: number, asSentinel = false): Redis =>
    new Redis({
      host: HOST,
      port,
      ...(asSentinel
        ? options.sentinelPassword === undefined
          ? {}
          : { password: options.sentinelPassword }
        : password === undefined
          ? {}
          : { password }),
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: false,
    }).on('error', () => undefined);

  const startProcess = async (
    port: number,
    configFile: string,
    sentinel: boolean,
    args: string[] = [],
  ): Promise<void> => {
    const log = join(dir, `${String(port)}.log`);
    const child = spawn('redis-server', [configFile, ...(sentinel ? ['--sentinel'] : []), ...args], {
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    processes.set(port, child);
    let spawnError: Error | undefined;
    child.once('error', (error) => (spawnError = error));
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < deadline) {
      if (spawnError !== undefined) throw spawnError;
      if (child.exitCode !== null) break;
      if (await answersPing(connectTo(port, sentinel))) return;
      await sleep(50);
    }
    const tail = (): string => {
      try {
        return readFileSync(log, 'utf8').split('\n').slice(-15).join('\n');
      } catch {
        return '(no log)';
      }
    };
    throw new Error(`redis-server on port ${String(port)} did not start:\n${tail()}`);
  };

  const dataPorts = await freePorts(1 + (options.replicas ?? 1));
  const sentinelPorts = await freePorts(3);
  const [primaryPort] = dataPorts as [number, ...number[]];
  const nodeConfig = (port: number): string => join(dir, `node-${String(port)}`, 'redis.conf');
  for (const port of dataPorts) {
    mkdirSync(join(dir, `node-${String(port)}`), { recursive: true });
    writeFileSync(
      nodeConfig(port),
      dataNodeConfig(dir, port, port === primaryPort ? undefined : primaryPort, password),
    );
  }
  const sentinelConfig = (port: number): string => join(dir, `sentinel-${String(port)}.conf`);
  for (const port of sentinelPorts) {
    writeFileSync(sentinelConfig(port), sentinelConfigOf(dir, port, masterName, primaryPort, options));
  }

  let started = false;
  const topology: RedisSentinelTopology = {
    masterName,
    sentinels: sentinelPorts.map((port) => ({ host: HOST, port })),
    nodes: dataPorts.map((port) => ({
      host: HOST,
      port,
      running: () => isRunning(processes.get(port)),
      get child() {
        return processes.get(port);
      },
    })),
    env: () => ({
      REDIS_SENTINELS: sentinelPorts.map((port) => `${HOST}:${String(port)}`).join(','),
      REDIS_SENTINEL_MASTER: masterName,
      ...(password === undefined ? {} : { REDIS_PASSWORD: password }),
      ...(options.sentinelPassword === undefined
        ? {}
        : { REDIS_SENTINEL_PASSWORD: options.sentinelPassword }),
    }),
    async primaryAddress() {
      const named = await Promise.all(
        sentinelPorts.map((port) => primaryNamedBy(connectTo(port, true), masterName)),
      );
      const votes = new Map<string, number>();
      for (const address of named)
        if (address !== undefined) votes.set(address, (votes.get(address) ?? 0) + 1);
      const [winner] = [...votes].sort((a, b) => b[1] - a[1]);
      if (winner === undefined || winner[1] < 2)
        throw new Error('no majority of the Sentinels names a primary');
      return { host: HOST, port: Number(winner[0].split(':')[1]) };
    },
    connectTo: (port) => connectTo(port),
    async killPrimary() {
      const primary = await topology.primaryAddress();
      await topology.killNode(primary.port);
      return primary;
    },
    async killNode(port) {
      const child = processes.get(port);
      if (child === undefined || !isRunning(child)) return;
      const exited = once(child, 'exit');
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    },
    async restartNode(port) {
      const primary = await topology.primaryAddress().catch(() => undefined);
      const replicaOf =
        primary === undefined || primary.port === port ? [] : ['--replicaof', HOST, String(primary.port)];
      await startProcess(port, nodeConfig(port), false, replicaOf);
    },
    pauseNode: (port) => processes.get(port)?.kill('SIGSTOP'),
    resumeNode: (port) => processes.get(port)?.kill('SIGCONT'),
    async waitForPromotion(previous, timeoutMs = 15_000) {
      const started = Date.now();
      for (;;) {
        const now = await topology.primaryAddress().catch(() => undefined);
        if (
          now !== undefined &&
          now.port !== previous.port &&
          (await answersAsPrimary(connectTo(now.port)))
        ) {
          return { ...now, elapsedMs: Date.now() - started };
        }
        if (Date.now() - started > timeoutMs) {
          throw new Error(`no replica was promoted within ${String(timeoutMs)} ms of the wait`);
        }
        await sleep(50);
      }
    },
    async waitForReplicas(count, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // Before the Sentinels run, the primary is the one the configurations name.
        const primary = started
          ? await topology.primaryAddress().catch(() => undefined)
          : { port: primaryPort };
        if (primary !== undefined && (await replicasInSync(connectTo(primary.port))) >= count) return;
        if (Date.now() > deadline)
          throw new Error(`the primary did not have ${String(count)} replicas in sync`);
        await sleep(50);
      }
    },
    async stop() {
      await Promise.all(
        [...processes.values()].map(async (child) => {
          if (!isRunning(child)) return;
          const exited = once(child, 'exit');
          child.kill('SIGCONT');
          child.kill('SIGTERM');
          await Promise.race([exited, sleep(5_000)]);
          if (isRunning(child)) child.kill('SIGKILL');
        }),
      );
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };

  try {
    for (const port of dataPorts) await startProcess(port, nodeConfig(port), false);
    await topology.waitForReplicas(dataPorts.length - 1, READY_TIMEOUT_MS);
    for (const port of sentinelPorts) await startProcess(port, sentinelConfig(port), true);
    started = true;
    await sentinelsSeeAll(topology, connectTo, dataPorts.length - 1);
  } catch (error) {
    await topology.stop();
    throw error;
  }
  return topology;
}

/** A data node's configuration: loopback, AOF every second, no RDB snapshots, a replica of `primaryPort`. */
function dataNodeConfig(
  dir: string,
  port: number,
  primaryPort: number | undefined,
  password?: string,
): string {
  return [
    `port ${String(port)}`,
    `bind ${HOST}`,
    `dir ${join(dir, `node-${String(port)}`)}`,
    `logfile ${join(dir, `${String(port)}.log`)}`,
    'appendonly yes',
    'appendfsync everysec',
    'save ""',
    // Redis 7 waits 5 s before a full sync by default, for more replicas to join it: a replica
    // coming back after a failover would stay behind that long.
    'repl-diskless-sync-delay 0',
    ...(password === undefined ? [] : [`requirepass ${password}`, `masterauth ${password}`]),
    ...(primaryPort === undefined ? [] : [`replicaof ${HOST} ${String(primaryPort)}`]),
    '',
  ].join('\n');
}

/** A Sentinel's configuration (it rewrites it as it learns the topology). */
function sentinelConfigOf(
  dir: string,
  port: number,
  masterName: string,
  primaryPort: number,
  options: RedisSentinelOptions,
): string {
  return [
    `port ${String(port)}`,
    `bind ${HOST}`,
    `dir ${dir}`,
    `logfile ${join(dir, `${String(port)}.log`)}`,
    `sentinel monitor ${masterName} ${HOST} ${String(primaryPort)} 2`,
    `sentinel down-after-milliseconds ${masterName} 1000`,
    `sentinel failover-timeout ${masterName} 5000`,
    `sentinel parallel-syncs ${masterName} 1`,
    ...(options.password === undefined ? [] : [`sentinel auth-pass ${masterName} ${options.password}`]),
    ...(options.sentinelPassword === undefined
      ? []
      : [`requirepass ${options.sentinelPassword}`, `sentinel sentinel-pass ${options.sentinelPassword}`]),
    '',
  ].join('\n');
}

/** Whether `child` was started and has not exited (a paused one runs). */
function isRunning(child: ChildProcess | undefined): child is ChildProcess {
  return child?.exitCode === null && child.signalCode === null;
}

async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await findFreePort());
  return [...ports];
}

/** Runs `ask` on `connection`, then closes it; undefined when the node does not answer. */
async function askOnce<T>(connection: Redis, ask: (connection: Redis) => Promise<T>): Promise<T | undefined> {
  try {
    return await ask(connection);
  } catch {
    return undefined;
  } finally {
    connection.disconnect();
  }
}

async function answersPing(connection: Redis): Promise<boolean> {
  return (await askOnce(connection, (c) => c.ping())) === 'PONG';
}

async function answersAsPrimary(connection: Redis): Promise<boolean> {
  const role = await askOnce(connection, (c) => c.call('ROLE') as Promise<unknown[]>);
  return role?.[0] === 'master';
}

/** `host:port` of the primary `sentinel` names, or undefined. */
async function primaryNamedBy(sentinel: Redis, masterName: string): Promise<string | undefined> {
  const reply = await askOnce(
    sentinel,
    (c) => c.call('SENTINEL', 'get-master-addr-by-name', masterName) as Promise<string[] | null>,
  );
  return reply == null ? undefined : `${reply[0]!}:${reply[1]!}`;
}

/** Replicas of the node behind `connection` that are online (INFO replication). */
async function replicasInSync(connection: Redis): Promise<number> {
  const info = await askOnce(connection, (c) => c.info('replication'));
  if (!info?.includes('role:master')) return 0;
  return info.split('\n').filter((line) => /^slave\d+:.*state=online/.test(line)).length;
}

/** Resolves once every Sentinel knows the primary, `replicas` replicas and the other Sentinels. */
async function sentinelsSeeAll(
  topology: RedisSentinelTopology,
  connectTo: (port: number, asSentinel: boolean) => Redis,
  replicas: number,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const views = await Promise.all(
      topology.sentinels.map((sentinel) =>
        askOnce(connectTo(sentinel.port, true), async (c) => {
          const master = (await c.call('SENTINEL', 'master', topology.masterName)) as string[];
          const field = (name: string): number => Number(master[master.indexOf(name) + 1]);
          return { replicas: field('num-slaves'), sentinels: field('num-other-sentinels') };
        }),
      ),
    );
    const ready = views.every(
      (view) =>
        view !== undefined && view.replicas >= replicas && view.sentinels >= topology.sentinels.length - 1,
    );
    if (ready) return;
    if (Date.now() > deadline) throw new Error('the Sentinels did not discover the whole topology in time');
    await sleep(100);
  }
}

if (import.meta.main) {
  const topology = await startRedisSentinel();
  process.stdout.write(`${JSON.stringify(topology.env())}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await topology.stop();
}
