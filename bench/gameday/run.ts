/**
 * One game day: the topology (topology.ts) and the load (load.ts) started, the baseline measured,
 * each fault injected in turn with the settle time after it, then the webhooks left to finish and
 * the subscribers to catch up, and the table made from the emulator's record, the ledger and the
 * load's logs (report.ts). Every process it started is stopped by its caller through `children`.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ImageFileSet } from '../../scripts/image-file-set.ts';
import type { Children } from './children.ts';
import { ledgerMicros, recordDeliveries, toMicros, type EmulatorRecord } from './emulator-record.ts';
import type { Fault } from './faults.ts';
import type { CheckpointCounts, FromLoad, LoadConfig, LoadReport, ToLoad } from './load-protocol.ts';
import { facadeSupportsSentinel, type RedisVariant } from './redis-topology.ts';
import {
  analysePhase,
  detailsOf,
  receiptsOf,
  tableOf,
  type PhaseRecord,
  type PhaseWrites,
} from './report.ts';
import { ROOT } from './shipped.ts';
import {
  CUSTOMERS,
  LEDGER_KEY,
  PRODUCER_KEYS,
  startTopology,
  type Environment,
  type Topology,
} from './topology.ts';

export interface GamedayOptions {
  faults: readonly Fault[];
  /** How long a lasting fault is held, and the settle time after every fault and the baseline. */
  durationMs: number;
  /** Subscribers in all, a third per transport. */
  subscribers: number;
  watchers: number;
  queryRate: number;
  mutationRate: number;
  redis: RedisVariant | 'auto';
  /** Where the table and the figures are written. */
  outDir: string;
  /** A folder of this run's own that the image's user can traverse (Redis data, secrets, supergraph). */
  runDir: string;
}

/** The longest the end of the run waits for the platform's retries and the subscribers to catch up. */
const FINAL_SETTLE_MS = 180_000;

/** The load process and a way to ask it something. */
interface LoadProcess {
  child: ChildProcess;
  send(message: ToLoad): void;
  /** The next message of kind `op` (rejects if the load reports a failure or exits). */
  next<Op extends FromLoad['op']>(op: Op): Promise<Extract<FromLoad, { op: Op }>>;
}

