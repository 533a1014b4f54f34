/**
 * `npm run bench:fanout-queries`: queries while a fan-out runs, the normal state of a live
 * deployment. One facade (the response cache off, as `bench:queries` runs it) holds
 * `BENCH_FANOUT_QUERIES_SUBSCRIBERS` (10,000) graphql-ws subscribers (real `ws` clients in child
 * processes, `fanout-clients.ts`), all following one account; the customer dashboard is measured
 * against the same screen read by direct REST calls at `BENCH_CONCURRENCY` (16), in pairs of rounds
 * whose order alternates, each ratio taken within its pair and the median over the pairs reported,
 * as `bench:queries` does. Two phases in the same run: **quiet** (the subscribers connected, no
 * event) and **fan-out** (a signed `account.updated` webhook posted every second, as the upstream
 * sends one after a top-up, each reaching every subscriber). The subscribers' deliveries over the
 * fan-out phase are counted, so a fan-out that fell behind shows.
 *
 * Every upstream call waits `BENCH_LATENCY_MS` ± `BENCH_JITTER_MS` (20 ± 5) at the emulator, as the
 * rows of `bench:queries` the goals compare with do (the network and the upstream's own work): with
 * an emulator answering at once, the ratios would measure loopback against the facade's CPU alone.
 *
 * Options (environment): BENCH_FANOUT_QUERIES_SUBSCRIBERS (10000), BENCH_SECONDS per round (3),
 * BENCH_ROUNDS pairs per phase (3), BENCH_CONCURRENCY (16), BENCH_LATENCY_MS (20; 0 for none),
 * BENCH_JITTER_MS (5), BENCH_FANOUT_CLIENT_PROCESSES (2), and
 * those of `lib/live-facade.ts`. The report is printed and written to
 * bench/results/fanout-queries-latest.md (not kept). Nothing is asserted.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { BENCH_CONNECTIONS, graphqlAsker, setFaults } from './asking.ts';
import { positiveIntegerFromEnv } from './env.ts';
import {
  ACCOUNT_SUBSCRIPTION,
  accountUpdated,
  checkOpenFiles,
  postSigned,
  root,
  share,
  sourceAddressesFor,
  startClientProcess,
  startFacade,
  waitForLiveCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { runLoad, type LoadResult } from './load.ts';
import { readCpuMs, startEmulatorService, type ServiceProcess } from './processes.ts';
import { createRestClient, workloads } from './workloads.ts';

const SUBSCRIPTION = ACCOUNT_SUBSCRIPTION;
const API_KEY = 'sk_sandbox_emulator';
const EVENT_EVERY_MS = 1000;

const subscribers = positiveIntegerFromEnv('BENCH_FANOUT_QUERIES_SUBSCRIBERS', 10_000);
const roundMs = positiveIntegerFromEnv('BENCH_SECONDS', 3) * 1000;
const rounds = positiveIntegerFromEnv('BENCH_ROUNDS', 3);
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);
const latencyMs = Number(process.env.BENCH_LATENCY_MS ?? 20);
const jitterMs = Math.min(latencyMs, Number(process.env.BENCH_JITTER_MS ?? 5));

/** One pair of rounds: the facade's and direct REST's. */
interface Pair {
  facade: LoadResult;
  direct: LoadResult;
}

