/**
 * An upstream outage, measured: the emulator and the facade run as processes of their own, the
 * facade with the circuit breaker and stale-if-error off (`before`: every failing call retried, as
 * before them) and with the defaults (`after`).
 *
 * 1. Every upstream call failing (502): N queries the cache does not hold (the customer and its
 *    accounts: two reads each), one after the other, and N × 10 twenty at a time (each on a facade
 *    just started). Reported: the upstream calls the emulator counted, and each query's latency.
 * 2. A dashboard polled every `BENCH_OUTAGE_POLL_MS` through an outage of `BENCH_OUTAGE_SECONDS`:
 *    what it was answered during the outage (fresh, stale, failed), the upstream calls the outage
 *    cost, and the time from the upstream's return to the first fresh answer (no error, no
 *    `extensions.stale`). The response cache's maximum age is `BENCH_OUTAGE_CACHE_MAX_AGE_SECONDS`,
 *    shorter than the outage, so the held answers go past their freshness during it.
 *
 * Options: `BENCH_OUTAGE_QUERIES` (20), `BENCH_OUTAGE_SECONDS` (30), `BENCH_OUTAGE_POLL_MS` (250),
 * `BENCH_OUTAGE_CACHE_MAX_AGE_SECONDS` (5).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { positiveIntegerFromEnv } from './env.ts';
import { percentile } from './load.ts';
import { startEmulatorService, startFacadeService, type ServiceProcess } from './processes.ts';

const queries = positiveIntegerFromEnv('BENCH_OUTAGE_QUERIES', 20);
const outageSeconds = positiveIntegerFromEnv('BENCH_OUTAGE_SECONDS', 30);
const pollMs = positiveIntegerFromEnv('BENCH_OUTAGE_POLL_MS', 250);
const cacheMaxAgeSeconds = positiveIntegerFromEnv('BENCH_OUTAGE_CACHE_MAX_AGE_SECONDS', 5);
const CONCURRENCY = 20;

const SETUPS = {
  before: { UPSTREAM_CIRCUIT_FAILURES: '0', CACHE_STALE_IF_ERROR_SECONDS: '0' },
  after: {},
} as const;
type Setup = keyof typeof SETUPS;

const dashboardOf = (customerId: string) =>
  `{ customer(id: "${customerId}") { id displayName accounts(first: 10) { nodes { id balances { currency available } } } } }`;

interface Answer {
  kind: 'fresh' | 'stale' | 'failed';
  ms: number;
}

async function ask(facade: ServiceProcess, document: string): Promise<Answer> {
  const started = performance.now();
  const response = await fetch(`${facade.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: document }),
  });
  const body = (await response.json()) as { errors?: unknown[]; extensions?: { stale?: unknown } };
  const ms = performance.now() - started;
  if (response.status !== 200 || body.errors !== undefined) return { kind: 'failed', ms };
  return { kind: body.extensions?.stale === undefined ? 'fresh' : 'stale', ms };
}

async function control(emulator: ServiceProcess, method: string, path: string, body?: object) {
  const response = await fetch(`${emulator.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

const breakUpstream = (emulator: ServiceProcess) =>
  control(emulator, 'PUT', '/_emulator/faults', { rules: [{ kind: 'request_failed', rate: 1 }] });
const mendUpstream = (emulator: ServiceProcess) => control(emulator, 'DELETE', '/_emulator/faults');
const resetCalls = (emulator: ServiceProcess) => control(emulator, 'DELETE', '/_emulator/requests');
const callsMade = async (emulator: ServiceProcess) =>
  ((await control(emulator, 'GET', '/_emulator/requests')) as { total: number }).total;

async function startFacade(emulator: ServiceProcess, setup: Setup): Promise<ServiceProcess> {
  return startFacadeService(`facade (${setup})`, emulator.url, {
    UPSTREAM_API_KEY: 'sk_sandbox_emulator',
    AUTH_MODE: 'none',
    CACHE_MAX_AGE_SECONDS: String(cacheMaxAgeSeconds),
    ...SETUPS[setup],
  });
}

const summary = (answers: readonly Answer[]) => {
  const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b);
  return `p50 ${percentile(sorted, 0.5).toFixed(0)} ms, p99 ${percentile(sorted, 0.99).toFixed(0)} ms`;
};

/**
 * Part 1: `total` queries the cache does not hold, `concurrency` at a time, with every upstream
 * call failing; on a facade of its own, so the circuit starts closed.
 */
