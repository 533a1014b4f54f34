/**
 * `npm run bench:compare -- <git ref>`: this checkout against an earlier one, in the same run.
 *
 * Telling "the code got slower" from "the machine got slower" needs both versions measured on the
 * same machine at the same moment. This runs the facade of this checkout and the facade of `<ref>`
 * (a detached git worktree of it, sharing this checkout's node_modules when the lockfiles agree,
 * else installed with `npm ci`) as child processes over one emulator, with the same environment,
 * and measures each row in pairs of rounds whose order alternates (current then earlier, earlier then
 * current), so drift on a shared machine hits both alike. Each ratio (current / earlier) is taken
 * within a pair; the median over the pairs is reported.
 *
 * Rows: the customer dashboard with the response cache off (no upstream latency, and 20 ± 5 ms per
 * upstream call), the same dashboard repeated with the cache on (answered from the cache after the
 * first round), the portfolio with the cache off, and `{ __typename }` (the fixed cost of an
 * operation through the door). Per row: p50, p99, throughput, and the facade process's CPU per
 * operation (user + system from /proc).
 *
 * Then the live rows (`compare-live.ts`): one event fanned out to many graphql-ws subscribers on each
 * version, p50 and p99 to the subscribers, the facade's CPU per delivered event, and memory per
 * subscriber.
 *
 * Options (environment): BENCH_SECONDS per round (default 2), BENCH_ROUNDS pairs per row (default
 * 4, at least 2 so each order is run), BENCH_CONCURRENCY (16), BENCH_LATENCY_MS and BENCH_JITTER_MS
 * (20 ± 5), BENCH_COMPARE_ROWS (`all`, `queries` or `live`), and the live rows' own
 * (BENCH_COMPARE_LIVE_SUBSCRIBERS, 10000; BENCH_COMPARE_LIVE_EVENTS per round, 5;
 * BENCH_COMPARE_LIVE_CLIENT_PROCESSES, 4). The report is printed and written to
 * bench/results/compare-<ref>.md and .json.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { BENCH_CONNECTIONS, comparedFacadeEnv, graphqlAsker, setFaults } from './asking.ts';
import { compareLive, liveMarkdown, type LiveComparison } from './compare-live.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { findFreePort, startEmulatorService, startService, type ServiceProcess } from './processes.ts';
import { workloads, type Workload } from './workloads.ts';

const TRIVIAL_QUERY = '{ __typename }';

const roundMs = positiveIntegerFromEnv('BENCH_SECONDS', 2) * 1000;
const rounds = Math.max(2, positiveIntegerFromEnv('BENCH_ROUNDS', 4));
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const latencyMs = positiveIntegerFromEnv('BENCH_LATENCY_MS', 20);
const jitterMs = Math.min(latencyMs, Number(process.env.BENCH_JITTER_MS ?? 5));
const rowSets = process.env.BENCH_COMPARE_ROWS ?? 'all';
if (!['all', 'queries', 'live'].includes(rowSets))
  throw new Error('BENCH_COMPARE_ROWS must be all, queries or live.');

const root = fileURLToPath(new URL('..', import.meta.url));

/** What one round on one version measured. */
interface Round {
  load: LoadResult;
  cpuMsPerOp: number;
}

/** One row: the same operation on both versions, in pairs of rounds. */
interface Row {
  name: string;
  pairs: { current: Round; earlier: Round }[];
}

/** The facades of one version: cache off and cache on, over the same emulator. */
interface Version {
  label: string;
  uncached: ServiceProcess;
  cached: ServiceProcess;
  askUncached: (body: string) => Promise<unknown>;
  askCached: (body: string) => Promise<unknown>;
}

