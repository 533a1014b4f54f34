/**
 * `npm run bench:fanout`: what one webhook event costs when many subscribers listen to the same
 * thing, from the signed delivery to every subscriber's `next`, and what the facade's memory does as
 * thousands of subscribers connect, idle, receive and leave.
 *
 * The emulator, the facade (one, or two replicas sharing a real Redis) and the subscribers run as
 * separate processes on loopback; the subscribers are real graphql-ws clients (one WebSocket each,
 * the `ws` package) spread over child processes (`fanout-clients.ts`) so the client side is not
 * what is measured. All listen to the same `accountChanged` of one customer's account, whose event
 * makes the facade read the account. The benchmark signs and posts `account.updated` webhooks one
 * after another (the next once every subscriber got the previous), recording when it sent each and
 * when the 2xx ack came back; each subscriber records when its `next` arrived, on the machine-wide
 * clock (`performance.timeOrigin + performance.now()`), so latencies compare across processes.
 *
 * Per scenario: upstream GETs per event (counted by the emulator), event → subscriber p50/p99/max,
 * the webhook's ack time, deliveries received against expected (exactly once, none missing), the
 * CPU of the facades and of the client processes during the events, and the facade's RSS (from
 * /proc) before any subscriber, with all idle, at its peak (events and disconnections), right after they all
 * disconnected, after `BENCH_FANOUT_SETTLE_MS`, and after a forced full GC; with the V8 heap beside
 * each (the facade runs with `--expose-gc` and `memory-probe.ts`, which answers over IPC).
 *
 * Options (environment): BENCH_FANOUT_SCENARIOS (`small,large,redis`, the default, or any of them),
 * BENCH_FANOUT_SMALL (1000 subscribers), BENCH_FANOUT_LARGE (10000), BENCH_FANOUT_PER_REPLICA (500
 * on each of two replicas), BENCH_FANOUT_EVENTS (10 per scenario), BENCH_FANOUT_CLIENT_PROCESSES
 * (2), BENCH_FANOUT_SETTLE_MS (5000), BENCH_FANOUT_NODE_ARGS (extra Node options of the facade, e.g.
 * `--max-semi-space-size=4`), BENCH_FANOUT_HOLD_MS (keep the facades that long at the end of each
 * scenario, to look at them from outside), BENCH_FANOUT_HEAP_SNAPSHOTS (a directory: heap snapshots
 * of each facade with its subscribers idle and after the GC that follows their leaving),
 * BENCH_FACADE_SCRIPT (the facade's entry point: another checkout's `src/main.ts` to compare two
 * versions), BENCH_FANOUT_PER_CONNECTION (subscriptions per graphql-ws connection, 1: past the
 * process's open-file limit, 50,000 subscribers are held on fewer sockets), BENCH_FANOUT_SOURCE_ADDRESSES
 * (loopback source addresses, one per 20,000 connections by default), BENCH_FANOUT_PROFILE (a
 * directory: each facade runs with `--cpu-prof` and the report charges its CPU over the events to
 * the steps of a delivery, `lib/delivery-profile.ts`). Environment variables the facade reads (e.g.
 * `MALLOC_ARENA_MAX`) pass through. The report goes to bench/results/ (`fanout-<time>.md`,
 * `fanout-latest.md`, `fanout-latest.json`) with the machine's load average before and after.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import {
  ACCOUNT_SUBSCRIPTION,
  accountUpdated,
  facadeNodeArgs,
  facadeScript,
  postSigned,
  root,
  checkOpenFiles,
  share,
  sourceAddressesFor,
  startClientProcess,
  startFacade,
  upstreamRequests,
  waitForLiveCounts,
  type ClientProcess,
  readFanoutMetrics,
  type FacadeFanoutReading,
} from './lib/live-facade.ts';
import { percentile } from './load.ts';
import { readMemory, type MemoryReading } from './lib/facade-memory.ts';
import { DELIVERY_STEPS, NATIVE_DELIVERY_STEPS } from './lib/delivery-profile.ts';
import { microsecondsNow, summariseProfile, type CpuProfile } from './lib/cpu-profile.ts';
import type { GarbageCollection } from './memory-probe-protocol.ts';
import { readCpuMs, readCpuSplitMs, type ServiceProcess, startEmulatorService } from './processes.ts';
import { startRedisServer, type RedisServer } from '../scripts/redis-server.ts';

const SUBSCRIPTION = ACCOUNT_SUBSCRIPTION;
/** Connections each client process opens at once. */
const CONNECT_CONCURRENCY = 50;
/** Longest wait for every subscriber to receive one event before the run goes on without it. */
const EVENT_TIMEOUT_MS = 60_000;
/** Pause after every subscriber got an event, so reads still running end before the next one. */
const EVENT_GAP_MS = 250;

