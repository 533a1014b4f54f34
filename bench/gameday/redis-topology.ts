/**
 * The game day's Redis, in one of two shapes behind one interface, so the facade's connection is one
 * switch (`--redis`, or {@link facadeSupportsSentinel}):
 *
 * - `sentinel`: the shipped topology, started the way compose and Kubernetes start it: every member
 *   through deploy/kubernetes/redis-ha.sh (two data servers with AOF `everysec`, the first the
 *   primary at the first start, and three Sentinels), with deploy/kubernetes/redis.yaml's settings
 *   (its master name, the Sentinels' down-after time) and passwords of this run where the
 *   StatefulSets take them from a Secret. A member killed or stopped is started again by the same
 *   script, which asks the Sentinels who the primary is, as a restarted pod does. The facade is given
 *   `REDIS_SENTINELS`, `REDIS_SENTINEL_MASTER` and the passwords when it reads them (its
 *   `REDIS_MIN_REPLICAS_ACK` is deploy/kubernetes/facade.env's); a facade that does not is given
 *   `REDIS_URL` of the first server, what such a facade would be configured with in front of
 *   Sentinel (and keeps talking to after a failover).
 * - `single`: one `redis-server` with its append-only file (`appendonly yes`, `appendfsync
 *   everysec`), the facade given `REDIS_URL`, for comparison with a facade of one Redis. A killed
 *   primary has no replica to promote: it is started again from its files after
 *   {@link SINGLE_RESTART_DELAY_MS}, as a supervisor restarts a crashed pod.
 *
 * Every process goes through the run's {@link Children}; every node listens on loopback on a port
 * found free, and keeps it across restarts.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { findFreePort } from '../processes.ts';
import { waitReady, type Child, type Children } from './children.ts';
import { REDIS_HA_SCRIPT, shippedRedis } from './shipped.ts';

const run = promisify(execFile);

/** The shapes the game day can run. */
export const REDIS_VARIANTS = ['single', 'sentinel'] as const;
export type RedisVariant = (typeof REDIS_VARIANTS)[number];

/** How long a killed single Redis stays down before it is started again from its files. */
export const SINGLE_RESTART_DELAY_MS = 2_000;