async function main(): Promise<void> {
  const ref = process.argv[2];
  if (ref === undefined || ref.startsWith('-')) {
    console.error('usage: npm run bench:compare -- <git ref>   (e.g. a release tag or a commit)');
    process.exit(2);
  }
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]).trim();
  const short = commit.slice(0, 7);
  const current = git(['rev-parse', '--short', 'HEAD']).trim();
  const dirty = git(['status', '--porcelain', '--', 'src', 'schema', 'package-lock.json']).trim() !== '';
  const currentLabel = `${current}${dirty ? '+changes' : ''}`;

  const earlierRoot = prepareCheckout(commit);
  const loadAverageBefore = loadavg();
  const started = new Date();
  const emulator = await startEmulatorService();
  const services: ServiceProcess[] = [emulator];
  const pools: Pool[] = [];
  try {
    const version = async (label: string, checkout: string): Promise<Version> => {
      const facade = async (cache: boolean): Promise<ServiceProcess> => {
        const port = await findFreePort();
        const service = await startService({
          name: `${label} (cache ${cache ? 'on' : 'off'})`,
          script: join(checkout, 'src/main.ts'),
          port,
          env: comparedFacadeEnv({ port, metricsPort: await findFreePort() }, emulator.url, cache),
          readyPath: '/readyz',
        });
        services.push(service);
        return service;
      };
      const uncached = await facade(false);
      const cached = await facade(true);
      const asker = (service: ServiceProcess) => {
        const pool = new Pool(service.url, { connections: BENCH_CONNECTIONS });
        pools.push(pool);
        return graphqlAsker(pool);
      };
      return { label, uncached, cached, askUncached: asker(uncached), askCached: asker(cached) };
    };
    const rows: Row[] = [];
    if (rowSets !== 'live') {
      rows.push(...(await queryRows(emulator, version, currentLabel, short, earlierRoot)));
      // The query rows' facades leave the machine to the live rows.
      await Promise.all(pools.splice(0).map((pool) => pool.close()));
      for (const service of services.splice(1).reverse()) await service.stop();
    }
    const live: LiveComparison | undefined =
      rowSets === 'queries'
        ? undefined
        : await compareLive(
            emulator,
            { label: currentLabel, script: join(root, 'src/main.ts') },
            { label: short, script: join(earlierRoot, 'src/main.ts') },
            rounds,
          );

    const report = {
      at: started.toISOString(),
      current: currentLabel,
      earlier: { ref, commit },
      machine: {
        cores: availableParallelism(),
        node: process.version,
        loadAverageBefore,
        loadAverageAfter: loadavg(),
      },
      settings: { roundMs, rounds, concurrency, latencyMs, jitterMs },
      rows: rows.map(summarise),
      ...(live === undefined ? {} : { live }),
    };
    const markdown = [toMarkdown(report), ...(live === undefined ? [] : liveMarkdown(live))].join('\n');
    console.log(`\n${markdown}`);
    await mkdir(join(root, 'bench/results'), { recursive: true });
    const name = `compare-${ref.replaceAll(/[^A-Za-z0-9._-]/g, '_')}`;
    await writeFile(join(root, `bench/results/${name}.md`), markdown);
    await writeFile(join(root, `bench/results/${name}.json`), `${JSON.stringify(report, null, 2)}\n`);
    console.log(`written to bench/results/${name}.md (and .json)`);
  } finally {
    await Promise.all(pools.map((pool) => pool.close()));
    for (const service of services.reverse()) await service.stop();
    git(['worktree', 'remove', '--force', earlierRoot]);
  }
}