const events = positiveIntegerFromEnv('BENCH_FANOUT_EVENTS', 10);
const small = positiveIntegerFromEnv('BENCH_FANOUT_SMALL', 1000);
const large = positiveIntegerFromEnv('BENCH_FANOUT_LARGE', 10_000);
const perReplica = positiveIntegerFromEnv('BENCH_FANOUT_PER_REPLICA', 500);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);
const settleMs = positiveIntegerFromEnv('BENCH_FANOUT_SETTLE_MS', 5000);
const holdMs = Number(process.env.BENCH_FANOUT_HOLD_MS ?? 0);
const heapSnapshotDir = process.env.BENCH_FANOUT_HEAP_SNAPSHOTS;
const perConnection = positiveIntegerFromEnv('BENCH_FANOUT_PER_CONNECTION', 1);
const profileDir = process.env.BENCH_FANOUT_PROFILE;
const wanted = (process.env.BENCH_FANOUT_SCENARIOS ?? 'small,large,redis').split(',').map((s) => s.trim());

const now = (): number => performance.timeOrigin + performance.now();
const MIB = 1024 * 1024;

interface Scenario {
  key: string;
  name: string;
  replicas: number;
  subscribersPerReplica: number;
  redis: boolean;
}

type MemoryPoint = 'before' | 'idle' | 'peak' | 'disconnected' | 'settled' | 'afterGc' | 'afterReducingGc';

interface ReplicaResult {
  label: string;
  subscribers: number;
  /** Deliveries of distinct (subscriber, event) pairs received, and expected. */
  received: number;
  expected: number;
  latency: { p50Ms: number; p99Ms: number; maxMs: number };
  facadeCpuMs: number;
  /** Of it, the kernel's on the facade's behalf (its system calls: the socket writes, mostly). */
  facadeSystemCpuMs: number;
  memory: Partial<Record<MemoryPoint, MemoryReading>>;
  /** Connections and subscriptions the facade still counted once every client had disconnected. */
  openAfterDisconnect: { connections: number; subscriptions: number };
  /** The facade's own account of the events: its longest event-loop delay, its deliveries' ages. */
  facadeSide: FacadeFanoutReading;
}

interface ScenarioResult {
  key: string;
  name: string;
  subscribers: number;
  events: number;
  /** Upstream GETs per event, in the order the events were sent. */
  upstreamRequestsPerEvent: number[];
  /** Upstream GETs while the subscribers subscribed (each reads the customer once). */
  upstreamRequestsToSubscribe: number;
  ack: { p50Ms: number; maxMs: number; statuses: number[] };
  /** For two replicas: how the other replica answered the same delivery (de-duplication). */
  redeliveryStatuses?: { status: number; duplicate: unknown }[];
  duplicates: number;
  errors: number;
  firstError?: string;
  connectFailures: number;
  connectSeconds: number;
  clientCpuMs: number;
  replicas: ReplicaResult[];
  /** With BENCH_FANOUT_PROFILE: each replica's CPU per delivery by step, as markdown. */
  profiles?: string[];
}

