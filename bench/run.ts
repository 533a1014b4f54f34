/**
 * `npm run bench`: measures the facade against baselines in the same run and reports ratios, never
 * absolute limits.
 *
 * The emulator, the facade and a bare Apollo Server run as child processes on loopback. Each
 * workload of `workloads.ts` is measured with the emulator answering at once and with injected
 * latency (the network and the upstream's own work, which is where a waterfall of reads costs):
 * the facade against the direct REST client, alternating rounds so drift on a shared machine hits
 * both alike. The trivial `{ __typename }` measures the facade's fixed cost per operation against
 * the bare Apollo Server. Each row reports throughput, p50 and p99 latency, CPU per
 * operation (the facade's and the bare server's from /proc; the direct client's from this
 * process, which also runs the load generator) and upstream calls per operation.
 *
 * Options (environment): BENCH_SECONDS per round (default 2), BENCH_ROUNDS (pairs of rounds per row,
 * default 3),
 * BENCH_CONCURRENCY (default 16), BENCH_LATENCY_MS and BENCH_JITTER_MS (default 20 ± 5),
 * BENCH_OPERATIONS (cap per round, default 1 000 000), BENCH_FACADE_SCRIPT (the facade's entry
 * point, default src/main.ts: point it at another checkout to compare two versions).
 * The report goes to bench/results/ (markdown and JSON, with the load average of the machine).
 * Subscriptions at scale (one event to thousands of subscribers) have their own, longer run:
 * `npm run bench:fanout` (`fanout.ts`).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { graphqlAsker, setFaults } from './asking.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { findFreePort, startService, type ServiceProcess, startEmulatorService } from './processes.ts';
import { createRestClient, workloads, type RestClient, type Workload } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
const CONNECTIONS = 64;
const TRIVIAL_QUERY = JSON.stringify({ query: '{ __typename }' });

const roundMs = positiveIntegerFromEnv('BENCH_SECONDS', 2) * 1000;
const rounds = positiveIntegerFromEnv('BENCH_ROUNDS', 3);
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const maxOperations = positiveIntegerFromEnv('BENCH_OPERATIONS', 1_000_000);
const latencyMs = positiveIntegerFromEnv('BENCH_LATENCY_MS', 20);
const jitterMs = Math.min(latencyMs, Number(process.env.BENCH_JITTER_MS ?? 5));

const root = fileURLToPath(new URL('..', import.meta.url));
const facadeScript = process.env.BENCH_FACADE_SCRIPT ?? `${root}src/main.ts`;

/** One side of a comparison: what one round of load measured. */
interface Side {
  load: LoadResult;
  /** CPU of the serving process per operation (facade, bare Apollo); null for the direct client. */
  serverCpuMsPerOp: number | null;
  /** CPU of this process per operation: the direct client's work, plus the load generator. */
  clientCpuMsPerOp: number;
}

/** One row of the report: `subject` measured against `baseline` under one upstream latency. */
interface Comparison {
  name: string;
  latency: string;
  subjectName: string;
  baselineName: string;
  upstreamCallsPerOperation: { subject: number; baseline: number };
  subject: Side;
  baseline: Side;
  throughputRatio: number;
  p50Ratio: number;
  p99Ratio: number;
}

/** An operation to load and, when it runs on a process of its own, that process (for its CPU). */
interface Target {
  operation: () => Promise<void>;
  server?: ServiceProcess;
}

