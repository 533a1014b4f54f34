/**
 * `npm run bench:transports`: one webhook event's latency to many subscribers over each live
 * transport (graphql-ws, GraphQL over SSE, Apollo's multipart HTTP protocol), in one run against
 * one facade, as ratios to graphql-ws: the fan-out benchmark's method (`bench/fanout.ts`) with the
 * transport as the variable.
 *
 * The emulator, the facade and the subscribers run as separate processes on loopback; the
 * subscribers are real clients (graphql-ws's client on `ws`; Node's HTTP client reading SSE's and
 * multipart's framing), spread over child processes (`fanout-clients.ts`). Every subscriber of a
 * transport listens to the same `accountChanged`; the benchmark signs and posts `account.updated`
 * webhooks one after another (the next once every subscriber got the previous) and each subscriber
 * records when its result arrived on the machine-wide clock. The transports take turns in rounds
 * (forward, then reversed, ...) so that neither warm-up nor the machine's load favours one.
 *
 * Per transport: event → subscriber p50/p99/max over every round, deliveries against expected,
 * the facade's CPU per event, and each as a ratio to graphql-ws's; and the facade's memory per
 * subscriber: its V8 heap after a full GC and its RSS, read before the turn's subscribers connect
 * and once they all listen (the RSS of a later turn starts from pages the earlier ones left, so
 * the heap is the figure to compare).
 *
 * A fourth transport, `live`, is a `query @live` of the same account over graphql-ws, one watcher
 * per socket: its result changes only when the account does, so each of its events is a top-up at
 * the emulator and then the same signed webhook; its results carry no event id and are counted by
 * their number (the first answer, then one per event).
 *
 * Options (environment): BENCH_TRANSPORTS_SUBSCRIBERS (1000 per transport),
 * BENCH_TRANSPORTS_EVENTS (10 per turn), BENCH_TRANSPORTS_ROUNDS (2), BENCH_TRANSPORTS_LIST (the
 * transports, `graphql-ws,sse,multipart,live`; graphql-ws, the baseline of the ratios, always runs),
 * BENCH_TRANSPORTS_HEAP_SNAPSHOTS (a directory: in the first round, a heap snapshot of the facade
 * before each transport's subscribers connect and one once they listen, and what grew between them
 * by constructor, per subscriber), BENCH_FANOUT_CLIENT_PROCESSES (2), BENCH_FANOUT_SOURCE_ADDRESSES
 * (loopback addresses the subscribers connect from, as for `bench:fanout`), and BENCH_FACADE_SCRIPT /
 * BENCH_FANOUT_NODE_ARGS as for every live benchmark. The report goes to bench/results/
 * (`fanout-transports-<time>.md`, `fanout-transports-latest.md` and `.json`).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import type { LiveClientTransport } from './fanout-clients.ts';
import { compareHeapSummaries, summarizeHeapSnapshot } from './lib/heap-snapshot-summary.ts';
import {
  ACCOUNT_ID,
  accountUpdated,
  checkOpenFiles,
  topUp,
  CUSTOMER_ID,
  postSigned,
  root,
  share,
  sourceAddressesFor,
  startClientProcess,
  startFacade,
  transportCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { readMemory } from './lib/facade-memory.ts';
import { percentile } from './load.ts';
import { startEmulatorService, type ServiceProcess } from './processes.ts';

const SUBSCRIPTION = `subscription {
  accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}") {
    eventId type occurredAt account { id status balances { currency available } }
  }
}`;
/** The same account, as a live query: re-sent whenever the account's result changes. */
const LIVE_QUERY = `query @live {
  account(customerId: "${CUSTOMER_ID}", id: "${ACCOUNT_ID}") { id status balances { currency available } }
}`;

/** A transport of this benchmark: a client transport, or `live` (a `query @live` over graphql-ws). */
type BenchTransport = LiveClientTransport | 'live';
const ALL_TRANSPORTS: readonly BenchTransport[] = ['graphql-ws', 'sse', 'multipart', 'live'];
const TRANSPORTS: readonly BenchTransport[] = [
  'graphql-ws',
  ...(process.env.BENCH_TRANSPORTS_LIST ?? ALL_TRANSPORTS.join(','))
    .split(',')
    .map((name) => name.trim())
    .filter((name): name is BenchTransport => {
      if (!(ALL_TRANSPORTS as readonly string[]).includes(name)) {
        throw new Error(`BENCH_TRANSPORTS_LIST: unknown transport ${name}`);
      }
      return name !== 'graphql-ws';
    }),
];
const heapSnapshotDir = process.env.BENCH_TRANSPORTS_HEAP_SNAPSHOTS;
const CONNECT_CONCURRENCY = 50;
const EVENT_TIMEOUT_MS = 60_000;
const EVENT_GAP_MS = 250;

