/**
 * `npm run bench:storm`: the facade's memory before, during and after a storm of subscribers.
 * 10,000 graphql-ws subscribers connect to one facade, receive a few events, and all leave; the
 * facade's RSS and V8 heap are read with nothing running yet (idle), with every subscriber
 * connected, at the storm's peak (RSS sampled every 100 ms through the events and the leaving),
 * right after the last one left, and after a settle period, each as a ratio to idle. The settled
 * reading is the one that counts: nothing outside the facade forces a garbage collection before it,
 * as nothing would in production; the facade's own idle-time memory release (MEMORY_RELEASE_*, on
 * by default: one memory-reducing collection once nothing has run for MEMORY_RELEASE_IDLE_MS, 15 s)
 * is part of what is measured, and its counts from `/metrics` are in the report. Only after it, as diagnostics, an ordinary full GC and V8's memory-reducing GC (the
 * facade runs with `--expose-gc` and `memory-probe.ts` here) tell what of the rest was garbage and
 * what was pages V8 kept. The facade's connection and subscription gauges after the leaving show
 * whether it still counts any of them.
 *
 * Each variant (a set of Node options for the facade) runs on a fresh facade over the same
 * emulator, one after the other, so their figures compare within one run. By default two: the
 * facade as configured (the release on) and `MEMORY_RELEASE_ENABLED=false`.
 *
 * Options (environment): BENCH_STORM_SUBSCRIBERS (10000), BENCH_STORM_EVENTS (5),
 * BENCH_STORM_IDLE_MS (10000: how long the fresh facade idles before the idle reading),
 * BENCH_STORM_SETTLE_MS (30000), BENCH_STORM_CLIENT_PROCESSES (2), BENCH_STORM_VARIANTS (Node
 * option sets separated by `;`, `default` for none, `NAME=value` words the facade's environment;
 * default `default;MEMORY_RELEASE_ENABLED=false`, e.g. also `--memory-saver-mode;MALLOC_ARENA_MAX=2`),
 * BENCH_STORM_HEAP_SNAPSHOTS (a directory: of the first variant, a heap snapshot at idle and one
 * after the settled reading, compared by constructor in the report; writing one collects garbage and
 * mallocs, so only the readings before it are unaffected), and those of `lib/live-facade.ts` (BENCH_FACADE_SCRIPT,
 * BENCH_FANOUT_NODE_ARGS). The report goes to bench/results/ (`storm-<time>.md`, `storm-latest.md`,
 * `storm-latest.json`) with the machine's load average before and after.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { readMemory, type MemoryReading } from './lib/facade-memory.ts';
import {
  compareHeapSummaries,
  summarizeHeapSnapshot,
  type ConstructorDifference,
} from './lib/heap-snapshot-summary.ts';
import {
  ACCOUNT_ID,
  accountUpdated,
  CUSTOMER_ID,
  facadeNodeArgs,
  memoryReleaseCounts,
  postSigned,
  root,
  share,
  startClientProcess,
  startFacade,
  waitForLiveCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { type ServiceProcess, startEmulatorService } from './processes.ts';

const SUBSCRIPTION = `subscription {
  accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}") {
    eventId type occurredAt account { id status balances { currency available } }
  }
}`;
const CONNECT_CONCURRENCY = 50;
const EVENT_TIMEOUT_MS = 60_000;
const EVENT_GAP_MS = 250;
const MIB = 1024 * 1024;

const subscribers = positiveIntegerFromEnv('BENCH_STORM_SUBSCRIBERS', 10_000);
const events = positiveIntegerFromEnv('BENCH_STORM_EVENTS', 5);
const idleMs = positiveIntegerFromEnv('BENCH_STORM_IDLE_MS', 10_000);
const settleMs = positiveIntegerFromEnv('BENCH_STORM_SETTLE_MS', 30_000);
const clientProcesses = positiveIntegerFromEnv('BENCH_STORM_CLIENT_PROCESSES', 2);
const heapSnapshotDir = process.env.BENCH_STORM_HEAP_SNAPSHOTS;
const variants = (process.env.BENCH_STORM_VARIANTS ?? 'default;MEMORY_RELEASE_ENABLED=false')
  .split(';')
  .map((variant) => variant.trim())
  .filter((variant) => variant !== '');

type Point = 'idle' | 'connected' | 'peak' | 'left' | 'settled' | 'afterGc' | 'afterReducingGc';
const POINTS: readonly Point[] = [
  'idle',
  'connected',
  'peak',
  'left',
  'settled',
  'afterGc',
  'afterReducingGc',
];
const POINT_NAMES: Record<Point, string> = {
  idle: 'idle, before the storm',
  connected: `${subscribers} connected`,
  peak: 'peak (events and leaving)',
  left: 'all left',
  settled: `settled (+${settleMs / 1000} s), no forced GC`,
  afterGc: 'diagnostic: after a full GC',
  afterReducingGc: 'diagnostic: after a memory-reducing GC',
};

type ReleaseCounts = Awaited<ReturnType<typeof memoryReleaseCounts>>;

interface VariantResult {
  variant: string;
  nodeArgs: string[];
  env: Record<string, string>;
  connected: number;
  connectFailures: number;
  received: number;
  expected: number;
  /** Facade CPU from the first connection to the last leaving. */
  stormCpuMs: number;
  memory: Partial<Record<Point, MemoryReading>>;
  /** RSS every 5 s of the settle period, from the moment the last subscriber left. */
  settleRssBytes: number[];
  openAfterLeaving: { connections: number; subscriptions: number };
  /** The idle-time memory release's counts when the last subscriber had left, and at the settled reading. */
  release: { left: ReleaseCounts; settled: ReleaseCounts };
  /** Each release the facade logged: its pause, and when it came after the last subscriber left. */
  releaseLines: { pauseMs: number; secondsAfterLeaving: number | undefined }[];
  /** With BENCH_STORM_HEAP_SNAPSHOTS: what grew between the idle and the settled snapshot. */
  heapGrowth?: ConstructorDifference[];
}

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const emulator = await startEmulatorService();
  const results: VariantResult[] = [];
  try {
    for (const variant of variants) {
      // `NAME=value` words are environment variables of the facade (glibc's MALLOC_* ...), the rest Node options.
      const words = variant === 'default' ? [] : variant.split(/\s+/);
      const env = Object.fromEntries(
        words.filter((word) => /^[A-Z_][A-Z0-9_]*=/.test(word)).map((word) => word.split(/=(.*)/s, 2)),
      ) as Record<string, string>;
      const nodeArgs = words.filter((word) => !/^[A-Z_][A-Z0-9_]*=/.test(word));
      console.log(`variant ${variant}: ${subscribers} subscribers, ${events} events`);
      results.push(await runVariant(emulator, variant, { nodeArgs, env }));
    }
  } finally {
    await emulator.stop();
  }
  const report = {
    at: new Date().toISOString(),
    cores: availableParallelism(),
    node: process.version,
    loadBefore,
    loadAfter: loadavg(),
    subscribers,
    events,
    idleMs,
    settleMs,
    facadeNodeArgs,
    results,
  };
  const markdown = toMarkdown(report);
  console.log(`\n${markdown}`);
  const dir = `${root}bench/results`;
  await mkdir(dir, { recursive: true });
  const stamp = report.at.replace(/[:.]/g, '-');
  await writeFile(`${dir}/storm-${stamp}.md`, markdown);
  await writeFile(`${dir}/storm-latest.md`, markdown);
  await writeFile(`${dir}/storm-latest.json`, `${JSON.stringify(report, null, 2)}\n`);
}

