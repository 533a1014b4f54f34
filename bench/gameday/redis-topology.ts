/**
 * The game day's Redis, in one of two shapes behind one interface, so the facade's connection is one
 * switch (`--redis`, or {@link facadeSupportsSentinel}):
 *
 * - `single`: one `redis-server` with its append-only file (`appendonly yes`, `appendfsync
 *   everysec`), the facade given `REDIS_URL`. A killed primary has no replica to promote: it is
 *   started again from its files after {@link SINGLE_RESTART_DELAY_MS}, as a supervisor restarts a
 *   crashed pod.
 * - `sentinel`: a primary, a replica (`--replicaof`) and three sentinels (`redis-server <conf>
 *   --sentinel`, quorum 2, `down-after-milliseconds 1000`, `failover-timeout 5000`), each data node
 *   with its append-only file. The facade is given `REDIS_SENTINELS`, `REDIS_SENTINEL_MASTER` and
 *   `REDIS_MIN_REPLICAS_ACK=1` when it reads them; a facade that does not is given `REDIS_URL` of
 *   the first primary, which is what such a facade would be configured with in front of Sentinel
 *   (and keeps talking to after a failover).
 *
 * Every process goes through the run's {@link Children}; every node listens on loopback on a port
 * found free, and keeps it across restarts.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { findFreePort } from '../processes.ts';
import { waitReady, type Child, type Children } from './children.ts';

const run = promisify(execFile);

/** The shapes the game day can run. */
export const REDIS_VARIANTS = ['single', 'sentinel'] as const;
export type RedisVariant = (typeof REDIS_VARIANTS)[number];

/** The name the sentinels monitor the primary under. */
export const SENTINEL_MASTER_NAME = 'gameday';

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

/** `redis-cli -p <port> <args>`; its output, or undefined when it failed or took over 2 s. */
export async function redisCli(port: number, ...args: string[]): Promise<string | undefined> {
  try {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
      timeout: 2_000,
    });
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
    await waitReady(data.child, async () => (await redisCli(data.port, 'PING'))?.trim() === 'PONG', 'PING');
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
      facadeEnv: () => ({ REDIS_URL: `redis://127.0.0.1:${primary.port}` }),
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
        const keysBefore = await redisCli(primary.port, 'DBSIZE');
        await stopNode(primary, 'stop');
        await startNode(primary, undefined);
        const keysAfter = await redisCli(primary.port, 'DBSIZE');
        return {
          summary: `single Redis stopped (SIGTERM) and started again from its AOF: keys ${keysBefore?.trim() ?? '?'} before, ${keysAfter?.trim() ?? '?'} after`,
        };
      },
      describe: async () => `single redis-server on ${primary.port} (AOF everysec)`,
    };
  }
  return startSentinelTopology(options, node, startNode, stopNode);
}