const subscribers = positiveIntegerFromEnv('BENCH_TRANSPORTS_SUBSCRIBERS', 1000);
const events = positiveIntegerFromEnv('BENCH_TRANSPORTS_EVENTS', 10);
const rounds = positiveIntegerFromEnv('BENCH_TRANSPORTS_ROUNDS', 2);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);

const now = (): number => performance.timeOrigin + performance.now();

interface Turn {
  transport: BenchTransport;
  round: number;
  /** Event → subscriber, every arrival of this turn. */
  latencies: number[];
  expected: number;
  connectFailures: number;
  facadeCpuMs: number;
  /** What the facade held per subscriber once they all listened, in KiB (heap after a full GC, RSS). */
  heapKibPerSubscriber: number;
  rssKibPerSubscriber: number;
  errors: number;
  firstError?: string;
  /** With BENCH_TRANSPORTS_HEAP_SNAPSHOTS: what grew while the subscribers connected, per subscriber. */
  heapGrowth?: { key: string; perSubscriber: number; bytesPerSubscriber: number }[];
}

interface TransportResult {
  transport: BenchTransport;
  received: number;
  expected: number;
  latency: { p50Ms: number; p99Ms: number; maxMs: number };
  facadeCpuMsPerEvent: number;
  /** The medians over the turns. */
  heapKibPerSubscriber: number;
  rssKibPerSubscriber: number;
  /** To graphql-ws's, in this run. */
  ratios: { p50: number; p99: number; facadeCpu: number; heap: number };
  connectFailures: number;
  errors: number;
  firstError?: string;
  heapGrowth?: Turn['heapGrowth'];
}

async function main(): Promise<void> {
  // Every streamed subscriber is a socket of the facade's: refuse a run its open-file limit would cut short.
  await checkOpenFiles(subscribers, clientProcesses);
  const loadAverageBefore = loadavg();
  const started = new Date();
  const emulator = await startEmulatorService();
  const secret = generateWebhookSecret();
  const clients: ClientProcess[] = [];
  let facade: ServiceProcess | undefined;
  const turns: Turn[] = [];
  try {
    facade = await startFacade(emulator.url, secret, undefined, `bench-transports-${process.pid}:`, 1);
    for (let index = 0; index < clientProcesses; index += 1) clients.push(startClientProcess());
    for (let round = 0; round < rounds; round += 1) {
      const order = round % 2 === 0 ? TRANSPORTS : [...TRANSPORTS].reverse();
      for (const transport of order) {
        const turn = await runTurn(facade, emulator, clients, secret, transport, round);
        turns.push(turn);
        const sorted = [...turn.latencies].sort((a, b) => a - b);
        console.log(
          `round ${round + 1} ${transport}: ${turn.latencies.length}/${turn.expected} delivered, ` +
            `p50 ${percentile(sorted, 0.5).toFixed(0)} ms, p99 ${percentile(sorted, 0.99).toFixed(0)} ms`,
        );
      }
    }
  } finally {
    for (const client of clients) client.stop();
    await facade?.stop();
    await emulator.stop();
  }

  const results = summarise(turns);
  const report = {
    at: started.toISOString(),
    machine: {
      cores: availableParallelism(),
      node: process.version,
      loadAverageBefore,
      loadAverageAfter: loadavg(),
    },
    settings: {
      subscribers,
      events,
      rounds,
      clientProcesses,
      subscription: SUBSCRIPTION.replace(/\s+/g, ' '),
    },
    transports: results,
  };
  const markdown = toMarkdown(report);
  console.log(`\n${markdown}`);
  await mkdir(`${root}bench/results`, { recursive: true });
  const stamp = report.at.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
  await writeFile(`${root}bench/results/fanout-transports-${stamp}.md`, markdown);
  await writeFile(`${root}bench/results/fanout-transports-latest.md`, markdown);
  await writeFile(
    `${root}bench/results/fanout-transports-latest.json`,
    `${JSON.stringify(report, null, 2)}\n`,
  );
}