async function main(): Promise<void> {
  const loadAverageBefore = loadavg();
  const started = new Date();
  const scenarios: Scenario[] = [
    {
      key: 'small',
      name: `${small} subscribers, one facade`,
      replicas: 1,
      subscribersPerReplica: small,
      redis: false,
    },
    {
      key: 'large',
      name: `${large} subscribers, one facade`,
      replicas: 1,
      subscribersPerReplica: large,
      redis: false,
    },
    {
      key: 'redis',
      name: `2 × ${perReplica} subscribers, two replicas through Redis`,
      replicas: 2,
      subscribersPerReplica: perReplica,
      redis: true,
    },
  ].filter((scenario) => wanted.includes(scenario.key));
  if (scenarios.length === 0) throw new Error('BENCH_FANOUT_SCENARIOS names none of small, large, redis.');

  const emulator = await startEmulatorService();
  let redis: RedisServer | undefined;
  const results: ScenarioResult[] = [];
  try {
    for (const scenario of scenarios) {
      if (scenario.redis) redis ??= await startRedisServer();
      console.log(`\n${scenario.name}: starting`);
      const result = await runScenario(scenario, emulator, redis?.url);
      results.push(result);
      console.log(summaryLine(result));
    }
  } finally {
    await redis?.stop();
    await emulator.stop();
  }

  const report = {
    at: started.toISOString(),
    machine: {
      cores: availableParallelism(),
      node: process.version,
      loadAverageBefore,
      loadAverageAfter: loadavg(),
    },
    settings: {
      events,
      clientProcesses,
      settleMs,
      facadeScript,
      facadeNodeArgs,
      mallocArenaMax: process.env.MALLOC_ARENA_MAX ?? null,
      subscription: SUBSCRIPTION.replace(/\s+/g, ' '),
    },
    scenarios: results,
  };
  const markdown = toMarkdown(report);
  console.log(`\n${markdown}`);
  await mkdir(`${root}bench/results`, { recursive: true });
  const stamp = report.at.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
  await writeFile(`${root}bench/results/fanout-${stamp}.md`, markdown);
  await writeFile(`${root}bench/results/fanout-latest.md`, markdown);
  await writeFile(`${root}bench/results/fanout-latest.json`, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`written to bench/results/fanout-${stamp}.md (and fanout-latest.md, fanout-latest.json)`);
}