async function main(): Promise<void> {
  const loadAverageBefore = loadavg();
  const started = new Date();
  const emulator = await startEmulatorService();
  const facadePort = await findFreePort();
  const barePort = await findFreePort();
  let facade: ServiceProcess | undefined;
  let bare: ServiceProcess | undefined;
  const rest = createRestClient(emulator.url, API_KEY, CONNECTIONS);
  const facadePool = new Pool(`http://127.0.0.1:${facadePort}`, { connections: CONNECTIONS });
  const barePool = new Pool(`http://127.0.0.1:${barePort}`, { connections: CONNECTIONS });
  try {
    facade = await startService({
      name: 'facade',
      script: facadeScript,
      port: facadePort,
      env: {
        PORT: String(facadePort),
        HOST: '127.0.0.1',
        NODE_ENV: 'production',
        UPSTREAM_BASE_URL: emulator.url,
        UPSTREAM_API_KEY: API_KEY,
        UPSTREAM_CONNECTIONS: String(CONNECTIONS),
        // As deployed: one line per operation at info.
        LOG_LEVEL: 'info',
        WEBHOOK_REGISTER: 'false',
        // The facade's own path is measured: no caller tokens to verify, no request quotas.
        AUTH_MODE: 'none',
        RATE_LIMIT_ENABLED: 'false',
        // The facade's own path, every read made afresh; the response cache has its own benchmark
        // (bench/cache.ts), with its baselines beside it.
        CACHE_ENABLED: 'false',
      },
      readyPath: '/readyz',
    });
    bare = await startService({
      name: 'bare Apollo Server',
      script: `${root}bench/bare-apollo.ts`,
      port: barePort,
      env: { PORT: String(barePort), NODE_ENV: 'production' },
      readyPath: '/healthz',
    });

    const askFacade = graphqlAsker(facadePool);
    const askBare = graphqlAsker(barePool);
    const idleRss = await facade.rssBytes();
    const rssAfterRounds: number[] = [];
    const comparisons: Comparison[] = [];

    const conditions = [
      { name: 'none', faults: { latency: { fixedMs: 0, jitterMs: 0 } } },
      {
        name: `${latencyMs} ± ${jitterMs} ms`,
        faults: { latency: { fixedMs: latencyMs - jitterMs, jitterMs: 2 * jitterMs } },
      },
    ];
    for (const condition of conditions) {
      await setFaults(emulator, condition.faults);
      for (const workload of workloads) {
        const calls = await countUpstreamCalls(emulator, workload, askFacade, rest);
        const facadeTarget: Target = {
          operation: async () => {
            await askFacade(workload.query);
          },
          server: facade,
        };
        const directTarget: Target = {
          operation: async () => {
            await workload.direct(rest);
          },
        };
        const pairs = await compare(facadeTarget, directTarget, async () => {
          rssAfterRounds.push(await facade!.rssBytes());
        });
        comparisons.push(comparison(workload.name, condition.name, 'facade', 'direct REST', calls, pairs));
      }
    }
    await setFaults(emulator, conditions[0]!.faults);

    // The fixed cost of an operation: no upstream call at all.
    await askBare(TRIVIAL_QUERY);
    const trivialPairs = await compare(
      {
        operation: async () => {
          await askFacade(TRIVIAL_QUERY);
        },
        server: facade,
      },
      {
        operation: async () => {
          await askBare(TRIVIAL_QUERY);
        },
        server: bare,
      },
    );
    comparisons.push(
      comparison(
        '`{ __typename }`',
        'none',
        'facade',
        'bare Apollo Server',
        { subject: 0, baseline: 0 },
        trivialPairs,
      ),
    );

    const peakRss = Math.max(idleRss, ...rssAfterRounds);
    const report = {
      at: started.toISOString(),
      machine: {
        cores: availableParallelism(),
        node: process.version,
        loadAverageBefore,
        loadAverageAfter: loadavg(),
      },
      settings: { roundMs, rounds, concurrency, maxOperations, latencyMs, jitterMs, facadeScript },
      comparisons,
      goals: goals(comparisons),
      memory: { idleRssBytes: idleRss, peakRssBytes: peakRss, rssAfterRoundsBytes: rssAfterRounds },
    };
    const markdown = toMarkdown(report);
    console.log(`\n${markdown}`);
    await mkdir(`${root}bench/results`, { recursive: true });
    const stamp = report.at.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
    await writeFile(`${root}bench/results/${stamp}.md`, markdown);
    await writeFile(`${root}bench/results/latest.md`, markdown);
    await writeFile(`${root}bench/results/latest.json`, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`written to bench/results/${stamp}.md (and latest.md, latest.json)`);
    console.log(
      'subscriptions at scale: bench/fanout.ts (npm run bench runs it next; npm run bench:fanout alone)',
    );
  } finally {
    await facadePool.close();
    await barePool.close();
    await rest.close();
    await facade?.stop();
    await bare?.stop();
    await emulator.stop();
  }
}

/** One round of each side, run back to back: what the ratios are taken from. */
interface RoundPair {
  subject: Side;
  baseline: Side;
}

/**
 * Warms both targets, then runs `rounds` pairs of rounds, alternating subject and baseline.
 * `afterSubjectRound` runs after each round of the subject.
 */
async function compare(
  subject: Target,
  baseline: Target,
  afterSubjectRound?: () => Promise<void>,
): Promise<RoundPair[]> {
  // JIT, connection pools and the loaders' code paths, before anything is measured.
  await runLoad({ total: maxOperations, durationMs: 500, concurrency, operation: subject.operation });
  await runLoad({ total: maxOperations, durationMs: 500, concurrency, operation: baseline.operation });
  const pairs: RoundPair[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const subjectSide = await measure(subject);
    await afterSubjectRound?.();
    pairs.push({ subject: subjectSide, baseline: await measure(baseline) });
  }
  return pairs;
}