/** One transport's turn: subscribe every subscriber, send the events one after another, leave. */
async function runTurn(
  facade: ServiceProcess,
  emulator: ServiceProcess,
  clients: readonly ClientProcess[],
  secret: string,
  transport: BenchTransport,
  round: number,
): Promise<Turn> {
  const label = `${transport}#${round}`;
  const live = transport === 'live';
  // The facade counts a live query's watchers as graphql-ws's subscriptions.
  const counted = live ? 'graphql-ws' : transport;
  const snapshotOf = (point: string): string | undefined =>
    heapSnapshotDir === undefined || round > 0
      ? undefined
      : `${heapSnapshotDir}/transports-${transport}-${point}.heapsnapshot`;
  const before = await readMemory(facade, 'full', snapshotOf('before'));
  const replies = await Promise.all(
    clients.map((client, index) =>
      client.ask({
        op: 'connect',
        id: 0,
        transport: live ? 'graphql-ws' : transport,
        query: live ? LIVE_QUERY : SUBSCRIPTION,
        concurrency: CONNECT_CONCURRENCY,
        // Each turn's closed connections wait in TIME_WAIT on their source ports for a minute.
        sourceAddresses: sourceAddressesFor(subscribers),
        groups: [
          {
            label,
            wsUrl: `${facade.url.replace(/^http/, 'ws')}/graphql`,
            count: share(subscribers, clients.length, index),
          },
        ],
      }),
    ),
  );
  const connectFailures = replies.reduce(
    (sum, reply) => sum + (reply.op === 'connect' ? reply.failed : 0),
    0,
  );
  // A subscription listens once the facade counts it; a live query's watcher holds its first answer.
  await waitFor(
    async () => (await transportCounts(facade, counted)).subscriptions >= subscribers - connectFailures,
    120_000,
  );
  if (live) await awaitResult(clients, 'result-1');
  await sleep(1_000);
  const connected = await readMemory(facade, 'full', snapshotOf('connected'));
  const perSubscriberKib = (bytes: number): number =>
    bytes / 1024 / Math.max(1, subscribers - connectFailures);

  const sentAt = new Map<string, number>();
  const cpuBefore = await facade.cpuMs();
  for (let index = 0; index < events; index += 1) {
    const event = accountUpdated(index);
    // A live query's result changes only with the account: the top-up the webhook tells of.
    if (live) await topUp(emulator.url);
    const resultId = live ? `result-${index + 2}` : event.id;
    sentAt.set(resultId, now());
    const answer = await postSigned(facade.url, secret, event);
    if (answer.status >= 300) throw new Error(`the webhook was answered ${answer.status}`);
    await awaitResult(clients, resultId);
    await sleep(EVENT_GAP_MS);
  }
  const facadeCpuMs = (await facade.cpuMs()) - cpuBefore;

  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  for (const reply of await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })))) {
    if (reply.op !== 'report') continue;
    errors += reply.errors;
    firstError ??= reply.firstError;
    for (const [resultId, sent] of sentAt) {
      for (const at of reply.arrivals[`${label} ${resultId}`] ?? []) latencies.push(at - sent);
    }
  }
  await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
  await waitFor(async () => (await transportCounts(facade, counted)).connections === 0, 30_000);
  const listening = Math.max(1, subscribers - connectFailures);
  const snapshots = [snapshotOf('before'), snapshotOf('connected')];
  return {
    transport,
    round,
    latencies,
    expected: subscribers * events,
    connectFailures,
    facadeCpuMs,
    heapKibPerSubscriber: perSubscriberKib(
      (connected.heapUsedBytes ?? Number.NaN) - (before.heapUsedBytes ?? Number.NaN),
    ),
    rssKibPerSubscriber: perSubscriberKib(connected.rssBytes - before.rssBytes),
    errors,
    ...(firstError === undefined ? {} : { firstError }),
    ...(snapshots[0] === undefined || snapshots[1] === undefined
      ? {}
      : { heapGrowth: await heapGrowthPerSubscriber(snapshots[0], snapshots[1], listening) }),
  };
}

/** Waits until every subscriber of every client process received `resultId` (or the timeout). */
async function awaitResult(clients: readonly ClientProcess[], resultId: string): Promise<void> {
  await Promise.all(
    clients.map((client) =>
      client.ask({ op: 'await-event', id: 0, eventId: resultId, timeoutMs: EVENT_TIMEOUT_MS }),
    ),
  );
}

/** Constructors that grew by at least one object per 20 subscribers, largest growth first. */
async function heapGrowthPerSubscriber(
  beforePath: string,
  afterPath: string,
  listening: number,
): Promise<NonNullable<Turn['heapGrowth']>> {
  const growth = compareHeapSummaries(
    await summarizeHeapSnapshot(beforePath),
    await summarizeHeapSnapshot(afterPath),
  );
  return growth
    .filter((entry) => entry.count * 20 >= listening)
    .map((entry) => ({
      key: entry.key,
      perSubscriber: entry.count / listening,
      bytesPerSubscriber: entry.selfBytes / listening,
    }));
}