/** The query rows, each on both versions' facades (started here, cache off and on). */
async function queryRows(
  emulator: ServiceProcess,
  version: (label: string, checkout: string) => Promise<Version>,
  currentLabel: string,
  short: string,
  earlierRoot: string,
): Promise<Row[]> {
  const now = await version(currentLabel, root);
  const before = await version(short, earlierRoot);

  const dashboard = workload('customer dashboard');
  const portfolio = workload('portfolio');
  const noLatency = { latency: { fixedMs: 0, jitterMs: 0 } };
  const withLatency = { latency: { fixedMs: latencyMs - jitterMs, jitterMs: 2 * jitterMs } };
  const rows: Row[] = [];
  const row = async (
    name: string,
    faults: object,
    pick: (version: Version) => { ask: (body: string) => Promise<unknown>; server: ServiceProcess },
    body: string,
  ) => {
    await setFaults(emulator, faults);
    const side = (version: Version) => {
      const { ask, server } = pick(version);
      return {
        server,
        operation: async () => {
          await ask(body);
        },
      };
    };
    rows.push({ name, pairs: await alternate(side(now), side(before)) });
    console.log(`measured: ${name}`);
  };
  const uncached = (version: Version) => ({ ask: version.askUncached, server: version.uncached });
  const cached = (version: Version) => ({ ask: version.askCached, server: version.cached });
  await row('dashboard, cache off', noLatency, uncached, dashboard);
  await row(`dashboard, cache off, ${latencyMs} ± ${jitterMs} ms upstream`, withLatency, uncached, dashboard);
  await row('dashboard, cache on (repeated: hits)', noLatency, cached, dashboard);
  await row('portfolio, cache off', noLatency, uncached, portfolio);
  await row('`{ __typename }`', noLatency, uncached, JSON.stringify({ query: TRIVIAL_QUERY }));

  return rows;
}

/**
 * A detached worktree of `commit` in a temporary folder, with its dependencies: this checkout's
 * node_modules when both lockfiles are the same, else its own `npm ci` (run by this Node, so the
 * locked versions resolve as they would under Node 24).
 */
function prepareCheckout(commit: string): string {
  const folder = mkdtempSync(join(tmpdir(), 'bench-compare-'));
  rmSync(folder, { recursive: true });
  git(['worktree', 'add', '--detach', folder, commit]);
  const sameLock =
    readFileSync(join(root, 'package-lock.json'), 'utf8') ===
    readFileSync(join(folder, 'package-lock.json'), 'utf8');
  if (sameLock) {
    symlinkSync(join(root, 'node_modules'), join(folder, 'node_modules'), 'dir');
  } else {
    console.log(`installing ${commit.slice(0, 7)}'s locked dependencies (its lockfile differs)...`);
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], {
      cwd: folder,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, PATH: `${join(root, 'node_modules/.bin')}:${process.env.PATH ?? ''}` },
    });
  }
  if (!existsSync(join(folder, 'src/main.ts'))) throw new Error(`${commit} has no src/main.ts to start`);
  return folder;
}

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function workload(name: string): string {
  const found: Workload | undefined = workloads.find((candidate) => candidate.name === name);
  if (found === undefined) throw new Error(`no workload named ${name}`);
  return found.query;
}

/** The side of a pair: an operation and the process whose CPU it costs. */
interface Side {
  operation: () => Promise<void>;
  server: ServiceProcess;
}

/**
 * Warms both, then runs `rounds` pairs; even pairs measure the current version first, odd pairs the
 * earlier one, so neither always meets the machine second.
 */
async function alternate(current: Side, earlier: Side): Promise<{ current: Round; earlier: Round }[]> {
  for (const side of [current, earlier]) {
    await runLoad({
      total: Number.MAX_SAFE_INTEGER,
      durationMs: 700,
      concurrency,
      operation: side.operation,
    });
  }
  const pairs: { current: Round; earlier: Round }[] = [];
  for (let index = 0; index < rounds; index += 1) {
    if (index % 2 === 0) {
      const first = await measure(current);
      pairs.push({ current: first, earlier: await measure(earlier) });
    } else {
      const first = await measure(earlier);
      pairs.push({ current: await measure(current), earlier: first });
    }
  }
  return pairs;
}

async function measure(side: Side): Promise<Round> {
  const before = await side.server.cpuMs();
  const load = await runLoad({
    total: Number.MAX_SAFE_INTEGER,
    durationMs: roundMs,
    concurrency,
    operation: side.operation,
  });
  const after = await side.server.cpuMs();
  return { load, cpuMsPerOp: (after - before) / Math.max(1, load.operations) };
}