/** The primary + replica + three sentinels shape; see the file's header. */
async function startSentinelTopology(
  options: { dir: string; children: Children; throughSentinel: boolean },
  node: (name: string) => Promise<DataNode>,
  startNode: (data: DataNode, replicaOf: DataNode | undefined) => Promise<void>,
  stopNode: (data: DataNode, how: 'kill' | 'stop') => Promise<void>,
): Promise<RedisTopology> {
  const nodes = [await node('node-a'), await node('node-b')];
  const [first, second] = nodes as [DataNode, DataNode];
  await startNode(first, undefined);
  await startNode(second, first);
  const sentinels: { port: number; child: Child }[] = [];
  for (let index = 0; index < 3; index += 1) {
    const port = await findFreePort();
    const sentinelDir = join(options.dir, `sentinel-${index}`);
    mkdirSync(sentinelDir, { recursive: true });
    const config = join(sentinelDir, 'sentinel.conf');
    writeFileSync(
      config,
      [
        `bind 127.0.0.1`,
        `port ${port}`,
        `dir ${sentinelDir}`,
        `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${first.port} 2`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 1000`,
        `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 5000`,
        `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
        '',
      ].join('\n'),
    );
    const child = options.children.spawn({
      name: `redis sentinel ${index}`,
      file: 'redis-server',
      args: [config, '--sentinel'],
      options: {},
    });
    await waitReady(child, async () => (await redisCli(port, 'PING'))?.trim() === 'PONG', 'sentinel PING');
    sentinels.push({ port, child });
  }
  /** The primary's port as the first sentinel that answers names it. */
  const primaryPort = async (): Promise<number | undefined> => {
    for (const sentinel of sentinels) {
      const answer = await redisCli(
        sentinel.port,
        'SENTINEL',
        'get-master-addr-by-name',
        SENTINEL_MASTER_NAME,
      );
      const port = Number(answer?.trim().split('\n')[1]);
      if (Number.isInteger(port) && port > 0) return port;
    }
    return undefined;
  };
  const settled = async (): Promise<boolean> => {
    const port = await primaryPort();
    const primary = nodes.find((data) => data.port === port);
    const replica = nodes.find((data) => data.port !== port);
    if (primary === undefined || replica === undefined) return false;
    const info = await redisCli(replica.port, 'INFO', 'replication');
    const replicas = await redisCli(sentinels[0]!.port, 'SENTINEL', 'replicas', SENTINEL_MASTER_NAME);
    const others = await redisCli(sentinels[0]!.port, 'SENTINEL', 'sentinels', SENTINEL_MASTER_NAME);
    return (
      info?.includes('master_link_status:up') === true &&
      info.includes(`master_port:${String(port)}`) &&
      replicas?.includes(String(replica.port)) === true &&
      (others?.match(/^name$/gm)?.length ?? 0) === 2
    );
  };
  const waitSettled = async (what: string): Promise<number> => {
    const started = Date.now();
    await waitReady(sentinels[0]!.child, settled, what, 60_000);
    return Date.now() - started;
  };
  await waitSettled('the replica and the sentinels to see each other');

  return {
    variant: 'sentinel',
    throughSentinel: options.throughSentinel,
    facadeEnv: (): Record<string, string> =>
      options.throughSentinel
        ? {
            REDIS_SENTINELS: sentinels.map(({ port }) => `127.0.0.1:${port}`).join(','),
            REDIS_SENTINEL_MASTER: SENTINEL_MASTER_NAME,
            REDIS_MIN_REPLICAS_ACK: '1',
          }
        : { REDIS_URL: `redis://127.0.0.1:${first.port}` },
    async killPrimary() {
      const oldPort = await primaryPort();
      const old = nodes.find((data) => data.port === oldPort);
      if (old === undefined) throw new Error('the sentinels name no primary');
      const killedAt = Date.now();
      await stopNode(old, 'kill');
      await waitReady(
        sentinels[0]!.child,
        async () => {
          const port = await primaryPort();
          return port !== undefined && port !== oldPort;
        },
        'the sentinels to promote the replica',
        60_000,
      );
      const promotedMs = Date.now() - killedAt;
      const newPrimary = nodes.find((data) => data.port !== oldPort)!;
      await startNode(old, newPrimary);
      const rejoinedMs = await waitSettled('the old primary to rejoin as a replica');
      return {
        summary: `primary :${old.port} killed (-9); the sentinels promoted :${newPrimary.port} after ${promotedMs} ms; the old primary rejoined as its replica ${rejoinedMs} ms after its restart`,
      };
    },
    async restartFromPersistence() {
      const port = await primaryPort();
      const primary = nodes.find((data) => data.port === port)!;
      const replica = nodes.find((data) => data.port !== port)!;
      const keysBefore = await redisCli(primary.port, 'DBSIZE');
      await stopNode(replica, 'stop');
      await stopNode(primary, 'stop');
      // Each started again in the role it had: the primary first, the replica of it.
      await startNode(primary, undefined);
      await startNode(replica, primary);
      const settledMs = await waitSettled('the replica to sync again');
      const keysAfter = await redisCli(primary.port, 'DBSIZE');
      return {
        summary: `primary :${primary.port} and replica :${replica.port} stopped (SIGTERM) and started again from their AOF; keys ${keysBefore?.trim() ?? '?'} before, ${keysAfter?.trim() ?? '?'} after; replica in sync ${settledMs} ms later`,
      };
    },
    async describe() {
      const port = await primaryPort();
      return `primary :${String(port)}, replica :${nodes.find((data) => data.port !== port)?.port ?? '?'}, sentinels :${sentinels.map((sentinel) => sentinel.port).join(', :')} (AOF everysec; facade ${options.throughSentinel ? 'through Sentinel' : 'with REDIS_URL of the first primary'})`;
    },
  };
}