/** Every round of each transport together, and each as a ratio to graphql-ws. */
function summarise(turns: readonly Turn[]): TransportResult[] {
  const byTransport = TRANSPORTS.map((transport) => {
    const own = turns.filter((turn) => turn.transport === transport);
    const latencies = own.flatMap((turn) => turn.latencies).sort((a, b) => a - b);
    const firstError = own.find((turn) => turn.firstError !== undefined)?.firstError;
    return {
      transport,
      received: latencies.length,
      expected: own.reduce((sum, turn) => sum + turn.expected, 0),
      latency: {
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
        maxMs: latencies.at(-1) ?? Number.NaN,
      },
      facadeCpuMsPerEvent: own.reduce((sum, turn) => sum + turn.facadeCpuMs, 0) / (own.length * events),
      heapKibPerSubscriber: median(own.map((turn) => turn.heapKibPerSubscriber)),
      rssKibPerSubscriber: median(own.map((turn) => turn.rssKibPerSubscriber)),
      connectFailures: own.reduce((sum, turn) => sum + turn.connectFailures, 0),
      errors: own.reduce((sum, turn) => sum + turn.errors, 0),
      ...(firstError === undefined ? {} : { firstError }),
      ...(own[0]?.heapGrowth === undefined ? {} : { heapGrowth: own[0].heapGrowth }),
    };
  });
  const baseline = byTransport[0]!;
  return byTransport.map((result) => ({
    ...result,
    ratios: {
      p50: result.latency.p50Ms / baseline.latency.p50Ms,
      p99: result.latency.p99Ms / baseline.latency.p99Ms,
      facadeCpu: result.facadeCpuMsPerEvent / baseline.facadeCpuMsPerEvent,
      heap: result.heapKibPerSubscriber / baseline.heapKibPerSubscriber,
    },
  }));
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN;
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await sleep(200);
  }
}

function toMarkdown(report: {
  at: string;
  machine: { cores: number; node: string; loadAverageBefore: number[]; loadAverageAfter: number[] };
  settings: { subscribers: number; events: number; rounds: number; clientProcesses: number };
  transports: readonly TransportResult[];
}): string {
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(', ');
  const ms = (value: number): string => (Number.isNaN(value) ? '–' : value.toFixed(0));
  const ratio = (value: number): string => (Number.isNaN(value) ? '–' : `${value.toFixed(2)}×`);
  const { settings } = report;
  return [
    `Run at ${report.at} on ${report.machine.cores} cores, Node ${report.machine.node}; load average (1, 5, 15 min) ` +
      `${load(report.machine.loadAverageBefore)} before, ${load(report.machine.loadAverageAfter)} after. ` +
      `${settings.subscribers} subscribers per transport, ${settings.events} events per turn, ${settings.rounds} rounds ` +
      `(the transports in turn, the order reversed each round), subscribers spread over ${settings.clientProcesses} client processes.`,
    '',
    '| transport | delivered / expected | event → subscriber p50 / p99 / max ms | p50 / p99 to graphql-ws | facade CPU ms / event | to graphql-ws | KiB per subscriber: heap after GC / RSS | heap to graphql-ws |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
    ...report.transports.map(
      (result) =>
        `| ${result.transport} | ${result.received} / ${result.expected} | ${ms(result.latency.p50Ms)} / ${ms(result.latency.p99Ms)} / ${ms(result.latency.maxMs)} ` +
        `| ${ratio(result.ratios.p50)} / ${ratio(result.ratios.p99)} | ${ms(result.facadeCpuMsPerEvent)} | ${ratio(result.ratios.facadeCpu)} ` +
        `| ${result.heapKibPerSubscriber.toFixed(1)} / ${result.rssKibPerSubscriber.toFixed(1)} | ${ratio(result.ratios.heap)} |`,
    ),
    '',
    ...report.transports
      .filter((result) => result.errors > 0 || result.connectFailures > 0)
      .map(
        (result) =>
          `${result.transport}: ${result.connectFailures} connections failed, ${result.errors} errors; the first: ${result.firstError ?? '–'}`,
      ),
    ...report.transports.flatMap((result) => heapGrowthMarkdown(result)),
  ].join('\n');
}

/** What grew in the heap while a transport's subscribers connected, per subscriber (own sizes). */
function heapGrowthMarkdown(result: TransportResult): string[] {
  if (result.heapGrowth === undefined) return [];
  const total = result.heapGrowth.reduce((sum, entry) => sum + entry.bytesPerSubscriber, 0);
  return [
    '',
    `${result.transport}, heap snapshots (first round): objects grown per subscriber by constructor, ` +
      `${(total / 1024).toFixed(1)} KiB of own size in all of these`,
    '',
    '| constructor | objects / subscriber | bytes / subscriber |',
    '|---|--:|--:|',
    ...result.heapGrowth
      .filter((entry) => entry.bytesPerSubscriber >= 8)
      .map(
        (entry) =>
          `| ${entry.key.replaceAll('|', '\\|')} | ${entry.perSubscriber.toFixed(2)} | ${entry.bytesPerSubscriber.toFixed(0)} |`,
      ),
  ];
}

await main();