async function runScenario(
  scenario: Scenario,
  emulator: ServiceProcess,
  redisUrl: string | undefined,
): Promise<ScenarioResult> {
  const secret = generateWebhookSecret();
  const redisKeyPrefix = `bench-fanout-${process.pid}-${scenario.key}:`;
  const facades: ServiceProcess[] = [];
  const clients: ClientProcess[] = [];
  const connections = Math.ceil(scenario.subscribersPerReplica / perConnection);
  await checkOpenFiles(connections * scenario.replicas, clientProcesses);
  let result: ScenarioResult;
  /** The events' window on the monotonic clock, for the profiles. */
  const window: [number, number] = [0, 0];
  try {
    for (let replica = 0; replica < scenario.replicas; replica += 1) {
      const profile =
        profileDir === undefined
          ? {}
          : {
              nodeArgs: [
                '--cpu-prof',
                `--cpu-prof-dir=${profileDirOf(scenario, replica)}`,
                '--cpu-prof-interval=500',
              ],
            };
      facades.push(await startFacade(emulator.url, secret, redisUrl, redisKeyPrefix, replica + 1, profile));
    }
    for (let index = 0; index < clientProcesses; index += 1) clients.push(startClientProcess());

    const memory = facades.map((): Partial<Record<MemoryPoint, MemoryReading>> => ({}));
    const readAll = async (point: MemoryPoint, collectGarbage: GarbageCollection = 'none'): Promise<void> => {
      await Promise.all(
        facades.map(async (facade, index) => {
          const snapshot =
            heapSnapshotDir !== undefined && (point === 'idle' || point === 'afterGc')
              ? `${heapSnapshotDir}/fanout-${scenario.key}-${labelOf(index).replace(' ', '-')}-${point}.heapsnapshot`
              : undefined;
          memory[index]![point] = await readMemory(facade, collectGarbage, snapshot);
        }),
      );
    };
    await readAll('before');

    // Subscribe: every replica's subscribers spread evenly over the client processes.
    const upstreamBeforeSubscribing = await upstreamRequests(emulator);
    const connectStarted = now();
    const connectReplies = await Promise.all(
      clients.map((client, clientIndex) =>
        client.ask({
          op: 'connect',
          id: 0,
          query: SUBSCRIPTION,
          concurrency: CONNECT_CONCURRENCY,
          perConnection,
          sourceAddresses: sourceAddressesFor(connections * scenario.replicas),
          groups: facades.map((facade, replica) => ({
            label: labelOf(replica),
            wsUrl: `${facade.url.replace(/^http/, 'ws')}/graphql`,
            count: share(scenario.subscribersPerReplica, clients.length, clientIndex),
          })),
        }),
      ),
    );
    const connectFailures = connectReplies.reduce(
      (sum, reply) => sum + (reply.op === 'connect' ? reply.failed : 0),
      0,
    );
    if (connectFailures > 0) {
      const first = connectReplies.find((reply) => reply.op === 'connect' && reply.firstError !== undefined);
      console.log(
        `  ${connectFailures} connections failed, the first: ${first?.op === 'connect' ? (first.firstError ?? '') : ''}`,
      );
    }
    // A subscription listens once the facade counts it (its queue subscribed, the customer read).
    for (const facade of facades) {
      await waitForLiveCounts(
        facade,
        (counts) => counts.subscriptions >= scenario.subscribersPerReplica - connectFailures,
        120_000,
      );
    }
    const connectSeconds = (now() - connectStarted) / 1000;
    const upstreamRequestsToSubscribe = (await upstreamRequests(emulator)) - upstreamBeforeSubscribing;
    console.log(
      `  ${scenario.replicas * scenario.subscribersPerReplica} subscribed in ${connectSeconds.toFixed(1)} s`,
    );
    await sleep(1_000);
    await readAll('idle');

    // Events, one after another.
    const facadeCpuBefore = await Promise.all(facades.map((facade) => facade.cpuMs()));
    const facadeSystemBefore = await Promise.all(facades.map((facade) => readCpuSplitMs(facade.pid)));
    const clientCpuBefore = await Promise.all(clients.map((client) => readCpuMs(client.pid)));
    const peakRss = facades.map(() => 0);
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        await Promise.all(
          facades.map(async (facade, index) => {
            peakRss[index] = Math.max(peakRss[index]!, await facade.rssBytes());
          }),
        );
        await sleep(100);
      }
    })();

    // Also starts the event-loop delay's maximum anew.
    const fanoutBefore = await Promise.all(facades.map((facade) => readFanoutMetrics(facade)));
    const upstreamRequestsPerEvent: number[] = [];
    const sentAt = new Map<string, number>();
    const acks: number[] = [];
    const statuses: number[] = [];
    const redeliveryStatuses: { status: number; duplicate: unknown }[] = [];
    window[0] = microsecondsNow();
    for (let index = 0; index < events; index += 1) {
      const event = accountUpdated(index);
      const before = await upstreamRequests(emulator);
      const sent = now();
      sentAt.set(event.id, sent);
      const answer = await postSigned(facades[0]!.url, secret, event);
      acks.push(now() - sent);
      statuses.push(answer.status);
      if (facades.length > 1) {
        // The upstream may deliver the same event to another replica: it must not publish it again.
        const again = await postSigned(facades[1]!.url, secret, event);
        redeliveryStatuses.push({
          status: again.status,
          duplicate: (again.body as { duplicate?: unknown } | undefined)?.duplicate,
        });
      }
      await Promise.all(
        clients.map((client) =>
          client.ask({ op: 'await-event', id: 0, eventId: event.id, timeoutMs: EVENT_TIMEOUT_MS }),
        ),
      );
      await sleep(EVENT_GAP_MS);
      upstreamRequestsPerEvent.push((await upstreamRequests(emulator)) - before);
    }
    window[1] = microsecondsNow();
    const facadeSide = await Promise.all(
      facades.map(async (facade, index): Promise<FacadeFanoutReading> => {
        const after = await readFanoutMetrics(facade);
        const before = fanoutBefore[index]!;
        return {
          eventLoopLagMaxMs: after.eventLoopLagMaxMs,
          deliveries: after.deliveries - before.deliveries,
          within500Ms: after.within500Ms - before.within500Ms,
          within1s: after.within1s - before.within1s,
        };
      }),
    );
    const facadeCpuMs = (await Promise.all(facades.map((facade) => facade.cpuMs()))).map(
      (ms, index) => ms - facadeCpuBefore[index]!,
    );
    const facadeSystemCpuMs = (await Promise.all(facades.map((facade) => readCpuSplitMs(facade.pid)))).map(
      (split, index) => split.systemMs - facadeSystemBefore[index]!.systemMs,
    );
    const clientCpuMs = (await Promise.all(clients.map((client) => readCpuMs(client.pid)))).reduce(
      (sum, ms, index) => sum + ms - clientCpuBefore[index]!,
      0,
    );

    const reports = await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })));
    const arrivals = new Map<string, number[]>();
    let duplicates = 0;
    let errors = 0;
    let firstError: string | undefined;
    for (const reply of reports) {
      if (reply.op !== 'report') continue;
      duplicates += reply.duplicates;
      errors += reply.errors;
      firstError ??= reply.firstError;
      for (const [key, times] of Object.entries(reply.arrivals)) {
        arrivals.set(key, [...(arrivals.get(key) ?? []), ...times]);
      }
    }

    // Leave: every client disconnects at once.
    await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
    const openAfterDisconnect = await Promise.all(
      facades.map((facade) => waitForLiveCounts(facade, (counts) => counts.connections === 0, 30_000)),
    );
    // The peak covers the events and the disconnections.
    sampling.on = false;
    await sampler;
    await readAll('disconnected');
    await sleep(settleMs);
    await readAll('settled');
    await readAll('afterGc', 'full');
    await readAll('afterReducingGc', 'memory-reducing');
    if (holdMs > 0) {
      console.log(
        `  holding for ${holdMs} ms: facade pids ${facades.map((facade) => facade.pid).join(', ')}`,
      );
      await sleep(holdMs);
    }

    const replicas: ReplicaResult[] = facades.map((_facade, replica) => {
      const latencies: number[] = [];
      for (const [eventId, sent] of sentAt) {
        for (const at of arrivals.get(`${labelOf(replica)} ${eventId}`) ?? []) latencies.push(at - sent);
      }
      latencies.sort((a, b) => a - b);
      const expected = scenario.subscribersPerReplica * events;
      return {
        label: labelOf(replica),
        subscribers: scenario.subscribersPerReplica,
        received: latencies.length,
        expected,
        latency: {
          p50Ms: percentile(latencies, 0.5),
          p99Ms: percentile(latencies, 0.99),
          maxMs: latencies.at(-1) ?? Number.NaN,
        },
        facadeCpuMs: facadeCpuMs[replica]!,
        facadeSystemCpuMs: facadeSystemCpuMs[replica]!,
        memory: { ...memory[replica], peak: { rssBytes: peakRss[replica]! } },
        openAfterDisconnect: openAfterDisconnect[replica]!,
        facadeSide: facadeSide[replica]!,
      };
    });
    const sortedAcks = [...acks].sort((a, b) => a - b);
    result = {
      key: scenario.key,
      name: scenario.name,
      subscribers: scenario.replicas * scenario.subscribersPerReplica,
      events,
      upstreamRequestsPerEvent,
      upstreamRequestsToSubscribe,
      ack: { p50Ms: percentile(sortedAcks, 0.5), maxMs: sortedAcks.at(-1) ?? Number.NaN, statuses },
      ...(facades.length > 1 ? { redeliveryStatuses } : {}),
      duplicates,
      errors,
      ...(firstError === undefined ? {} : { firstError }),
      connectFailures,
      connectSeconds,
      clientCpuMs,
      replicas,
    };
  } finally {
    for (const client of clients) client.stop();
    await Promise.all(facades.map((facade) => facade.stop()));
  }
  if (profileDir !== undefined) {
    result.profiles = await Promise.all(
      result.replicas.map((replica, index) =>
        deliveryProfile(scenario, index, window, replica.facadeCpuMs, replica.received),
      ),
    );
  }
  return result;
}