/** What one phase measured. */
interface Phase {
  name: string;
  pairs: Pair[];
  facadeCpuMsPerQuery: number;
  events: number;
  delivered: number;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** Posts a signed event every second until `stop` is set; answers the ids posted. */
async function eventsEverySecond(facade: ServiceProcess, secret: string, stop: { set: boolean }) {
  const ids: string[] = [];
  for (let index = 0; !stop.set; index += 1) {
    const started = performance.now();
    const event = accountUpdated(index);
    const answer = await postSigned(facade.url, secret, event);
    if (answer.status !== 200) throw new Error(`the webhook was answered ${answer.status}`);
    ids.push(event.id);
    await sleep(Math.max(0, EVENT_EVERY_MS - (performance.now() - started)));
  }
  return ids;
}

async function main(): Promise<void> {
  const loadAverageBefore = loadavg();
  const started = new Date();
  await checkOpenFiles(subscribers, clientProcesses);
  const emulator = await startEmulatorService();
  const secret = generateWebhookSecret();
  const clients: ClientProcess[] = [];
  let facade: ServiceProcess | undefined;
  const rest = createRestClient(emulator.url, API_KEY, BENCH_CONNECTIONS);
  let pool: Pool | undefined;
  try {
    facade = await startFacade(emulator.url, secret, undefined, 'fanout-queries:', 1, {
      env: { CACHE_ENABLED: 'false', UPSTREAM_CONNECTIONS: String(BENCH_CONNECTIONS) },
    });
    const live = facade;
    pool = new Pool(live.url, { connections: BENCH_CONNECTIONS });
    const ask = graphqlAsker(pool);
    const dashboard = workloads.find((workload) => workload.name === 'customer dashboard')!;
    for (let index = 0; index < clientProcesses; index += 1) clients.push(startClientProcess());
    const replies = await Promise.all(
      clients.map((client, index) =>
        client.ask({
          op: 'connect',
          id: 0,
          query: SUBSCRIPTION,
          concurrency: 50,
          sourceAddresses: sourceAddressesFor(subscribers),
          groups: [
            {
              label: 'facade',
              wsUrl: `${live.url.replace(/^http/, 'ws')}/graphql`,
              count: share(subscribers, clients.length, index),
            },
          ],
        }),
      ),
    );
    const failed = replies.reduce((sum, reply) => sum + (reply.op === 'connect' ? reply.failed : 0), 0);
    await waitForLiveCounts(live, (counts) => counts.subscriptions >= subscribers - failed, 300_000);
    await setFaults(emulator, { latency: { fixedMs: latencyMs - jitterMs, jitterMs: 2 * jitterMs } });
    // Warm both sides before anything is measured.
    await runLoad({
      total: 200,
      concurrency,
      operation: async () => {
        await ask(dashboard.query);
      },
    });
    await runLoad({
      total: 200,
      concurrency,
      operation: async () => {
        await dashboard.direct(rest);
      },
    });

    const measurePhase = async (name: string, withEvents: boolean): Promise<Phase> => {
      const stop = { set: false };
      const posting = withEvents ? eventsEverySecond(live, secret, stop) : Promise.resolve([]);
      const pairs: Pair[] = [];
      let cpuMs = 0;
      let queries = 0;
      const facadeRound = async () => {
        const before = await readCpuMs(live.pid);
        const load = await runLoad({
          total: 1_000_000,
          durationMs: roundMs,
          concurrency,
          operation: async () => {
            await ask(dashboard.query);
          },
        });
        cpuMs += (await readCpuMs(live.pid)) - before;
        queries += load.operations;
        return load;
      };
      const directRound = () =>
        runLoad({
          total: 1_000_000,
          durationMs: roundMs,
          concurrency,
          operation: async () => {
            await dashboard.direct(rest);
          },
        });
      for (let pair = 0; pair < rounds; pair += 1) {
        if (pair % 2 === 0) {
          const facadeLoad = await facadeRound();
          pairs.push({ facade: facadeLoad, direct: await directRound() });
        } else {
          const direct = await directRound();
          pairs.push({ facade: await facadeRound(), direct });
        }
      }
      stop.set = true;
      const ids = await posting;
      // Every subscriber's deliveries of this phase's events, once the last had time to arrive.
      await sleep(2_000);
      const reports = await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })));
      let delivered = 0;
      for (const report of reports) {
        if (report.op !== 'report') continue;
        for (const id of ids) delivered += report.arrivals[`facade ${id}`]?.length ?? 0;
      }
      console.log(`measured: ${name}`);
      return {
        name,
        pairs,
        facadeCpuMsPerQuery: cpuMs / Math.max(1, queries),
        events: ids.length,
        delivered,
      };
    };
    const phases = [await measurePhase('quiet (subscribers connected, no event)', false)];
    phases.push(await measurePhase(`fan-out (an event a second to ${subscribers} subscribers)`, true));
    await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));

    const markdown = toMarkdown(phases, started, loadAverageBefore, subscribers - failed);
    console.log(`\n${markdown}`);
    await mkdir(`${root}bench/results`, { recursive: true });
    await writeFile(`${root}bench/results/fanout-queries-latest.md`, markdown);
  } finally {
    for (const client of clients) client.stop();
    await pool?.close();
    await rest.close();
    await facade?.stop();
    await emulator.stop();
  }
}

function toMarkdown(phases: Phase[], started: Date, loadAverageBefore: number[], connected: number): string {
  const f = (value: number, digits = 2) => value.toFixed(digits);
  const lines = [
    `Run at ${started.toISOString()} on ${availableParallelism()} cores, Node ${process.version}; load average ` +
      `${loadAverageBefore.map((value) => f(value)).join(', ')} before, ${loadavg()
        .map((value) => f(value))
        .join(', ')} after. ${connected} subscribers connected; the customer dashboard, cache off, at ` +
      `concurrency ${concurrency}, ${latencyMs} ± ${jitterMs} ms per upstream call; ${rounds} pairs of ${roundMs / 1000} s rounds per phase, the order alternating.`,
    '',
    '| phase | facade / direct p50 ms | p50 ratio | facade / direct p99 ms | p99 ratio | facade / direct ops/s | throughput ratio | facade CPU ms / query | events, delivered / expected |',
    '|---|---|--:|---|--:|---|--:|--:|--:|',
  ];
  for (const phase of phases) {
    // One measure's two columns: the facade's figure and direct REST's (medians), then their ratio.
    const compared = (measure: (load: LoadResult) => number, digits: number): string =>
      `${f(median(phase.pairs.map((pair) => measure(pair.facade))), digits)} / ` +
      `${f(median(phase.pairs.map((pair) => measure(pair.direct))), digits)} ` +
      `| ${f(median(phase.pairs.map((pair) => measure(pair.facade) / measure(pair.direct))))}`;
    lines.push(
      `| ${phase.name} | ${compared((load) => load.p50Ms, 1)} | ${compared((load) => load.p99Ms, 1)} ` +
        `| ${compared((load) => load.operationsPerSecond, 0)} ` +
        `| ${f(phase.facadeCpuMsPerQuery, 3)} | ${phase.events}, ${phase.delivered} / ${phase.events * connected} |`,
    );
  }
  const failures = phases.flatMap((phase) =>
    phase.pairs.flatMap((pair) => [pair.facade.failures, pair.direct.failures]),
  );
  lines.push('', `Failed operations: ${failures.reduce((sum, count) => sum + count, 0)}.`, '');
  return lines.join('\n');
}

await main();