/** The median of `values` (the lower middle one for an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

interface Summary {
  name: string;
  current: { opsPerSecond: number; p50Ms: number; p99Ms: number; cpuMsPerOp: number; failures: number };
  earlier: { opsPerSecond: number; p50Ms: number; p99Ms: number; cpuMsPerOp: number; failures: number };
  ratios: { p50: number; p99: number; throughput: number; cpuPerOp: number };
}

function summarise(row: Row): Summary {
  const side = (pick: (pair: Row['pairs'][number]) => Round) => ({
    opsPerSecond: median(row.pairs.map((pair) => pick(pair).load.operationsPerSecond)),
    p50Ms: median(row.pairs.map((pair) => pick(pair).load.p50Ms)),
    p99Ms: median(row.pairs.map((pair) => pick(pair).load.p99Ms)),
    cpuMsPerOp: median(row.pairs.map((pair) => pick(pair).cpuMsPerOp)),
    failures: row.pairs.reduce((sum, pair) => sum + pick(pair).load.failures, 0),
  });
  const ratio = (of: (round: Round) => number) =>
    median(row.pairs.map((pair) => of(pair.current) / of(pair.earlier)));
  return {
    name: row.name,
    current: side((pair) => pair.current),
    earlier: side((pair) => pair.earlier),
    ratios: {
      p50: ratio((round) => round.load.p50Ms),
      p99: ratio((round) => round.load.p99Ms),
      throughput: ratio((round) => round.load.operationsPerSecond),
      cpuPerOp: ratio((round) => round.cpuMsPerOp),
    },
  };
}

function toMarkdown(report: {
  at: string;
  current: string;
  earlier: { ref: string; commit: string };
  machine: { cores: number; node: string; loadAverageBefore: number[]; loadAverageAfter: number[] };
  rows: readonly Summary[];
}): string {
  const f = (value: number, digits = 2) => value.toFixed(digits);
  const load = (values: number[]) => values.map((value) => f(value)).join(', ');
  const lines = [
    `# ${report.current} against ${report.earlier.ref} (${report.earlier.commit.slice(0, 7)})`,
    '',
    `Run at ${report.at} on ${report.machine.cores} cores, Node ${report.machine.node}; load average ` +
      `(1, 5, 15 min) ${load(report.machine.loadAverageBefore)} before, ${load(report.machine.loadAverageAfter)} after.`,
  ];
  // Only the live rows were asked for (BENCH_COMPARE_ROWS=live): no table of query rows.
  if (report.rows.length === 0) return lines.join('\n');
  lines.push(
    `${rounds} pairs of rounds of ${roundMs / 1000} s per row, the order alternating; ${concurrency} operations in flight.`,
    'Each ratio is current / earlier, the median of its ratios within a pair (below 1 is better for time and',
    'CPU, above 1 for throughput); the figures beside it are medians over the rounds, current / earlier.',
    '',
    '| row | p50 ms | p50 ratio | p99 ms | p99 ratio | ops/s | throughput ratio | CPU ms / op | CPU ratio | failures |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const row of report.rows) {
    const { current: c, earlier: e, ratios: r } = row;
    lines.push(
      `| ${row.name} | ${f(c.p50Ms, 1)} / ${f(e.p50Ms, 1)} | ${f(r.p50)} | ${f(c.p99Ms, 1)} / ${f(e.p99Ms, 1)} | ${f(r.p99)} ` +
        `| ${f(c.opsPerSecond, 0)} / ${f(e.opsPerSecond, 0)} | ${f(r.throughput)} | ${f(c.cpuMsPerOp, 3)} / ${f(e.cpuMsPerOp, 3)} ` +
        `| ${f(r.cpuPerOp)} | ${c.failures} / ${e.failures} |`,
    );
  }
  lines.push('', 'Any failure but 0 means the ratios of that row are not to be trusted.', '');
  return lines.join('\n');
}

await main();