async function uncachedQueries(
  emulator: ServiceProcess,
  setup: Setup,
  total: number,
  concurrency: number,
): Promise<string> {
  const facade = await startFacade(emulator, setup);
  try {
    await breakUpstream(emulator);
    await resetCalls(emulator);
    const answers: Answer[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const index = next++;
          answers.push(await ask(facade, dashboardOf(`cus_outage_${index}`)));
        }
      }),
    );
    const calls = await callsMade(emulator);
    const shape = concurrency === 1 ? 'one at a time' : `${concurrency} at a time`;
    return `| ${setup} | ${total}, ${shape} | ${calls} | ${summary(answers)} |`;
  } finally {
    await mendUpstream(emulator);
    await facade.stop();
  }
}

/** Part 2: a polled dashboard through an outage, and its recovery. */
async function dashboardThroughOutage(emulator: ServiceProcess, setup: Setup): Promise<string> {
  const facade = await startFacade(emulator, setup);
  const dashboard = dashboardOf('cus_acme');
  try {
    await ask(facade, dashboard);
    await sleep(2_000);
    await resetCalls(emulator);
    await breakUpstream(emulator);
    const during: Answer[] = [];
    const outageEnds = performance.now() + outageSeconds * 1_000;
    while (performance.now() < outageEnds) {
      during.push(await ask(facade, dashboard));
      await sleep(pollMs);
    }
    const outageCalls = await callsMade(emulator);
    await mendUpstream(emulator);
    const back = performance.now();
    let recoveredMs = Number.NaN;
    while (performance.now() - back < 60_000) {
      const answer = await ask(facade, dashboard);
      if (answer.kind === 'fresh') {
        recoveredMs = performance.now() - back;
        break;
      }
      await sleep(pollMs);
    }
    const count = (kind: Answer['kind']) => during.filter((answer) => answer.kind === kind).length;
    return `| ${setup} | ${count('fresh')} / ${count('stale')} / ${count('failed')} | ${summary(during)} | ${outageCalls} | ${recoveredMs.toFixed(0)} ms |`;
  } finally {
    await mendUpstream(emulator);
    await facade.stop();
  }
}

async function main(): Promise<void> {
  const emulator = await startEmulatorService();
  try {
    const load = (await import('node:os')).loadavg()[0]!.toFixed(1);
    console.log(
      `Upstream outage (${new Date().toISOString()}, load average ${load}; cache max age ${cacheMaxAgeSeconds} s)\n`,
    );
    console.log('Every upstream call failing (502):\n');
    console.log('| Setup | Uncached queries | Upstream calls | Latency |');
    console.log('| --- | --- | --- | --- |');
    for (const setup of ['before', 'after'] as const) {
      console.log(await uncachedQueries(emulator, setup, queries, 1));
      console.log(await uncachedQueries(emulator, setup, queries * 10, CONCURRENCY));
    }
    console.log(`\nA dashboard polled every ${pollMs} ms through a ${outageSeconds} s outage:\n`);
    console.log(
      '| Setup | Answers during it: fresh / stale / failed | Latency during it | Upstream calls during it | From the return to the first fresh answer |',
    );
    console.log('| --- | --- | --- | --- | --- |');
    for (const setup of ['before', 'after'] as const) {
      console.log(await dashboardThroughOutage(emulator, setup));
    }
  } finally {
    await emulator.stop();
  }
}

await main();
