/**
 * The event log's Redis as deploy/kubernetes/redis.yaml, compose.yaml and its twin start it, from
 * the one script they all run (deploy/kubernetes/redis-ha.sh): two data servers with AOF `everysec`
 * and three Sentinels, all real (Debian's redis-server 7, `--sentinel`), on loopback ports, with
 * passwords. The script is run as the pods run it; what is checked is what an operator meets: the
 * first start makes the first server the primary, a primary killed with SIGKILL is replaced by its
 * replica holding the acknowledged writes, the old primary started again by the same script joins
 * the new one as its replica, a restarted Sentinel finds the current primary and is not counted
 * twice, and a restart of everything replays the AOF.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { spawnProcess, stopProcess } from '../support/processes.ts';

const SCRIPT = resolve(import.meta.dirname, '../../deploy/kubernetes/redis-ha.sh');
const MASTER = 'platform';
const PASSWORD = 'data-servers-secret';
const SENTINEL_PASSWORD = 'sentinels-secret';

const workDir = mkdtempSync(join(tmpdir(), 'redis-ha-'));
const clients: Redis[] = [];
// Started here and stopped after the file: each step builds on the topology the previous one left.
const started: ChildProcess[] = [];

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await Promise.all(started.map((child) => stopProcess(child)));
  rmSync(workDir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A member of the topology: its address, data directory and (while running) process. */
interface Member {
  readonly name: string;
  readonly role: 'server' | 'sentinel';
  readonly address: string;
  readonly port: number;
  child?: ChildProcess;
  output: string;
}

const servers: Member[] = [];
const sentinels: Member[] = [];

async function member(name: string, role: Member['role']): Promise<Member> {
  const port = await freePort();
  return { name, role, address: `127.0.0.1:${port}`, port, output: '' };
}