function profileDirOf(scenario: Scenario, replica: number): string {
  return `${profileDir ?? ''}/${scenario.key}-${labelOf(replica).replace(' ', '-')}`;
}

/**
 * Where the facade's CPU went per delivery over the events (its profile is written when it
 * exits): the samples of the events' window, charged to the steps of a delivery.
 */
async function deliveryProfile(
  scenario: Scenario,
  replica: number,
  window: [number, number],
  cpuMs: number,
  deliveries: number,
): Promise<string> {
  const directory = profileDirOf(scenario, replica);
  const file = (await readdir(directory)).find((name) => name.endsWith('.cpuprofile'));
  if (file === undefined) return `(${scenario.name}, ${labelOf(replica)}: no profile written)`;
  const profile = JSON.parse(await readFile(`${directory}/${file}`, 'utf8')) as CpuProfile;
  return summariseProfile({
    name: `${scenario.name}, ${labelOf(replica)}: where a delivery's CPU goes`,
    profile,
    window,
    cpuMsPerUnit: cpuMs / Math.max(1, deliveries),
    units: deliveries,
    unit: 'delivery',
    steps: DELIVERY_STEPS,
    nativeSteps: NATIVE_DELIVERY_STEPS,
  });
}

function labelOf(replica: number): string {
  return `replica ${replica + 1}`;
}