async function runVariant(
  emulator: ServiceProcess,
  variant: string,
  options: { nodeArgs: string[]; env: Record<string, string> },
): Promise<VariantResult> {
  const secret = generateWebhookSecret();
  const facade = await startFacade(emulator.url, secret, undefined, '', 1, options);
  // The facade's own line for each idle-time release: its pause, and when it came.
  const releaseLines: { time: number; pauseMs: number }[] = [];
  if (facade.child.stdout !== null) {
    createInterface({ input: facade.child.stdout }).on('line', (line) => {
      if (!line.includes('"memory released after idle"')) return;
      const entry = JSON.parse(line) as { time: string; pauseMs: number };
      releaseLines.push({ time: Date.parse(entry.time), pauseMs: entry.pauseMs });
    });
  }
  const clients: ClientProcess[] = [];
  const memory: Partial<Record<Point, MemoryReading>> = {};
  // Of the first variant only: the snapshots' own memory stays in the diagnostics that follow them.
  const snapshotPath = (point: string): string | undefined =>
    heapSnapshotDir === undefined || variants.indexOf(variant) !== 0
      ? undefined
      : `${heapSnapshotDir}/storm-${point}.heapsnapshot`;
  try {
    await sleep(idleMs);
    memory.idle = await readMemory(facade, 'none');
    const idleSnapshot = snapshotPath('idle');
    if (idleSnapshot !== undefined) await readMemory(facade, 'none', idleSnapshot);

    for (let index = 0; index < clientProcesses; index += 1) clients.push(startClientProcess());
    const cpuBefore = await facade.cpuMs();
    let peakRss = 0;
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        peakRss = Math.max(peakRss, await facade.rssBytes());
        await sleep(100);
      }
    })();

    const replies = await Promise.all(
      clients.map((client, index) =>
        client.ask({
          op: 'connect',
          id: 0,
          query: SUBSCRIPTION,
          concurrency: CONNECT_CONCURRENCY,
          groups: [
            {
              label: 'facade',
              wsUrl: `${facade.url.replace(/^http/, 'ws')}/graphql`,
              count: share(subscribers, clients.length, index),
            },
          ],
        }),
      ),
    );
    let connected = 0;
    let connectFailures = 0;
    for (const reply of replies) {
      if (reply.op !== 'connect') continue;
      connected += reply.connected;
      connectFailures += reply.failed;
      if (reply.firstError !== undefined) console.log(`  a connection failed: ${reply.firstError}`);
    }
    await waitForLiveCounts(facade, (counts) => counts.subscriptions >= connected, 120_000);
    console.log(`  ${connected} subscribed`);
    await sleep(1_000);
    memory.connected = await readMemory(facade, 'none');

    const eventIds: string[] = [];
    for (let index = 0; index < events; index += 1) {
      const event = accountUpdated(index);
      eventIds.push(event.id);
      const answer = await postSigned(facade.url, secret, event);
      if (answer.status >= 300) console.log(`  webhook answered ${answer.status}`);
      await Promise.all(
        clients.map((client) =>
          client.ask({ op: 'await-event', id: 0, eventId: event.id, timeoutMs: EVENT_TIMEOUT_MS }),
        ),
      );
      await sleep(EVENT_GAP_MS);
    }
    let received = 0;
    for (const client of clients) {
      const reply = await client.ask({ op: 'report', id: 0 });
      if (reply.op !== 'report') continue;
      for (const [key, times] of Object.entries(reply.arrivals)) {
        if (eventIds.some((id) => key.endsWith(` ${id}`))) received += times.length;
      }
    }

    await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
    const openAfterLeaving = await waitForLiveCounts(
      facade,
      (counts) => counts.connections === 0 && counts.subscriptions === 0,
      30_000,
    );
    sampling.on = false;
    await sampler;
    const stormCpuMs = (await facade.cpuMs()) - cpuBefore;
    memory.peak = { rssBytes: peakRss };
    const leftAt = Date.now();
    memory.left = await readMemory(facade, 'none');
    const releaseLeft = await memoryReleaseCounts(facade);
    console.log(`  all left; settling ${settleMs / 1000} s`);
    const settleRssBytes: number[] = [memory.left.rssBytes];
    const settleEnd = Date.now() + settleMs;
    while (Date.now() < settleEnd) {
      await sleep(Math.min(5_000, Math.max(0, settleEnd - Date.now())));
      settleRssBytes.push(await facade.rssBytes());
    }
    memory.settled = await readMemory(facade, 'none');
    const releaseSettled = await memoryReleaseCounts(facade);

    let heapGrowth: ConstructorDifference[] | undefined;
    const settledSnapshot = snapshotPath('settled');
    if (idleSnapshot !== undefined && settledSnapshot !== undefined) {
      await readMemory(facade, 'none', settledSnapshot);
      heapGrowth = compareHeapSummaries(
        await summarizeHeapSnapshot(idleSnapshot),
        await summarizeHeapSnapshot(settledSnapshot),
      );
    }
    memory.afterGc = await readMemory(facade, 'full');
    memory.afterReducingGc = await readMemory(facade, 'memory-reducing');
    return {
      variant,
      nodeArgs: options.nodeArgs,
      env: options.env,
      connected,
      connectFailures,
      received,
      expected: connected * events,
      stormCpuMs,
      memory,
      settleRssBytes,
      openAfterLeaving,
      release: { left: releaseLeft, settled: releaseSettled },
      releaseLines: releaseLines.map(({ time, pauseMs }) => ({
        pauseMs,
        secondsAfterLeaving: Math.round((time - leftAt) / 100) / 10,
      })),
      ...(heapGrowth === undefined ? {} : { heapGrowth }),
    };
  } finally {
    for (const client of clients) client.stop();
    await facade.stop();
  }
}