function startLoad(log: (line: string) => void): LoadProcess {
  const child = fork(join(import.meta.dirname, 'load.ts'), [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting: { op: string; resolve(message: FromLoad): void; reject(error: Error): void }[] = [];
  const fail = (error: Error): void => {
    for (const waiter of waiting.splice(0)) waiter.reject(error);
  };
  child.on('message', (message: FromLoad) => {
    if (message.op === 'progress') log(message.line);
    else if (message.op === 'failed') fail(new Error(`the load failed: ${message.message}`));
    const index = waiting.findIndex((waiter) => waiter.op === message.op);
    if (index !== -1) waiting.splice(index, 1)[0]!.resolve(message);
  });
  child.on('exit', (code) => fail(new Error(`the load process exited (${String(code)})`)));
  return {
    child,
    send: (message) => child.send(message),
    next: <Op extends FromLoad['op']>(op: Op) =>
      new Promise<Extract<FromLoad, { op: Op }>>((resolve, reject) => {
        waiting.push({ op, resolve: resolve as (message: FromLoad) => void, reject });
      }),
  };
}

/** The checked-out commit, `-dirty` when files differ from it. */
function commitOf(): string {
  const git = (...args: string[]): string =>
    execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') === '' ? '' : '-dirty'}`;
  } catch {
    return 'unknown';
  }
}

/** Warning and error lines logged between two counts, by process. */
function loggedBetween(
  before: Record<string, Record<string, number>>,
  after: Record<string, Record<string, number>>,
): Record<string, Record<string, number>> {
  const logged: Record<string, Record<string, number>> = {};
  for (const [process, messages] of Object.entries(after)) {
    for (const [message, times] of Object.entries(messages)) {
      const more = times - (before[process]?.[message] ?? 0);
      if (more > 0 && /^(warn|error|fatal|text):/.test(message)) (logged[process] ??= {})[message] = more;
    }
  }
  return logged;
}

/** The ledger's account, read at the emulator with a key of its own. */
const readLedger = (topology: Topology): Promise<bigint> =>
  ledgerMicros(topology.emulatorUrl, LEDGER_KEY, CUSTOMERS.sandbox.customerId, CUSTOMERS.sandbox.accountId);

/** Closes a phase's writes: the load pauses them, the ledger is read, the load resumes. */
function createWriteBook(topology: Topology, load: LoadProcess, startMicros: bigint) {
  let lastMicros = startMicros;
  let id = 0;
  return async (): Promise<PhaseWrites> => {
    id += 1;
    load.send({ op: 'checkpoint', id });
    const { counts }: { counts: CheckpointCounts } = await load.next('checkpoint');
    const micros = await readLedger(topology);
    const delta = micros - lastMicros;
    lastMicros = micros;
    load.send({ op: 'resume' });
    return {
      acknowledged: counts.acknowledged,
      unresolved: counts.unresolved,
      applied: Number(delta / 1_000_000n),
      producerApplied: counts.producerApplied.sandbox,
      producerMicros: Number(delta % 1_000_000n),
    };
  };
}

/** Waits for the platform's retries to end (or {@link FINAL_SETTLE_MS}), then a little for the fan-out. */
async function finalSettle(record: EmulatorRecord, log: (line: string) => void): Promise<void> {
  const deadline = Date.now() + FINAL_SETTLE_MS;
  for (;;) {
    await record.refresh();
    const retrying = [...record.events().values()].filter((event) => event.state === 'retrying').length;
    if (retrying === 0 || Date.now() > deadline) {
      log(`settled: ${retrying} webhooks still being retried`);
      break;
    }
    await sleep(2_000);
  }
  await sleep(5_000);
  await record.refresh();
}

/** The baseline, then each fault in turn with the settle time after it; one record per phase. */
async function runPhases(
  topology: Topology,
  options: GamedayOptions,
  closeWrites: () => Promise<PhaseWrites>,
  log: (line: string) => void,
): Promise<PhaseRecord[]> {
  const phases: PhaseRecord[] = [];
  const schedule = [
    { name: 'baseline', what: 'no fault: the load alone', inject: () => Promise.resolve() },
    ...options.faults,
  ];
  for (const fault of schedule) {
    const before = topology.messages();
    const notes: string[] = [];
    log(`${fault.name}: ${fault.what}`);
    const phaseStart = Date.now();
    await fault.inject({ topology, holdMs: options.durationMs, note: (line) => notes.push(line) });
    const restoredAt = Date.now();
    for (const line of notes) log(`  ${line}`);
    await sleep(options.durationMs);
    const writes = await closeWrites();
    // New connections find no one while a Service has no ready endpoint: say so for every phase.
    for (const [name, service] of [
      ['facade', topology.service],
      ['gateway', topology.gatewayService],
    ] as const) {
      const emptyMs = service.emptyWithin(phaseStart, Date.now());
      if (emptyMs > 0)
        notes.push(`the ${name} Service had no ready endpoint for ${(emptyMs / 1000).toFixed(1)} s`);
    }
    phases.push({
      name: fault.name,
      what: fault.what,
      startedAt: phaseStart,
      restoredAt,
      endedAt: Date.now(),
      notes,
      writes,
      logged: loggedBetween(before, topology.messages()),
    });
  }
  return phases;
}

/** Writes the table (`.md`), the figures (`.json`) and the load's log (`.load.json`) under `name`. */
function writeReport(
  options: GamedayOptions,
  name: string,
  contents: { text: string; load: LoadReport; figures: unknown },
): string[] {
  mkdirSync(options.outDir, { recursive: true });
  const base = join(options.outDir, name);
  writeFileSync(`${base}.md`, contents.text);
  // Every operation, every subscription and every event each subscriber received: the evidence.
  writeFileSync(`${base}.load.json`, JSON.stringify(contents.load));
  writeFileSync(`${base}.json`, JSON.stringify(contents.figures, null, 2));
  return [`${base}.md`, `${base}.json`, `${base}.load.json`];
}

/** Runs the game day; returns the report's text and where it was written. */
export async function runGameday(
  fileSet: ImageFileSet,
  options: GamedayOptions,
  children: Children,
  log: (line: string) => void,
): Promise<{ text: string; written: string[] }> {
  const loadBefore = loadavg();
  const startedAt = new Date();
  const dir = options.runDir;
  // Mounted Secrets (scripts/key-rotation.ts) are made in the temporary folder: this run's own.
  process.env.TMPDIR = dir;
  const sentinel = facadeSupportsSentinel(join(ROOT, 'src'));
  const variant: RedisVariant = options.redis === 'auto' ? (sentinel ? 'sentinel' : 'single') : options.redis;
  const topology = await startTopology({
    children,
    fileSet,
    dir,
    redis: variant,
    throughSentinel: sentinel,
    log,
  });
  const record = recordDeliveries(topology.emulatorUrl, {
    [topology.webhookEndpoints.sandbox]: 'sandbox',
    [topology.webhookEndpoints.live]: 'live',
  });
  const load = startLoad(log);
  try {
    const tokens = {} as Record<Environment, string>;
    for (const environment of ['sandbox', 'live'] as const)
      tokens[environment] = await topology.issuer.token(`gameday-${environment}`);
    const third = Math.floor(options.subscribers / 3);
    const config: LoadConfig = {
      runId: `${Date.now()}`,
      gatewayUrl: topology.gatewayUrl,
      serviceUrl: topology.service.url,
      emulatorUrl: topology.emulatorUrl,
      tokens,
      producerKeys: { sandbox: PRODUCER_KEYS.sandbox.key, live: PRODUCER_KEYS.live.key },
      customers: CUSTOMERS,
      subscribers: { 'graphql-ws': options.subscribers - 2 * third, sse: third, multipart: third },
      liveShare: 0.2,
      watchers: options.watchers,
      queryRate: options.queryRate,
      mutationRate: options.mutationRate,
      producerIntervalMs: { sandbox: 500, live: 2_000 },
    };
    const live = load.next('live');
    load.send({ op: 'start', config });
    const { subscribers, watchers } = await live;
    log(`load live: ${subscribers} subscribers and ${watchers} @live watchers receiving`);
    const closeWrites = createWriteBook(topology, load, await readLedger(topology));
    await closeWrites();
    const measuredFrom = Date.now();

    const phases = await runPhases(topology, options, closeWrites, log);
    load.send({ op: 'stop' });
    await finalSettle(record, log);
    load.send({ op: 'report' });
    const { report }: { report: LoadReport } = await load.next('report');
    const finalLedger = await readLedger(topology);

    const sent = record.events();
    const rows = phases.map((phase, index) =>
      analysePhase(
        phase,
        phases[index + 1]?.startedAt ?? Number.POSITIVE_INFINITY,
        sent,
        report,
        measuredFrom,
      ),
    );
    const watchersStale = report.subscribers.filter((subscriber) => {
      if (subscriber.transport !== 'live-query') return false;
      const last = subscriber.received.at(-1)?.[0];
      return last === undefined || toMicros(last) !== finalLedger;
    });
    const unseen = report.subscribers.filter(
      (subscriber) => subscriber.transport !== 'live-query' && receiptsOf(subscriber).size === 0,
    ).length;
    const commit = commitOf();
    const text = [
      `## Game day on ${commit} (${startedAt.toISOString()})`,
      '',
      `Load average ${loadBefore.map((value) => value.toFixed(1)).join(' ')} before, ${loadavg()
        .map((value) => value.toFixed(1))
        .join(
          ' ',
        )} after; 2 cores shared. Redis: ${await topology.redis.describe()}. ${subscribers} subscribers (${config.subscribers['graphql-ws']} graphql-ws through the gateway, ${config.subscribers.sse} SSE and ${config.subscribers.multipart} multipart to the Service; ${Math.round(config.liveShare * 100)} % live callers), ${watchers} @live watchers, ${config.queryRate} queries/s and ${config.mutationRate} top-up/s through the gateway, platform changes every ${config.producerIntervalMs.sandbox} ms (sandbox) and ${config.producerIntervalMs.live} ms (live); faults held and settled ${options.durationMs / 1000} s.`,
      '',
      tableOf(rows),
      '',
      `@live watchers whose last answer is not the final balance: ${watchersStale.length} of ${watchers}; subscribers that never received an event: ${unseen}.`,
      '',
      detailsOf(rows, phases),
      '',
    ].join('\n');
    const written = writeReport(
      options,
      `gameday-${commit}-${startedAt.toISOString().replace(/[:.]/g, '-')}`,
      {
        text,
        load: report,
        figures: {
          commit,
          options: { ...options, faults: options.faults.map((fault) => fault.name) },
          phases,
          rows,
        },
      },
    );
    return { text, written };
  } finally {
    record.stop();
    load.send({ op: 'close' });
    await Promise.race([new Promise((resolve) => load.child.once('exit', resolve)), sleep(3_000)]);
    load.child.kill('SIGKILL');
    await topology.close();
  }
}