/** Starts `target` with the script, with the environment the manifests give it. */
function start(target: Member): void {
  target.output = '';
  const child = spawnProcess('sh', [SCRIPT, target.role], {
    env: {
      PATH: process.env.PATH,
      REDIS_ANNOUNCE: target.address,
      REDIS_SERVERS: servers.map(({ address }) => address).join(','),
      REDIS_SENTINELS: sentinels.map(({ address }) => address).join(','),
      REDIS_SENTINEL_MASTER: MASTER,
      REDIS_PASSWORD: PASSWORD,
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
      REDIS_BIND: '127.0.0.1',
      REDIS_DATA_DIR: join(workDir, target.name),
      REDIS_SENTINEL_DOWN_AFTER_MS: '1000',
      REDIS_SENTINEL_FAILOVER_TIMEOUT_MS: '5000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk: Buffer) => (target.output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (target.output += chunk.toString()));
  target.child = child;
  started.push(child);
}

function connect(target: Member): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port: target.port,
    password: target.role === 'server' ? PASSWORD : SENTINEL_PASSWORD,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // A member being stopped or not yet listening is an answer here (undefined), not an error to report.
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

/** One command to `target` on a connection of its own; undefined while it does not answer. */
async function ask(target: Member, ...command: [string, ...(string | number)[]]): Promise<unknown> {
  const client = connect(target);
  try {
    await client.connect();
    return await client.call(...command);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/** The primary `target` replicates, once its link is up; undefined otherwise. */
async function replicaOf(target: Member): Promise<string | undefined> {
  const role = (await ask(target, 'ROLE')) as [string, string, number, string] | undefined;
  return role?.[0] === 'slave' && role[3] === 'connected' ? `${role[1]}:${role[2]}` : undefined;
}

const roleOf = async (target: Member): Promise<string | undefined> =>
  ((await ask(target, 'ROLE')) as [string] | undefined)?.[0];

/** What `sentinel` knows of the primary (`SENTINEL MASTER`), as fields; undefined while it does not answer. */
async function sentinelView(sentinel: Member): Promise<Record<string, string> | undefined> {
  const fields = (await ask(sentinel, 'SENTINEL', 'master', MASTER)) as string[] | undefined;
  if (!Array.isArray(fields)) return undefined;
  const view: Record<string, string> = {};
  for (let index = 0; index + 1 < fields.length; index += 2) view[fields[index]!] = fields[index + 1]!;
  return view;
}

/** Where every running Sentinel says the primary is (one answer each). */
async function primaryPerSentinel(): Promise<(string | undefined)[]> {
  return Promise.all(
    sentinels
      .filter(({ child }) => child?.exitCode === null)
      .map(async (sentinel) => {
        const answer = (await ask(sentinel, 'SENTINEL', 'get-master-addr-by-name', MASTER)) as
          [string, string] | null | undefined;
        return answer === null || answer === undefined ? undefined : `${answer[0]}:${answer[1]}`;
      }),
  );
}

async function until(condition: () => Promise<boolean>, what: string, quietMs = 20_000): Promise<void> {
  let holds = false;
  await waitFor(
    () => holds,
    `${what}\n${[...servers, ...sentinels].map((m) => `--- ${m.name}\n${m.output.slice(-1500)}`).join('\n')}`,
    loadScaledMs(quietMs),
    async () => {
      holds = await condition();
    },
  );
}

async function allSentinelsSay(primary: Member): Promise<boolean> {
  const answers = await primaryPerSentinel();
  return answers.length === sentinels.length && answers.every((answer) => answer === primary.address);
}

describe('the event log’s Redis (deploy/kubernetes/redis-ha.sh)', () => {
  it('starts a primary and its replica, watched by three Sentinels that know each other', async () => {
    servers.push(await member('redis-0', 'server'), await member('redis-1', 'server'));
    sentinels.push(
      await member('sentinel-0', 'sentinel'),
      await member('sentinel-1', 'sentinel'),
      await member('sentinel-2', 'sentinel'),
    );
    for (const target of [...servers, ...sentinels]) start(target);
    const [first, second] = servers as [Member, Member];
    await until(
      async () => (await roleOf(first)) === 'master' && (await replicaOf(second)) === first.address,
      'the first server to be the primary and the second its replica, synchronised',
    );
    await until(() => allSentinelsSay(first), 'every Sentinel to watch the first server');
    // Each Sentinel knows the two others (they find each other through the primary) and the replica
    // (from the primary's INFO, asked every 10 s): a primary lost before they know a replica has no
    // successor.
    await until(async () => {
      const known = await Promise.all(sentinels.map((sentinel) => sentinelView(sentinel)));
      return known.every((view) => view?.['num-other-sentinels'] === '2' && view['num-slaves'] === '1');
    }, 'each Sentinel to know the two others and the replica');
    expect(first.output).toContain(`server ${first.address} starts as the primary`);
    expect(second.output).toContain(`server ${second.address} starts as a replica of ${first.address}`);

    // The passwords hold: no command without one, and none is in any output.
    const anonymous = new Redis({
      host: '127.0.0.1',
      port: first.port,
      lazyConnect: true,
      enableReadyCheck: false,
      retryStrategy: () => null,
    });
    anonymous.on('error', () => undefined);
    clients.push(anonymous);
    await anonymous.connect();
    await expect(anonymous.call('XLEN', 'events')).rejects.toThrow(/NOAUTH/);
    anonymous.disconnect();
    for (const target of [...servers, ...sentinels]) {
      expect(target.output).not.toContain(PASSWORD);
      expect(target.output).not.toContain(SENTINEL_PASSWORD);
    }
  });

  it('replaces a primary killed with SIGKILL by its replica, which holds every acknowledged write', async () => {
    const [first, second] = servers as [Member, Member];
    const primary = connect(first);
    await primary.connect();
    const ids: string[] = [];
    for (let index = 0; index < 50; index += 1) {
      ids.push((await primary.xadd('events', '*', 'n', String(index))) as string);
      // What the facade asks before it answers a webhook: held by one replica too.
      expect(await primary.call('WAIT', 1, 5000)).toBe(1);
    }
    primary.disconnect();
    first.child!.kill('SIGKILL');
    await once(first.child!, 'exit');

    await until(() => allSentinelsSay(second), 'every Sentinel to name the replica as the primary');
    expect(await roleOf(second)).toBe('master');
    const promoted = connect(second);
    await promoted.connect();
    expect((await promoted.xrange('events', '-', '+')).map(([id]) => id)).toEqual(ids);
    promoted.disconnect();
  });

  it('starts the old primary again as the new primary’s replica, with the same script', async () => {
    const [first, second] = servers as [Member, Member];
    start(first);
    await until(async () => {
      const role = (await ask(first, 'ROLE')) as [string, string, number, string] | undefined;
      return role?.[0] === 'slave' && `${role[1]}:${role[2]}` === second.address && role[3] === 'connected';
    }, 'the old primary to replicate the new one');
    expect(first.output).toContain(`server ${first.address} starts as a replica of ${second.address}`);
    const replica = connect(first);
    await replica.connect();
    expect(await replica.xlen('events')).toBe(50);
    replica.disconnect();
  });

  it('starts a Sentinel again watching the current primary, not counted twice', async () => {
    const [, second] = servers as [Member, Member];
    const restarted = sentinels[0]!;
    await stopProcess(restarted.child!);
    start(restarted);
    await until(() => allSentinelsSay(second), 'the restarted Sentinel to watch the current primary');
    expect(restarted.output).toContain(
      `sentinel ${restarted.address} watches ${MASTER} at ${second.address}`,
    );
    // Its id is derived from its name: the others still count two other Sentinels, not three.
    await new Promise((done) => setTimeout(done, 2_000));
    for (const sentinel of sentinels) {
      expect((await sentinelView(sentinel))?.['num-other-sentinels'], sentinel.name).toBe('2');
    }
  });

  it('replays the AOF when everything restarts at once', async () => {
    for (const target of [...sentinels, ...servers]) target.child!.kill('SIGKILL');
    await Promise.all([...sentinels, ...servers].map((target) => once(target.child!, 'exit')));
    // Nothing answers: the first server of the list starts as the primary, from its own AOF.
    const [first, second] = servers as [Member, Member];
    start(first);
    await until(async () => (await roleOf(first)) === 'master', 'the first server to start as the primary');
    const primary = connect(first);
    await primary.connect();
    expect(await primary.xlen('events')).toBe(50);
    primary.disconnect();
    start(second);
    for (const sentinel of sentinels) start(sentinel);
    await until(() => allSentinelsSay(first), 'the Sentinels to watch the first server again');
  });
});