function summaryLine(result: ScenarioResult): string {
  return result.replicas
    .map(
      (replica) =>
        `  ${replica.label}: ${replica.received}/${replica.expected} delivered, p50 ${replica.latency.p50Ms.toFixed(0)} ms, ` +
        `p99 ${replica.latency.p99Ms.toFixed(0)} ms; upstream GETs per event ${median(result.upstreamRequestsPerEvent)}`,
    )
    .join('\n');
}

function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

function toMarkdown(report: {
  at: string;
  machine: { cores: number; node: string; loadAverageBefore: number[]; loadAverageAfter: number[] };
  settings: {
    events: number;
    clientProcesses: number;
    settleMs: number;
    facadeScript: string;
    facadeNodeArgs: string[];
    mallocArenaMax: string | null;
  };
  scenarios: readonly ScenarioResult[];
}): string {
  const load = (values: number[]): string => values.map((value) => value.toFixed(2)).join(', ');
  const ms = (value: number): string => (Number.isNaN(value) ? '–' : value.toFixed(0));
  const mib = (bytes: number | undefined): string =>
    bytes === undefined || Number.isNaN(bytes) ? '–' : (bytes / MIB).toFixed(0);
  const { settings } = report;
  const lines = [
    `Run at ${report.at} on ${report.machine.cores} cores, Node ${report.machine.node}; load average (1, 5, 15 min) ` +
      `${load(report.machine.loadAverageBefore)} before, ${load(report.machine.loadAverageAfter)} after. ` +
      `${settings.events} events per scenario, subscribers spread over ${settings.clientProcesses} client processes; ` +
      `facade \`${settings.facadeScript.replace(root, '')}\`` +
      (settings.facadeNodeArgs.length > 0 ? ` with \`${settings.facadeNodeArgs.join(' ')}\`` : '') +
      (settings.mallocArenaMax === null ? '' : `, MALLOC_ARENA_MAX=${settings.mallocArenaMax}`) +
      '.',
    '',
    '| scenario | facade | upstream GETs / event | delivered / expected | event → subscriber p50 / p99 / max ms | webhook ack p50 / max ms | facade CPU s | facade CPU µs / delivery (of it kernel) | client CPU s | RSS MiB: before / idle / peak / disconnected / +' +
      `${settings.settleMs / 1000} s / after GC / after memory-reducing GC |`,
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const scenario of report.scenarios) {
    const reads = scenario.upstreamRequestsPerEvent;
    const readsText =
      Math.min(...reads) === Math.max(...reads)
        ? String(reads[0])
        : `${median(reads)} (${Math.min(...reads)}–${Math.max(...reads)})`;
    scenario.replicas.forEach((replica, index) => {
      const m = replica.memory;
      const perDelivery = (ms: number): string => ((ms * 1000) / Math.max(1, replica.received)).toFixed(1);
      const exact =
        (scenario.duplicates === 0 ? '' : `, ${scenario.duplicates} duplicates`) +
        (scenario.errors === 0 ? '' : `, ${scenario.errors} with errors`);
      lines.push(
        `| ${scenario.name} | ${scenario.replicas.length > 1 ? `${replica.label}${index === 0 ? ' (receives)' : ''}` : 'the one'} ` +
          `| ${index === 0 ? readsText : '(same events)'} | ${replica.received} / ${replica.expected}${index === 0 ? exact : ''} ` +
          `| ${ms(replica.latency.p50Ms)} / ${ms(replica.latency.p99Ms)} / ${ms(replica.latency.maxMs)} ` +
          `| ${index === 0 ? `${ms(scenario.ack.p50Ms)} / ${ms(scenario.ack.maxMs)}` : '–'} ` +
          `| ${(replica.facadeCpuMs / 1000).toFixed(1)} | ${perDelivery(replica.facadeCpuMs)} (${perDelivery(replica.facadeSystemCpuMs)}) | ${index === 0 ? (scenario.clientCpuMs / 1000).toFixed(1) : '(shared)'} ` +
          `| ${mib(m.before?.rssBytes)} / ${mib(m.idle?.rssBytes)} / ${mib(m.peak?.rssBytes)} / ${mib(m.disconnected?.rssBytes)} / ${mib(m.settled?.rssBytes)} / ${mib(m.afterGc?.rssBytes)} / ${mib(m.afterReducingGc?.rssBytes)} |`,
      );
    });
  }
  lines.push(
    '',
    "The facade's own account of the events (its `/metrics`): the longest the event loop was held, and the " +
      "deliveries that had left it within 0.5 s and 1 s of their event (the arrivals above add the clients' " +
      'side, whose processes share the cores):',
    '',
    '| scenario | facade | longest event-loop delay ms | deliveries left the facade | within 0.5 s | within 1 s |',
    '|---|---|--:|--:|--:|--:|',
  );
  const share = (part: number, whole: number): string =>
    whole > 0 ? `${((100 * part) / whole).toFixed(1)} %` : '–';
  for (const scenario of report.scenarios) {
    for (const replica of scenario.replicas) {
      const side = replica.facadeSide;
      lines.push(
        `| ${scenario.name} | ${replica.label} | ${ms(side.eventLoopLagMaxMs)} | ${side.deliveries} ` +
          `| ${share(side.within500Ms, side.deliveries)} | ${share(side.within1s, side.deliveries)} |`,
      );
    }
  }
  lines.push(
    '',
    "The facade's V8 heap at the same moments (MiB: heap used / heap committed / external):",
    '',
    '| scenario | facade | before | idle | disconnected | +' +
      `${settings.settleMs / 1000} s | after GC | after memory-reducing GC | open after disconnect |`,
    '|---|---|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const scenario of report.scenarios) {
    for (const replica of scenario.replicas) {
      const heap = (reading: MemoryReading | undefined): string =>
        reading?.heapUsedBytes === undefined
          ? '–'
          : `${mib(reading.heapUsedBytes)} / ${mib(reading.heapTotalBytes)} / ${mib(reading.externalBytes)}`;
      const m = replica.memory;
      const open = replica.openAfterDisconnect;
      lines.push(
        `| ${scenario.name} | ${scenario.replicas.length > 1 ? replica.label : 'the one'} | ${heap(m.before)} | ${heap(m.idle)} | ${heap(m.disconnected)} | ${heap(m.settled)} | ${heap(m.afterGc)} | ${heap(m.afterReducingGc)} ` +
          `| ${open.connections} connections, ${open.subscriptions} subscriptions |`,
      );
    }
  }
  const notes: string[] = [];
  for (const scenario of report.scenarios) {
    const others = scenario.ack.statuses.filter((status) => status !== 200).length;
    if (others > 0) notes.push(`${scenario.name}: ${others} webhook deliveries not answered 200.`);
    if (scenario.redeliveryStatuses !== undefined) {
      const duplicates = scenario.redeliveryStatuses.filter(
        (answer) => answer.status === 200 && answer.duplicate === true,
      ).length;
      notes.push(
        `${scenario.name}: the same delivery posted to replica 2 after replica 1's ack was answered as a duplicate ${duplicates} times of ${scenario.redeliveryStatuses.length}.`,
      );
    }
    if (scenario.connectFailures > 0)
      notes.push(`${scenario.name}: ${scenario.connectFailures} connections failed.`);
    if (scenario.errors > 0)
      notes.push(
        `${scenario.name}: ${scenario.errors} results with errors (first: ${scenario.firstError ?? 'not kept'}).`,
      );
    notes.push(
      `${scenario.name}: subscribing took ${scenario.connectSeconds.toFixed(1)} s and ${scenario.upstreamRequestsToSubscribe} upstream GETs.`,
    );
  }
  lines.push('', ...notes.map((note) => `- ${note}`));
  for (const scenario of report.scenarios)
    lines.push(...(scenario.profiles ?? []).map((text) => `\n${text}`));
  return `${lines.join('\n')}\n`;
}

await main();