const mib = (bytes: number | undefined): string => (bytes === undefined ? '–' : (bytes / MIB).toFixed(0));
const ratio = (value: number | undefined, base: number | undefined): string =>
  value === undefined || base === undefined || base === 0 ? '–' : `${(value / base).toFixed(2)}×`;

function toMarkdown(report: {
  at: string;
  cores: number;
  node: string;
  loadBefore: number[];
  loadAfter: number[];
  results: VariantResult[];
}): string {
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(', ');
  const lines = [
    `# Memory after a storm of ${subscribers} subscribers (${report.at})`,
    '',
    `${report.cores} cores, Node ${report.node}; load average ${load(report.loadBefore)} before, ${load(report.loadAfter)} after. ` +
      `${events} events, idle reading after ${idleMs / 1000} s, settle ${settleMs / 1000} s.`,
    '',
    '| variant | idle RSS MiB | peak / idle | settled RSS MiB | **settled / idle** | idle-time releases (at leaving → settled) | released MiB | after a memory-reducing GC / idle (diagnostic) | facade CPU over the storm | deliveries |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...report.results.map((result) => {
      const { idle, peak, settled, afterReducingGc } = result.memory;
      const { left, settled: atSettle } = result.release;
      const releases = Number.isNaN(atSettle.armed)
        ? 'n/a'
        : atSettle.armed === 0
          ? 'off'
          : `${left.releases} → ${atSettle.releases}`;
      return (
        `| ${result.variant} | ${mib(idle?.rssBytes)} | ${ratio(peak?.rssBytes, idle?.rssBytes)} | ` +
        `${mib(settled?.rssBytes)} | **${ratio(settled?.rssBytes, idle?.rssBytes)}** | ${releases} | ` +
        `${atSettle.armed === 1 ? mib(atSettle.releasedBytes) : '–'} | ${ratio(afterReducingGc?.rssBytes, idle?.rssBytes)} | ` +
        `${(result.stormCpuMs / 1000).toFixed(1)} s | ${result.received} / ${result.expected} |`
      );
    }),
  ];
  for (const result of report.results) {
    const idle = result.memory.idle;
    lines.push(
      '',
      `## Variant: ${result.variant}`,
      '',
      `${result.connected} connected (${result.connectFailures} failed), deliveries ${result.received} / ${result.expected}, ` +
        `facade CPU over the storm ${(result.stormCpuMs / 1000).toFixed(1)} s; after leaving the facade counts ` +
        `${result.openAfterLeaving.connections} connections and ${result.openAfterLeaving.subscriptions} subscriptions.`,
      '',
      '| moment | RSS MiB | RSS / idle | heap used MiB | heap used / idle | heap committed MiB | external MiB | V8-page-sized mappings MiB | malloc [heap] MiB | other anonymous MiB |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const point of POINTS) {
      const reading = result.memory[point];
      if (reading === undefined) continue;
      lines.push(
        `| ${POINT_NAMES[point]} | ${mib(reading.rssBytes)} | ${ratio(reading.rssBytes, idle?.rssBytes)} | ` +
          `${mib(reading.heapUsedBytes)} | ${ratio(reading.heapUsedBytes, idle?.heapUsedBytes)} | ` +
          `${mib(reading.heapTotalBytes)} | ${mib(reading.externalBytes)} | ${mib(reading.mappings?.v8SizedPages)} | ` +
          `${mib(reading.mappings?.mallocMainArena)} | ${mib(reading.mappings?.otherAnonymous)} |`,
      );
    }
    lines.push(
      '',
      `RSS through the settle period, every 5 s from the leaving (MiB): ${result.settleRssBytes.map(mib).join(', ')}.`,
    );
    if (result.releaseLines.length > 0) {
      lines.push(
        '',
        `Idle-time releases logged: ${result.releaseLines
          .map(
            ({ pauseMs, secondsAfterLeaving }) =>
              `${pauseMs} ms pause, ${secondsAfterLeaving === undefined ? 'before' : `${secondsAfterLeaving} s after`} the last subscriber left`,
          )
          .join('; ')}.`,
      );
    }
    if (result.heapGrowth !== undefined) {
      const grown = result.heapGrowth.filter((entry) => entry.count !== 0).slice(0, 15);
      lines.push(
        '',
        'Heap snapshots, settled against idle, by constructor (largest growth in own bytes):',
        '',
        '| constructor | objects | own KiB |',
        '| --- | ---: | ---: |',
        ...grown.map(
          (entry) =>
            `| \`${entry.key.replaceAll('|', '\\|')}\` | ${entry.count > 0 ? '+' : ''}${entry.count} | ${(entry.selfBytes / 1024).toFixed(0)} |`,
        ),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

await main();
