/**
 * `npm run gameday`: the whole deployment under faults, on one machine (docs/operations.md, "Game
 * day"). It starts the production topology from the shipped files (bench/gameday/topology.ts: the
 * Hive Gateway CLI with deploy/gateway.config.ts, three facade replicas from the image's own file
 * set behind a Service, Redis, the OpenID issuer, the emulator), runs a mixed load at once
 * (bench/gameday/load.ts), injects each fault in turn with a settle time after it
 * (bench/gameday/faults.ts), and prints one table from exact counts (bench/gameday/report.ts), also
 * written to bench/results/.
 *
 *   npm run gameday                                   # every fault, 30 s held and settled
 *   npm run gameday -- --fault redis-failover --duration 20
 *   npm run gameday -- --list                         # the faults, in order
 *
 * Options: `--fault <name>[,<name>...]` (repeatable; default every fault), `--duration <s>` (30:
 * how long a lasting fault is held, and the settle time after each fault and the baseline),
 * `--subscribers <n>` (300, a third per transport), `--watchers <n>` (50), `--query-rate <n/s>`
 * (10), `--mutation-rate <n/s>` (1), `--redis auto|single|sentinel` (auto: Sentinel when the
 * facade reads `REDIS_SENTINELS`), `--out <dir>` (bench/results), `--no-netns`.
 *
 * As root it runs in a network and PID namespace of its own (`unshare -n -p -f --mount-proc`,
 * loopback only), so its ports collide with nothing and the kernel ends whatever it started when it
 * ends; the image's file set is assembled before, outside (its `npm ci` may need the registry).
 * Without root, or with `--no-netns`, it runs here on free loopback ports. Either way every process
 * it started is stopped on a normal end, on an error and on Ctrl-C (SIGINT), SIGTERM or SIGHUP.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  assembleImageFileSet,
  fileSetAt,
  traversableBase,
  type ImageFileSet,
} from '../scripts/image-file-set.ts';
import { createChildren } from './gameday/children.ts';
import { FAULTS, type Fault } from './gameday/faults.ts';
import { REDIS_VARIANTS, type RedisVariant } from './gameday/redis-topology.ts';
import { runGameday, type GamedayOptions } from './gameday/run.ts';

const log = (line: string): void => {
  process.stdout.write(`[gameday ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
};

const { values } = parseArgs({
  options: {
    fault: { type: 'string', multiple: true },
    duration: { type: 'string', default: '30' },
    subscribers: { type: 'string', default: '300' },
    watchers: { type: 'string', default: '50' },
    'query-rate': { type: 'string', default: '10' },
    'mutation-rate': { type: 'string', default: '1' },
    redis: { type: 'string', default: 'auto' },
    out: { type: 'string', default: join(import.meta.dirname, 'results') },
    'no-netns': { type: 'boolean', default: false },
    list: { type: 'boolean', default: false },
    // Inside the namespaces: the file set the outer process assembled.
    'image-root': { type: 'string' },
  },
});

function positive(name: string, text: string | undefined): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`--${name} must be a positive number; got ${String(text)}`);
  return value;
}

function chosenFaults(): Fault[] {
  const names = (values.fault ?? []).flatMap((value) => value.split(',')).map((name) => name.trim());
  if (names.length === 0) return [...FAULTS];
  return names.map((name) => {
    const fault = FAULTS.find((candidate) => candidate.name === name);
    if (fault === undefined)
      throw new Error(
        `no fault "${name}"; the faults are ${FAULTS.map((candidate) => candidate.name).join(', ')}`,
      );
    return fault;
  });
}

function options(runDir: string): GamedayOptions {
  const redis = values.redis;
  if (redis !== 'auto' && !REDIS_VARIANTS.includes(redis as RedisVariant))
    throw new Error(`--redis must be auto, ${REDIS_VARIANTS.join(' or ')}; got ${redis}`);
  return {
    faults: chosenFaults(),
    durationMs: positive('duration', values.duration) * 1000,
    subscribers: Math.round(positive('subscribers', values.subscribers)),
    watchers: Math.round(positive('watchers', values.watchers)),
    queryRate: positive('query-rate', values['query-rate']),
    mutationRate: positive('mutation-rate', values['mutation-rate']),
    redis: redis as RedisVariant | 'auto',
    outDir: resolve(values.out),
    runDir,
  };
}

/** Whether this process can make the namespaces: root, with `unshare` and `ip`. */
function namespacesAvailable(): boolean {
  if (values['no-netns'] || process.getuid?.() !== 0) return false;
  return spawnSync('unshare', ['-n', '-p', '-f', '--mount-proc', 'true']).status === 0;
}

/** Runs the game day in this process; every process it starts is stopped before it returns. */
async function runHere(fileSet: ImageFileSet, removeFileSet: boolean): Promise<number> {
  const children = createChildren();
  const runDir = mkdtempSync(join(traversableBase(fileSet.user), 'gameday-'));
  chmodSync(runDir, 0o755);
  let stopping: Promise<void> | undefined;
  const stopEverything = (): Promise<void> =>
    (stopping ??= (async () => {
      await children.stopAll(5_000);
      rmSync(runDir, { recursive: true, force: true });
      if (removeFileSet) fileSet.remove();
    })());
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping everything`);
      void stopEverything().finally(() => process.exit(130));
    });
  }
  try {
    const settings = options(runDir);
    const { text, written } = await runGameday(fileSet, settings, children, log);
    process.stdout.write(`\n${text}\n`);
    log(`written: ${written.join(', ')}`);
    return 0;
  } catch (error) {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  } finally {
    await stopEverything();
    const left = children.alive();
    if (left.length > 0) log(`still running: ${left.map((child) => child.name).join(', ')}`);
  }
}

/** Runs this script again inside new network and PID namespaces; resolves with its exit code. */
function runInNamespaces(fileSet: ImageFileSet): Promise<number> {
  const args = process.argv.slice(2).filter((arg) => arg !== '--no-netns');
  const child = spawn(
    'unshare',
    [
      '-n',
      '-p',
      '-f',
      '--mount-proc',
      'sh',
      '-c',
      'ip link set lo up && exec "$0" "$@"',
      process.execPath,
      import.meta.filename,
      ...args,
      '--image-root',
      fileSet.root,
    ],
    { stdio: 'inherit' },
  );
  // Ctrl-C reaches the inner process itself (the same process group); other signals are passed on
  // to it (unshare ignores them while it waits).
  process.on('SIGINT', () => undefined);
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      try {
        const inner = readFileSync(`/proc/${String(child.pid)}/task/${String(child.pid)}/children`, 'utf8')
          .trim()
          .split(/\s+/)[0];
        if (inner !== undefined && inner !== '') process.kill(Number(inner), signal);
      } catch {
        // It has ended.
      }
    });
  }
  return new Promise((done) => child.once('exit', (code) => done(code ?? 1)));
}

async function main(): Promise<number> {
  if (values.list) {
    for (const fault of FAULTS) process.stdout.write(`${fault.name.padEnd(18)} ${fault.what}\n`);
    return 0;
  }
  const root = values['image-root'];
  if (root !== undefined) return runHere(fileSetAt(root), false);
  options('');
  log("assembling the image's file set (the Dockerfile's runtime stage)");
  const fileSet = await assembleImageFileSet();
  if (!namespacesAvailable()) return runHere(fileSet, true);
  log('running in a network and PID namespace of its own');
  try {
    return await runInNamespaces(fileSet);
  } finally {
    log("removing the image's file set");
    fileSet.remove();
  }
}

process.exitCode = await main();