/** One bounded round of load on `target`, with the CPU its server and this process used. */
async function measure(target: Target): Promise<Side> {
  const serverBefore = await target.server?.cpuMs();
  const clientBefore = process.cpuUsage();
  const load = await runLoad({
    total: maxOperations,
    durationMs: roundMs,
    concurrency,
    operation: target.operation,
  });
  const client = process.cpuUsage(clientBefore);
  const serverAfter = await target.server?.cpuMs();
  const operations = Math.max(1, load.operations);
  return {
    load,
    serverCpuMsPerOp:
      serverBefore === undefined || serverAfter === undefined
        ? null
        : (serverAfter - serverBefore) / operations,
    clientCpuMsPerOp: (client.user + client.system) / 1000 / operations,
  };
}

/** The median of `values` (the lower middle one for an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/**
 * The comparison of one row. Each ratio is taken within a pair of rounds run back to back (so
 * both sides met the same machine), and the median over the pairs is reported; the absolute
 * figures shown are those of the pair with the median throughput ratio.
 */
function comparison(
  name: string,
  latency: string,
  subjectName: string,
  baselineName: string,
  calls: { subject: number; baseline: number },
  pairs: readonly RoundPair[],
): Comparison {
  const throughput = (pair: RoundPair) =>
    pair.subject.load.operationsPerSecond / pair.baseline.load.operationsPerSecond;
  const throughputRatio = median(pairs.map(throughput));
  const shown = pairs.find((pair) => throughput(pair) === throughputRatio)!;
  const subjectCpu = pairs.map((pair) => pair.subject.serverCpuMsPerOp);
  const baselineCpu = pairs.map((pair) => pair.baseline.serverCpuMsPerOp);
  const medianCpu = (values: (number | null)[]) =>
    values.includes(null) ? null : median(values as number[]);
  return {
    name,
    latency,
    subjectName,
    baselineName,
    upstreamCallsPerOperation: calls,
    subject: { ...shown.subject, serverCpuMsPerOp: medianCpu(subjectCpu) },
    baseline: {
      ...shown.baseline,
      serverCpuMsPerOp: medianCpu(baselineCpu),
      clientCpuMsPerOp: median(pairs.map((pair) => pair.baseline.clientCpuMsPerOp)),
    },
    throughputRatio,
    p50Ratio: median(pairs.map((pair) => pair.subject.load.p50Ms / pair.baseline.load.p50Ms)),
    p99Ratio: median(pairs.map((pair) => pair.subject.load.p99Ms / pair.baseline.load.p99Ms)),
  };
}

/** Asks once each way, checks both saw the same accounts, and returns the upstream calls each made. */
async function countUpstreamCalls(
  emulator: ServiceProcess,
  workload: Workload,
  askFacade: (body: string) => Promise<unknown>,
  rest: RestClient,
): Promise<{ subject: number; baseline: number }> {
  const total = async (): Promise<number> => {
    const response = await fetch(`${emulator.url}/_emulator/requests`);
    return ((await response.json()) as { total: number }).total;
  };
  const before = await total();
  const facadeAccounts = workload.countAccounts(await askFacade(workload.query));
  const middle = await total();
  const directAccounts = await workload.direct(rest);
  const after = await total();
  if (facadeAccounts !== directAccounts) {
    throw new Error(`${workload.name}: facade saw ${facadeAccounts} accounts, direct REST ${directAccounts}`);
  }
  return { subject: middle - before, baseline: after - middle };
}

interface Goal {
  goal: string;
  measured: string;
  met: boolean;
}