/** The persistence every data node runs with: what the issue asks compose and Kubernetes for. */
const PERSISTENCE = ['--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''];

/**
 * Whether the facade's source reads `REDIS_SENTINELS` (a Sentinel-aware facade): the one place the
 * game day decides how the facade reaches Redis when `--redis` is not given.
 */
export function facadeSupportsSentinel(sourceDir: string): boolean {
  const files = readdirSync(sourceDir, { recursive: true, encoding: 'utf8' }).filter(
    (file) => file.endsWith('.ts') && !file.startsWith('generated'),
  );
  return files.some((file) => readFileSync(join(sourceDir, file), 'utf8').includes("'REDIS_SENTINELS'"));
}

/**
 * `redis-cli -p <port> <args>` with `password` (none when empty; given through REDISCLI_AUTH, never
 * on the command line); its output, or undefined when it failed or took over 2 s.
 */
export async function redisCli(
  port: number,
  password: string,
  ...args: string[]
): Promise<string | undefined> {
  try {
    const { stdout } = await run(
      'redis-cli',
      ['--no-auth-warning', '-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 2_000, env: { ...process.env, REDISCLI_AUTH: password } },
    );
    return stdout;
  } catch {
    return undefined;
  }
}

/** One `redis-server` data node: its port, its folder, its process while it runs. */
interface DataNode {
  name: string;
  port: number;
  dir: string;
  child: Child | undefined;
}

/** What a fault did to Redis, for the report. */
export interface RedisFaultNote {
  /** One line: what was killed, what took over, how long it took. */
  summary: string;
}

/** The running Redis of a game day. */
export interface RedisTopology {
  readonly variant: RedisVariant;
  /** Whether the facade reaches it through Sentinel (else `REDIS_URL` of the first primary). */
  readonly throughSentinel: boolean;
  /** The facade's variables for reaching it. */
  facadeEnv(): Record<string, string>;
  /**
   * `kill -9` of the primary. Sentinel: resolves once the sentinels name a new primary, then starts
   * the old one again (it rejoins as a replica). Single: starts it again from its files after
   * {@link SINGLE_RESTART_DELAY_MS}.
   */
  killPrimary(): Promise<RedisFaultNote>;
  /** Every data node stopped (SIGTERM: the append-only file flushed) and started again from its files. */
  restartFromPersistence(): Promise<RedisFaultNote>;
  /** Lines for the report: each node's role and port. */
  describe(): Promise<string>;
}

/** Starts `variant` under `dir` through `children`; resolves once it serves (and replicates). */
export async function startRedisTopology(
  variant: RedisVariant,
  options: { dir: string; children: Children; throughSentinel: boolean },
): Promise<RedisTopology> {
  const { children, dir } = options;
  const node = async (name: string): Promise<DataNode> => {
    const nodeDir = join(dir, name);
    mkdirSync(nodeDir, { recursive: true });
    return { name, port: await findFreePort(), dir: nodeDir, child: undefined };
  };
  const startNode = async (data: DataNode, replicaOf: DataNode | undefined): Promise<void> => {
    data.child = children.spawn({
      name: `redis ${data.name}`,
      file: 'redis-server',
      args: [
        '--bind',
        '127.0.0.1',
        '--port',
        String(data.port),
        '--dir',
        data.dir,
        ...PERSISTENCE,
        ...(replicaOf === undefined ? [] : ['--replicaof', '127.0.0.1', String(replicaOf.port)]),
      ],
      options: {},
    });
    await waitReady(
      data.child,
      async () => (await redisCli(data.port, '', 'PING'))?.trim() === 'PONG',
      'PING',
    );
  };
  const stopNode = async (data: DataNode, how: 'kill' | 'stop'): Promise<void> => {
    if (data.child === undefined) return;
    await (how === 'kill' ? children.kill(data.child) : children.stop(data.child, 15_000));
    data.child = undefined;
  };

  if (variant === 'single') {
    const primary = await node('primary');
    await startNode(primary, undefined);
    return {
      variant,
      throughSentinel: false,
      // No replica to acknowledge a write: the base's REDIS_MIN_REPLICAS_ACK=1 would refuse every one.
      facadeEnv: () => ({ REDIS_URL: `redis://127.0.0.1:${primary.port}`, REDIS_MIN_REPLICAS_ACK: '0' }),
      async killPrimary() {
        await stopNode(primary, 'kill');
        await sleep(SINGLE_RESTART_DELAY_MS);
        const started = Date.now();
        await startNode(primary, undefined);
        return {
          summary: `single Redis killed (-9); no replica to promote; started again from its AOF after ${SINGLE_RESTART_DELAY_MS} ms, serving ${Date.now() - started} ms later`,
        };
      },
      async restartFromPersistence() {
        const keysBefore = await redisCli(primary.port, '', 'DBSIZE');
        await stopNode(primary, 'stop');
        await startNode(primary, undefined);
        const keysAfter = await redisCli(primary.port, '', 'DBSIZE');
        return {
          summary: `single Redis stopped (SIGTERM) and started again from its AOF: keys ${keysBefore?.trim() ?? '?'} before, ${keysAfter?.trim() ?? '?'} after`,
        };
      },
      describe: async () => `single redis-server on ${primary.port} (AOF everysec)`,
    };
  }
  return startSentinelTopology(options, stopNode);
}

/** A member of the shipped Redis topology: a data server or a Sentinel, started by redis-ha.sh. */
interface Member extends DataNode {
  role: 'server' | 'sentinel';
}

/** The primary + replica + three sentinels shape, each started by the shipped redis-ha.sh. */
async function startSentinelTopology(
  options: { dir: string; children: Children; throughSentinel: boolean },
  stopNode: (data: DataNode, how: 'kill' | 'stop') => Promise<void>,
): Promise<RedisTopology> {
  const shipped = shippedRedis();
  const member = async (name: string, role: Member['role']): Promise<Member> => {
    const dir = join(options.dir, name);
    mkdirSync(dir, { recursive: true });
    return { name, role, port: await findFreePort(), dir, child: undefined };
  };
  const servers = [await member('redis-0', 'server'), await member('redis-1', 'server')];
  const sentinels = [0, 1, 2].map((index) => member(`sentinel-${index}`, 'sentinel'));
  const watchers = await Promise.all(sentinels);
  const address = ({ port }: Member): string => `127.0.0.1:${port}`;
  const topology = {
    REDIS_SERVERS: servers.map(address).join(','),
    REDIS_SENTINELS: watchers.map(address).join(','),
  };
  const asServer = (port: number, ...args: string[]) => redisCli(port, shipped.passwords.server, ...args);
  const asSentinel = (port: number, ...args: string[]) => redisCli(port, shipped.passwords.sentinel, ...args);
  /** Starts `one` through redis-ha.sh as its StatefulSet's pod would; resolves once it answers PING. */
  const start = async (one: Member): Promise<void> => {
    one.child = options.children.spawn({
      name: `redis ${one.name}`,
      file: 'sh',
      args: [REDIS_HA_SCRIPT, one.role],
      options: {
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          ...shipped.environment[one.role],
          ...topology,
          REDIS_ANNOUNCE: address(one),
          REDIS_BIND: '127.0.0.1',
          REDIS_DATA_DIR: one.dir,
        },
      },
    });
    const ping = one.role === 'server' ? asServer : asSentinel;
    await waitReady(one.child, async () => (await ping(one.port, 'PING'))?.trim() === 'PONG', 'PING');
  };
  for (const one of [...servers, ...watchers]) await start(one);
  const master = shipped.master;
  /** The primary's port as the first sentinel that answers names it. */
  const primaryPort = async (): Promise<number | undefined> => {
    for (const sentinel of watchers) {
      const answer = await asSentinel(sentinel.port, 'SENTINEL', 'get-master-addr-by-name', master);
      const port = Number(answer?.trim().split('\n')[1]);
      if (Number.isInteger(port) && port > 0) return port;
    }
    return undefined;
  };
  const settled = async (): Promise<boolean> => {
    const port = await primaryPort();
    const replica = servers.find((data) => data.port !== port);
    if (port === undefined || replica === undefined) return false;
    const info = await asServer(replica.port, 'INFO', 'replication');
    const replicas = await asSentinel(watchers[0]!.port, 'SENTINEL', 'replicas', master);
    const others = await asSentinel(watchers[0]!.port, 'SENTINEL', 'sentinels', master);
    return (
      info?.includes('master_link_status:up') === true &&
      info.includes(`master_port:${String(port)}`) &&
      replicas?.includes(String(replica.port)) === true &&
      (others?.match(/^name$/gm)?.length ?? 0) === 2
    );
  };
  const waitSettled = async (what: string): Promise<number> => {
    const started = Date.now();
    await waitReady(watchers[0]!.child!, settled, what, 90_000);
    return Date.now() - started;
  };
  await waitSettled('the replica and the sentinels to see each other');

  return {
    variant: 'sentinel',
    throughSentinel: options.throughSentinel,
    facadeEnv: (): Record<string, string> =>
      options.throughSentinel
        ? {
            REDIS_SENTINELS: topology.REDIS_SENTINELS,
            REDIS_SENTINEL_MASTER: master,
            REDIS_PASSWORD: shipped.passwords.server,
            REDIS_SENTINEL_PASSWORD: shipped.passwords.sentinel,
          }
        : { REDIS_URL: `redis://:${shipped.passwords.server}@${address(servers[0]!)}` },
    async killPrimary() {
      const oldPort = await primaryPort();
      const old = servers.find((data) => data.port === oldPort);
      if (old === undefined) throw new Error('the sentinels name no primary');
      const killedAt = Date.now();
      await stopNode(old, 'kill');
      await waitReady(
        watchers[0]!.child!,
        async () => {
          const port = await primaryPort();
          return port !== undefined && port !== oldPort;
        },
        'the sentinels to promote the replica',
        90_000,
      );
      const promotedMs = Date.now() - killedAt;
      const newPrimary = servers.find((data) => data.port !== oldPort)!;
      // As its pod restarts: redis-ha.sh asks the sentinels, and starts it as the new primary's replica.
      await start(old);
      const rejoinedMs = await waitSettled('the old primary to rejoin as a replica');
      return {
        summary: `primary :${old.port} killed (-9); the sentinels promoted :${newPrimary.port} after ${promotedMs} ms; the old primary, started again by redis-ha.sh, rejoined as its replica ${rejoinedMs} ms after its restart`,
      };
    },
    async restartFromPersistence() {
      const port = await primaryPort();
      const primary = servers.find((data) => data.port === port)!;
      const replica = servers.find((data) => data.port !== port)!;
      const keysBefore = await asServer(primary.port, 'DBSIZE');
      await stopNode(replica, 'stop');
      await stopNode(primary, 'stop');
      // Started again by redis-ha.sh in StatefulSet order: the one the sentinels still name as the
      // primary starts as the primary, then the other as its replica.
      await start(primary);
      await start(replica);
      const settledMs = await waitSettled('the replica to sync again');
      const keysAfter = await asServer(primary.port, 'DBSIZE');
      return {
        summary: `primary :${primary.port} and replica :${replica.port} stopped (SIGTERM) and started again by redis-ha.sh from their AOF; keys ${keysBefore?.trim() ?? '?'} before, ${keysAfter?.trim() ?? '?'} after; replica in sync ${settledMs} ms later`,
      };
    },
    async describe() {
      const port = await primaryPort();
      return `primary :${String(port)}, replica :${servers.find((data) => data.port !== port)?.port ?? '?'}, sentinels :${watchers.map((sentinel) => sentinel.port).join(', :')} (deploy/kubernetes/redis-ha.sh with redis.yaml's settings: AOF everysec, down after ${shipped.environment.sentinel.REDIS_SENTINEL_DOWN_AFTER_MS ?? '5000'} ms, passwords; facade ${options.throughSentinel ? 'through Sentinel' : 'with REDIS_URL of the first primary'})`;
    },
  };
}
