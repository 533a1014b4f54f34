/**
 * `npm run bench:abuse`: how long the facade takes to refuse the worst documents it refuses, as a
 * ratio to an ordinary dashboard query answered in the same run. A refusal should cost less than a
 * real answer (ratio under 1): the limits run before any upstream call, and in time linear in the
 * document. Reported, never asserted (tests assert the refusals and the upstream call counts).
 *
 * The emulator and the facade run as child processes on loopback; requests are sent one at a time
 * (the question is what one request costs, not throughput), alternating the documents in each round
 * so whatever else the machine does hits all of them alike. Options (environment): BENCH_ABUSE_ROUNDS
 * (default 200). A JSON copy of the report goes to bench/results/abuse-latest.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import {
  fragmentFanOut,
  introspectionAliases,
  nestedListArgument,
  nestedSelections,
} from '../test/support/hostile-documents.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { findFreePort, startService, type ServiceProcess, startEmulatorService } from './processes.ts';
import { workloads } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
const rounds = positiveIntegerFromEnv('BENCH_ABUSE_ROUNDS', 200);
const root = fileURLToPath(new URL('..', import.meta.url));

/** One request body and the status it must be answered with. */
interface Case {
  name: string;
  body: string;
  status: number;
}

const dashboard = workloads.find((workload) => workload.name === 'customer dashboard')!;

const cases: Case[] = [
  { name: 'customer dashboard (answered)', body: dashboard.query, status: 200 },
  {
    name: 'fragment fan-out, 22 levels (cost)',
    body: JSON.stringify({ query: fragmentFanOut(22) }),
    status: 400,
  },
  {
    name: '1,000 aliases of __schema (tokens)',
    body: JSON.stringify({ query: introspectionAliases(1000) }),
    status: 400,
  },
  {
    name: '15 aliases of __schema (answered)',
    body: JSON.stringify({ query: introspectionAliases(15) }),
    status: 200,
  },
  {
    name: '16 aliases of __schema (aliases)',
    body: JSON.stringify({ query: introspectionAliases(16) }),
    status: 400,
  },
  {
    name: 'selections 10,000 deep (tokens)',
    body: JSON.stringify({ query: nestedSelections(10_000) }),
    status: 400,
  },
  // What a body just under the 64 KiB limit costs before GraphQL sees it (receiving and decoding
  // the JSON): the dashboard query followed by spaces, which JSON allows.
  {
    name: 'dashboard in a 60 KB body (answered)',
    body: `${dashboard.query}${' '.repeat(60_000)}`,
    status: 200,
  },
  {
    name: 'list argument 30,000 deep (tokens)',
    body: JSON.stringify({ query: nestedListArgument(30_000) }),
    status: 400,
  },
  {
    name: 'list argument 300,000 deep, 600 KB (body size)',
    body: JSON.stringify({ query: nestedListArgument(300_000) }),
    status: 413,
  },
];

async function main(): Promise<void> {
  const emulator = await startEmulatorService();
  const facadePort = await findFreePort();
  let facade: ServiceProcess | undefined;
  const client = new Pool(`http://127.0.0.1:${facadePort}`, { connections: 1 });
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
        LOG_LEVEL: 'error',
        WEBHOOK_REGISTER: 'false',
        NODE_ENV: 'production',
        // Both sides of every ratio pass the same door: the measure is the document, not the token.
        AUTH_MODE: 'none',
        RATE_LIMIT_ENABLED: 'false',
      },
      readyPath: '/readyz',
    });

    const send = async (item: Case): Promise<number> => {
      const started = performance.now();
      const response = await client.request({
        method: 'POST',
        path: '/graphql',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        body: item.body,
      });
      const text = await response.body.text();
      const elapsed = performance.now() - started;
      if (response.statusCode !== item.status) {
        throw new Error(
          `${item.name}: answered ${response.statusCode}, expected ${item.status}: ${text.slice(0, 300)}`,
        );
      }
      return elapsed;
    };

    // Warm-up: JIT, the connection, Apollo's document cache for the accepted documents.
    for (let round = 0; round < 20; round += 1) for (const item of cases) await send(item);
    await fetch(`${emulator.url}/_emulator/requests`, { method: 'DELETE' });

    const times = new Map<string, number[]>(cases.map((item) => [item.name, []]));
    for (let round = 0; round < rounds; round += 1) {
      for (const item of cases) times.get(item.name)!.push(await send(item));
    }
    const upstream = (await (await fetch(`${emulator.url}/_emulator/requests`)).json()) as { total: number };

    const dashboardMedian = median(times.get(cases[0]!.name)!);
    const report = cases.map((item) => {
      const samples = times.get(item.name)!;
      return {
        document: item.name,
        bytes: Buffer.byteLength(item.body),
        status: item.status,
        medianMs: round3(median(samples)),
        p99Ms: round3(percentile(samples, 0.99)),
        ratioToDashboard: round3(median(samples) / dashboardMedian),
      };
    });
    const refused = report.filter((row) => row.status !== 200);
    const worst = refused.reduce((a, b) => (b.ratioToDashboard > a.ratioToDashboard ? b : a));

    console.log(`Refusal time as a ratio to the dashboard query (${rounds} rounds, one request at a time)\n`);
    console.log('| document | request bytes | status | median ms | p99 ms | median / dashboard |');
    console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
    for (const row of report) {
      console.log(
        `| ${row.document} | ${row.bytes} | ${row.status} | ${row.medianMs} | ${row.p99Ms} | ${row.ratioToDashboard} |`,
      );
    }
    console.log(`\nWorst refusal: ${worst.document}, ${worst.ratioToDashboard}× the dashboard query.`);
    // Only the two dashboard requests call the upstream (4 calls each); every refusal makes none.
    console.log(
      `Upstream calls during the measured rounds: ${upstream.total} (${rounds * 8} expected: 2 dashboards × 4 per round).`,
    );

    await mkdir(`${root}bench/results`, { recursive: true });
    await writeFile(
      `${root}bench/results/abuse-latest.json`,
      `${JSON.stringify({ rounds, report, worst, upstreamCalls: upstream.total }, null, 2)}\n`,
    );
  } finally {
    await client.close();
    await facade?.stop();
    await emulator.stop();
  }
}

function median(samples: readonly number[]): number {
  return percentile(samples, 0.5);
}

function percentile(samples: readonly number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

await main();
