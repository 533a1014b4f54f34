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
 * Options (environment): BENCH_TRANSPORTS_SUBSCRIBERS (1000 per transport),
 * BENCH_TRANSPORTS_EVENTS (10 per turn), BENCH_TRANSPORTS_ROUNDS (2), BENCH_FANOUT_CLIENT_PROCESSES
 * (2), and BENCH_FACADE_SCRIPT / BENCH_FANOUT_NODE_ARGS as for every live benchmark. The report
 * goes to bench/results/ (`fanout-transports-<time>.md`, `fanout-transports-latest.md` and `.json`).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import type { LiveClientTransport } from './fanout-clients.ts';
import {
  ACCOUNT_ID,
  accountUpdated,
  CUSTOMER_ID,
  postSigned,
  root,
  share,
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
const TRANSPORTS: readonly LiveClientTransport[] = ['graphql-ws', 'sse', 'multipart'];
const CONNECT_CONCURRENCY = 50;
const EVENT_TIMEOUT_MS = 60_000;
const EVENT_GAP_MS = 250;

const subscribers = positiveIntegerFromEnv('BENCH_TRANSPORTS_SUBSCRIBERS', 1000);
const events = positiveIntegerFromEnv('BENCH_TRANSPORTS_EVENTS', 10);
const rounds = positiveIntegerFromEnv('BENCH_TRANSPORTS_ROUNDS', 2);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);

const now = (): number => performance.timeOrigin + performance.now();

interface Turn {
  transport: LiveClientTransport;
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
}

interface TransportResult {
  transport: LiveClientTransport;
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
}

async function main(): Promise<void> {
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
        const turn = await runTurn(facade, clients, secret, transport, round);
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
  clients: readonly ClientProcess[],
  secret: string,
  transport: LiveClientTransport,
  round: number,
): Promise<Turn> {
  const label = `${transport}#${round}`;
  const before = await readMemory(facade, 'full');
  const replies = await Promise.all(
    clients.map((client, index) =>
      client.ask({
        op: 'connect',
        id: 0,
        transport,
        query: SUBSCRIPTION,
        concurrency: CONNECT_CONCURRENCY,
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
  // A subscription listens once the facade counts it.
  await waitFor(
    async () => (await transportCounts(facade, transport)).subscriptions >= subscribers - connectFailures,
    120_000,
  );
  await sleep(1_000);
  const connected = await readMemory(facade, 'full');
  const perSubscriberKib = (bytes: number): number =>
    bytes / 1024 / Math.max(1, subscribers - connectFailures);

  const sentAt = new Map<string, number>();
  const cpuBefore = await facade.cpuMs();
  for (let index = 0; index < events; index += 1) {
    const event = accountUpdated(index);
    sentAt.set(event.id, now());
    const answer = await postSigned(facade.url, secret, event);
    if (answer.status >= 300) throw new Error(`the webhook was answered ${answer.status}`);
    await Promise.all(
      clients.map((client) =>
        client.ask({ op: 'await-event', id: 0, eventId: event.id, timeoutMs: EVENT_TIMEOUT_MS }),
      ),
    );
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
    for (const [eventId, sent] of sentAt) {
      for (const at of reply.arrivals[`${label} ${eventId}`] ?? []) latencies.push(at - sent);
    }
  }
  await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
  await waitFor(async () => (await transportCounts(facade, transport)).connections === 0, 30_000);
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
  };
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
  ].join('\n');
}

await main();