/** The goals of the facade's speed work, each against its measurement in this run. */
function goals(comparisons: readonly Comparison[]): Goal[] {
  const find = (name: string, latency: 'none' | 'latency') =>
    comparisons.find((c) => c.name === name && (latency === 'none') === (c.latency === 'none'));
  const list: Goal[] = [];
  const dashboardLatency = find('customer dashboard', 'latency');
  if (dashboardLatency) {
    list.push(
      {
        goal: 'dashboard under latency: p50 ≤ 1.10 × direct',
        measured: `${dashboardLatency.p50Ratio.toFixed(2)} ×`,
        met: dashboardLatency.p50Ratio <= 1.1,
      },
      {
        goal: 'dashboard under latency: throughput ≥ 0.90 × direct',
        measured: `${dashboardLatency.throughputRatio.toFixed(2)} ×`,
        met: dashboardLatency.throughputRatio >= 0.9,
      },
    );
  }
  const dashboard = find('customer dashboard', 'none');
  if (dashboard?.subject.serverCpuMsPerOp != null) {
    list.push({
      goal: 'facade CPU per dashboard operation (no latency) ≤ 0.6 ms',
      measured: `${dashboard.subject.serverCpuMsPerOp.toFixed(2)} ms`,
      met: dashboard.subject.serverCpuMsPerOp <= 0.6,
    });
  }
  const trivial = find('`{ __typename }`', 'none');
  if (trivial) {
    list.push({
      goal: '`{ __typename }` throughput ≥ 0.95 × bare Apollo Server',
      measured: `${trivial.throughputRatio.toFixed(2)} ×`,
      met: trivial.throughputRatio >= 0.95,
    });
  }
  const portfolio = find('portfolio', 'none');
  if (portfolio) {
    list.push({
      goal: 'portfolio: no more upstream calls than direct',
      measured: `${portfolio.upstreamCallsPerOperation.subject} / ${portfolio.upstreamCallsPerOperation.baseline}`,
      met: portfolio.upstreamCallsPerOperation.subject <= portfolio.upstreamCallsPerOperation.baseline,
    });
  }
  return list;
}

function toMarkdown(report: {
  at: string;
  machine: { cores: number; node: string; loadAverageBefore: number[]; loadAverageAfter: number[] };
  comparisons: readonly Comparison[];
  goals: readonly Goal[];
  memory: { idleRssBytes: number; peakRssBytes: number };
}): string {
  const f = (value: number, digits = 2): string => value.toFixed(digits);
  const load = (values: number[]): string => values.map((value) => f(value)).join(', ');
  const mib = (bytes: number): string => `${f(bytes / 1024 / 1024, 0)} MiB`;
  const lines = [
    `Run at ${report.at} on ${report.machine.cores} cores, Node ${report.machine.node}; ` +
      `load average (1, 5, 15 min) ${load(report.machine.loadAverageBefore)} before, ` +
      `${load(report.machine.loadAverageAfter)} after.`,
    `${rounds} pairs of rounds of ${roundMs / 1000} s per row (facade, then baseline), ${concurrency} operations in flight;` +
      ' each ratio is the median of its ratios within a pair, the figures beside it those of the median pair.',
    '',
    '| workload | upstream latency | vs | upstream calls / op | ops/s | throughput ratio | p50 ms | p50 ratio | p99 ms | p99 ratio | CPU ms / op |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const c of report.comparisons) {
    const cpu = (side: Side): string =>
      side.serverCpuMsPerOp === null ? `${f(side.clientCpuMsPerOp)} (client)` : f(side.serverCpuMsPerOp);
    lines.push(
      `| ${c.name} | ${c.latency} | ${c.baselineName} | ${c.upstreamCallsPerOperation.subject} / ${c.upstreamCallsPerOperation.baseline} ` +
        `| ${f(c.subject.load.operationsPerSecond, 0)} / ${f(c.baseline.load.operationsPerSecond, 0)} | ${f(c.throughputRatio)} ` +
        `| ${f(c.subject.load.p50Ms, 1)} / ${f(c.baseline.load.p50Ms, 1)} | ${f(c.p50Ratio)} ` +
        `| ${f(c.subject.load.p99Ms, 1)} / ${f(c.baseline.load.p99Ms, 1)} | ${f(c.p99Ratio)} ` +
        `| ${cpu(c.subject)} / ${cpu(c.baseline)} |`,
    );
  }
  lines.push(
    '',
    'Each pair of figures is facade / baseline. CPU per operation is the median over the rounds, of the',
    'serving process (from /proc); for direct REST, of the client’s process, which also runs the load generator.',
    '',
    '| goal | measured | met |',
    '|---|---|---|',
    ...report.goals.map((g) => `| ${g.goal} | ${g.measured} | ${g.met ? 'yes' : 'no'} |`),
    '',
    `Facade resident memory: ${mib(report.memory.idleRssBytes)} idle, ${mib(report.memory.peakRssBytes)} at most after a round.`,
    `Failures (facade / baseline): ${report.comparisons
      .map((c) => `${c.name} ${c.latency} ${c.subject.load.failures}/${c.baseline.load.failures}`)
      .join(', ')}.`,
    '',
  );
  return lines.join('\n');
}

await main();
