/**
 * `npm run bench`: measures the facade against the direct-REST baseline in the same run and reports
 * ratios, never absolute limits.
 *
 * The emulator and the facade run as child processes on loopback. For each workload the runner
 * checks that both ways read the same data, counts the upstream calls one operation makes each way,
 * then alternates facade and baseline rounds (so drift on a shared machine hits both alike) and
 * reports throughput, latency percentiles and the facade's resident memory under load.
 *
 * Options (environment): BENCH_OPERATIONS (per round, default 2000), BENCH_CONCURRENCY (default 16),
 * BENCH_ROUNDS (default 2). A JSON copy of the report goes to bench/results/latest.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { findFreePort, startService, type ServiceProcess } from './processes.ts';
import { createRestClient, workloads, type Workload } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
const CONNECTIONS = 64;

const operations = positiveIntegerFromEnv('BENCH_OPERATIONS', 2000);
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const rounds = positiveIntegerFromEnv('BENCH_ROUNDS', 2);

const root = fileURLToPath(new URL('..', import.meta.url));

interface WorkloadReport {
  workload: string;
  description: string;
  upstreamCallsPerOperation: { facade: number; direct: number };
  facade: LoadResult;
  direct: LoadResult;
  throughputRatio: number;
  p50Ratio: number;
  p99Ratio: number;
}

async function main(): Promise<void> {
  const emulatorPort = await findFreePort();
  const emulator = await startService({
    name: 'emulator',
    script: `${root}emulator/main.ts`,
    port: emulatorPort,
    env: { EMULATOR_PORT: String(emulatorPort), EMULATOR_DATA: 'demo' },
    readyPath: '/_emulator/requests',
  });
  const facadePort = await findFreePort();
  let facade: ServiceProcess | undefined;
  const rest = createRestClient(emulator.url, API_KEY, CONNECTIONS);
  const graphql = new Pool(`http://127.0.0.1:${facadePort}`, { connections: CONNECTIONS });
  try {
    facade = await startService({
      name: 'facade',
      script: `${root}src/main.ts`,
      port: facadePort,
      env: {
        PORT: String(facadePort),
        HOST: '127.0.0.1',
        UPSTREAM_BASE_URL: emulator.url,
        UPSTREAM_API_KEY: API_KEY,
        UPSTREAM_CONNECTIONS: String(CONNECTIONS),
        LOG_LEVEL: 'error',
        WEBHOOK_REGISTER: 'false',
      },
      readyPath: '/readyz',
    });

    const askFacade = async (body: string): Promise<unknown> => {
      const response = await graphql.request({
        method: 'POST',
        path: '/graphql',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const json = (await response.body.json()) as { data?: unknown; errors?: unknown[] };
      if (response.statusCode !== 200 || json.errors !== undefined) {
        throw new Error(`facade answered ${response.statusCode}: ${JSON.stringify(json.errors)}`);
      }
      return json.data;
    };

    const idleRss = await facade.rssBytes();
    // Resident memory after every facade round: a plateau, not a climb, is what no leak looks like.
    const rssAfterRounds: number[] = [];
    const reports: WorkloadReport[] = [];
    for (const workload of workloads) {
      const calls = await countUpstreamCalls(emulator, workload, askFacade, rest);
      const facadeResults: LoadResult[] = [];
      const directResults: LoadResult[] = [];
      // Warm both paths (JIT, connection pools) before measuring.
      await runLoad({
        total: 200,
        concurrency,
        operation: async () => void (await askFacade(workload.query)),
      });
      await runLoad({ total: 200, concurrency, operation: async () => void (await workload.direct(rest)) });
      for (let round = 0; round < rounds; round += 1) {
        facadeResults.push(
          await runLoad({
            total: operations,
            concurrency,
            operation: async () => void (await askFacade(workload.query)),
          }),
        );
        rssAfterRounds.push(await facade.rssBytes());
        directResults.push(
          await runLoad({
            total: operations,
            concurrency,
            operation: async () => void (await workload.direct(rest)),
          }),
        );
      }
      const facadeBest = best(facadeResults);
      const directBest = best(directResults);
      reports.push({
        workload: workload.name,
        description: workload.description,
        upstreamCallsPerOperation: calls,
        facade: facadeBest,
        direct: directBest,
        throughputRatio: facadeBest.operationsPerSecond / directBest.operationsPerSecond,
        p50Ratio: facadeBest.p50Ms / directBest.p50Ms,
        p99Ratio: facadeBest.p99Ms / directBest.p99Ms,
      });
    }
    const peakRss = Math.max(idleRss, ...rssAfterRounds);
    const memory = {
      idleRssBytes: idleRss,
      rssAfterRoundsBytes: rssAfterRounds,
      peakRssBytes: peakRss,
      peakOverIdle: peakRss / idleRss,
    };
    printReport(reports, memory);
    await mkdir(`${root}bench/results`, { recursive: true });
    await writeFile(
      `${root}bench/results/latest.json`,
      `${JSON.stringify({ at: new Date().toISOString(), operations, concurrency, rounds, reports, memory }, null, 2)}\n`,
    );
  } finally {
    await graphql.close();
    await rest.close();
    await facade?.stop();
    await emulator.stop();
  }
}

/** Asks once each way, checks both saw the same accounts, and returns the upstream calls each made. */
async function countUpstreamCalls(
  emulator: ServiceProcess,
  workload: Workload,
  askFacade: (body: string) => Promise<unknown>,
  rest: ReturnType<typeof createRestClient>,
): Promise<{ facade: number; direct: number }> {
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
  return { facade: middle - before, direct: after - middle };
}

/** The round with the highest throughput: the least disturbed by anything else on the machine. */
function best(results: readonly LoadResult[]): LoadResult {
  return results.reduce((a, b) => (b.operationsPerSecond > a.operationsPerSecond ? b : a));
}

function printReport(
  reports: readonly WorkloadReport[],
  memory: { idleRssBytes: number; rssAfterRoundsBytes: number[]; peakRssBytes: number; peakOverIdle: number },
): void {
  const fixed = (value: number, digits = 2): string => value.toFixed(digits);
  console.log(`\n${operations} operations per round, ${concurrency} in flight, best of ${rounds} rounds\n`);
  console.log(
    '| workload | upstream calls (facade / direct) | facade ops/s | direct ops/s | throughput ratio | p50 ratio | p99 ratio |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const report of reports) {
    console.log(
      `| ${report.workload} | ${report.upstreamCallsPerOperation.facade} / ${report.upstreamCallsPerOperation.direct} | ${fixed(report.facade.operationsPerSecond, 0)} | ${fixed(report.direct.operationsPerSecond, 0)} | ${fixed(report.throughputRatio)} | ${fixed(report.p50Ratio)} | ${fixed(report.p99Ratio)} |`,
    );
  }
  const mib = (bytes: number): string => `${fixed(bytes / 1024 / 1024, 1)} MiB`;
  console.log(
    `\nfacade resident memory: idle ${mib(memory.idleRssBytes)}, peak under load ${mib(memory.peakRssBytes)} (ratio ${fixed(memory.peakOverIdle)})`,
  );
  console.log(`after each facade round: ${memory.rssAfterRoundsBytes.map(mib).join(', ')}`);
  console.log(
    'failures:',
    reports.map((r) => `${r.workload} ${r.facade.failures}/${r.direct.failures}`).join(', '),
  );
}

await main();
