/**
 * `npm run bench:cache`: what the upstream response cache buys and what it costs, as ratios against
 * baselines measured in the same run.
 *
 * The emulator, a real Redis and three facades run as child processes on loopback: two replicas
 * with the cache on sharing the Redis (A and B), and one with it off (the baseline of the facade's
 * own path). Every figure carries the machine's load average, since the machine may be shared.
 *
 * - Dashboard asked again (the `customer dashboard` workload of `workloads.ts`) under 20 ± 5 ms of upstream
 *   latency: upstream calls per operation, p50 and throughput of A against the direct REST client
 *   and against the facade with the cache off, alternating rounds.
 * - Freshness: a top-up made at the upstream directly, its signed `account.updated` webhook posted
 *   to A; the moment A acknowledges, A and B are read at once (an old answer on A is a failure of
 *   the guarantee), then B again until it shows the change (the window on another replica), over
 *   BENCH_CACHE_CHANGES changes (100).
 * - Mixed workload, 90 % reads and 10 % top-ups through the facade, under the same latency: answers
 *   older than a write that completed before the read started (stale), and throughput against the
 *   cache off.
 * - BENCH_CACHE_SUBSCRIBERS (10 000) graphql-ws subscribers of one customer connecting, all leaving,
 *   and connecting again: the upstream reads of the subscribe-time customer check, cache on and off.
 * - Resident memory at the cap: A (CACHE_MAX_BYTES, BENCH_CACHE_MAX_BYTES = 8 MiB; A and B keep answers up to an hour here, so
 *   only events and the cap drop them) filled with
 *   distinct list reads past its cap, against the facade with the cache off after the same reads.
 *
 * Options (environment): BENCH_SECONDS per round (2), BENCH_CONCURRENCY (16), BENCH_LATENCY_MS and
 * BENCH_JITTER_MS (20 ± 5), BENCH_CACHE_CHANGES, BENCH_CACHE_SUBSCRIBERS, BENCH_CACHE_MAX_BYTES,
 * BENCH_FACADE_SCRIPT. The report goes to bench/results/ (`cache-<time>.md`, `cache-latest.md`,
 * `cache-latest.json`).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { startRedisServer } from '../scripts/redis-server.ts';
import { positiveIntegerFromEnv } from './env.ts';
import type { ClientsReply, ClientsRequest } from './fanout-clients.ts';
import { postSigned } from './lib/live-facade.ts';
import { percentile, runLoad, type LoadResult } from './load.ts';
import { askMemoryUsage } from './memory-probe-protocol.ts';
import { findFreePort, startEmulatorService, startService, type ServiceProcess } from './processes.ts';
import { createRestClient, workloads } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
const CONNECTIONS = 64;
const roundMs = positiveIntegerFromEnv('BENCH_SECONDS', 2) * 1000;
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const latencyMs = positiveIntegerFromEnv('BENCH_LATENCY_MS', 20);
const jitterMs = Math.min(latencyMs, Number(process.env.BENCH_JITTER_MS ?? 5));
const changes = positiveIntegerFromEnv('BENCH_CACHE_CHANGES', 100);
const subscribers = positiveIntegerFromEnv('BENCH_CACHE_SUBSCRIBERS', 10_000);
const capBytes = positiveIntegerFromEnv('BENCH_CACHE_MAX_BYTES', 8 * 1024 * 1024);
const root = fileURLToPath(new URL('..', import.meta.url));
const facadeScript = process.env.BENCH_FACADE_SCRIPT ?? `${root}src/main.ts`;

const ADA_USDC = `{ account(customerId: "cus_ada", id: "acc_ada_polygon") { balances { currency available } } }`;
const TOP_UP = `mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }`;

type Ask = (query: string, variables?: Record<string, unknown>) => Promise<Record<string, unknown>>;

/** Load average of the last minute, with the figure it goes with. */
const load1 = (): number => Number(loadavg()[0]!.toFixed(2));

async function main(): Promise<void> {
  const started = new Date();
  const loadBefore = loadavg();
  const secret = generateWebhookSecret();
  const redis = await startRedisServer();
  const emulator = await startEmulatorService();
  const services: ServiceProcess[] = [];
  const pools: Pool[] = [];
  try {
    const facade = async (name: string, env: Record<string, string>) => {
      const port = await findFreePort();
      // Each facade serves its metrics on a port of its own (METRICS_PORT's default is one port).
      const metricsPort = await findFreePort();
      const service = await startService({
        name,
        script: facadeScript,
        port,
        env: {
          PORT: String(port),
          METRICS_PORT: String(metricsPort),
          HOST: '127.0.0.1',
          NODE_ENV: 'production',
          LOG_LEVEL: 'warn',
          UPSTREAM_BASE_URL: emulator.url,
          UPSTREAM_API_KEY: API_KEY,
          UPSTREAM_CONNECTIONS: String(CONNECTIONS),
          WEBHOOK_REGISTER: 'false',
          WEBHOOK_SECRETS: secret,
          AUTH_MODE: 'none',
          RATE_LIMIT_ENABLED: 'false',
          ...env,
        },
        readyPath: '/readyz',
        // Memory is read after a full collection, through the probe the fan-out benchmark uses.
        nodeArgs: ['--expose-gc', '--import', pathToFileURL(`${root}bench/memory-probe.ts`).href],
        ipc: true,
      });
      services.push(service);
      metricsUrls.set(service.url, `http://127.0.0.1:${String(metricsPort)}`);
      return service;
    };
    const shared = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench-cache:' };
    // An hour's maximum age: what keeps A and B fresh here is the events alone, and the cap is
    // reached by filling, not lost to expiry while filling.
    const cachedEnv = {
      ...shared,
      CACHE_ENABLED: 'true',
      CACHE_MAX_AGE_SECONDS: '3600',
      CACHE_MAX_BYTES: String(capBytes),
    };
    const replicaA = await facade('facade A (cache on)', cachedEnv);
    const replicaB = await facade('facade B (cache on)', cachedEnv);
    const uncached = await facade('facade (cache off)', { CACHE_ENABLED: 'false' });
    const askerOf = (service: ServiceProcess): Ask => {
      const pool = new Pool(service.url, { connections: CONNECTIONS });
      pools.push(pool);
      return graphqlAsker(pool);
    };
    const askA = askerOf(replicaA);
    const askB = askerOf(replicaB);
    const askUncached = askerOf(uncached);
    const rest = createRestClient(emulator.url, API_KEY, CONNECTIONS);
    const upstream = emulatorControls(emulator.url);

    await upstream.latency(latencyMs - jitterMs, 2 * jitterMs);
    const dashboard = await measureDashboard(
      upstream,
      { ask: askA, service: replicaA },
      { ask: askUncached, service: uncached },
      rest,
    );
    const mixed = await measureMixed(askA, askUncached);
    await upstream.latency(0, 0);
    const freshness = await measureFreshness(emulator.url, replicaA.url, replicaB.url, secret, askA, askB);
    const reconnects = await measureReconnects(upstream, replicaA, uncached);
    const memory = await measureMemoryAtCap(replicaA, uncached, askA, askUncached);
    await rest.close();

    const report = {
      at: started.toISOString(),
      machine: { cores: availableParallelism(), node: process.version, loadBefore, loadAfter: loadavg() },
      settings: { roundMs, concurrency, latencyMs, jitterMs, changes, subscribers, capBytes },
      dashboard,
      freshness,
      mixed,
      reconnects,
      memory,
    };
    const markdown = toMarkdown(report);
    console.log(`\n${markdown}`);
    await mkdir(`${root}bench/results`, { recursive: true });
    const stamp = report.at.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
    await writeFile(`${root}bench/results/cache-${stamp}.md`, markdown);
    await writeFile(`${root}bench/results/cache-latest.md`, markdown);
    await writeFile(`${root}bench/results/cache-latest.json`, `${JSON.stringify(report, null, 2)}\n`);
  } finally {
    await Promise.all(pools.map((pool) => pool.close()));
    for (const service of services.reverse()) await service.stop();
    await emulator.stop();
    await redis.stop();
  }
}

/** The repeated dashboard: the cache against direct REST and against the cache switched off. */
async function measureDashboard(
  upstream: EmulatorControls,
  cachedFacade: { ask: Ask; service: ServiceProcess },
  uncachedFacade: { ask: Ask; service: ServiceProcess },
  rest: ReturnType<typeof createRestClient>,
) {
  const askCached = cachedFacade.ask;
  const askUncached = uncachedFacade.ask;
  const workload = workloads.find((candidate) => candidate.name === 'customer dashboard') ?? workloads[0]!;
  const { query, variables } = JSON.parse(workload.query) as {
    query: string;
    variables?: Record<string, unknown>;
  };
  const askDashboard = async (ask: Ask) => {
    const answer = await ask(query, variables);
    if (answer.errors !== undefined) throw new Error(JSON.stringify(answer.errors).slice(0, 300));
  };
  const operation = (ask: Ask) => () => askDashboard(ask);
  // Calls per operation, each side asked 20 times after a first (warming) one.
  const callsPer = async (run: () => Promise<unknown>): Promise<number> => {
    await run();
    const before = await upstream.total();
    for (let index = 0; index < 20; index += 1) await run();
    return ((await upstream.total()) - before) / 20;
  };
  const calls = {
    cached: await callsPer(() => askDashboard(askCached)),
    uncached: await callsPer(() => askDashboard(askUncached)),
    direct: await callsPer(() => workload.direct(rest)),
  };
  const rounds: {
    cached: LoadResult;
    uncached: LoadResult;
    direct: LoadResult;
    cpuMsPerOp: { cached: number; uncached: number };
    load1: number;
  }[] = [];
  /** A round of load on a facade, with the facade's CPU per operation (from /proc). */
  const facadeRound = async (facade: { ask: Ask; service: ServiceProcess }) => {
    const cpuBefore = await facade.service.cpuMs();
    const result = await timed(operation(facade.ask));
    return { result, cpuMsPerOp: ((await facade.service.cpuMs()) - cpuBefore) / result.operations };
  };
  for (let round = 0; round < 2; round += 1) {
    const cached = await facadeRound(cachedFacade);
    const direct = await timed(async () => {
      await workload.direct(rest);
    });
    const off = await facadeRound(uncachedFacade);
    rounds.push({
      cached: cached.result,
      uncached: off.result,
      direct,
      cpuMsPerOp: { cached: cached.cpuMsPerOp, uncached: off.cpuMsPerOp },
      load1: load1(),
    });
  }
  const median = (pick: (round: (typeof rounds)[number]) => number) =>
    percentile(
      rounds.map(pick).sort((a, b) => a - b),
      0.5,
    );
  const p50 = {
    cached: median((round) => round.cached.p50Ms),
    uncached: median((round) => round.uncached.p50Ms),
    direct: median((round) => round.direct.p50Ms),
  };
  const throughput = {
    cached: median((round) => round.cached.operationsPerSecond),
    uncached: median((round) => round.uncached.operationsPerSecond),
    direct: median((round) => round.direct.operationsPerSecond),
  };
  // One operation at a time: the latency of an answer, without the queueing of the loaded rounds.
  const alone = (operation: () => Promise<void>) =>
    runLoad({ total: 1_000_000, durationMs: roundMs, concurrency: 1, operation });
  const oneAtATime = {
    cached: (await alone(operation(askCached))).p50Ms,
    direct: (
      await alone(async () => {
        await workload.direct(rest);
      })
    ).p50Ms,
    load1: load1(),
  };
  const cpuMsPerOp = {
    cached: median((round) => round.cpuMsPerOp.cached),
    uncached: median((round) => round.cpuMsPerOp.uncached),
  };
  return {
    workload: workload.name,
    calls,
    p50,
    throughput,
    cpuMsPerOp,
    oneAtATime,
    p50VsDirect: p50.cached / p50.direct,
    throughputVsDirect: throughput.cached / throughput.direct,
    p50VsCacheOff: p50.cached / p50.uncached,
    throughputVsCacheOff: throughput.cached / throughput.uncached,
    load1: rounds.map((round) => round.load1),
  };
}

/**
 * A change at the upstream, its webhook posted to A: A is read once after the acknowledgement, B
 * until it shows the change. Both hold the old answer before each change.
 */
async function measureFreshness(
  emulatorUrl: string,
  webhookBaseUrl: string,
  bUrl: string,
  secret: string,
  askA: Ask,
  askB: Ask,
) {
  let oldOnA = 0;
  const windowsOnB: number[] = [];
  const readsOfB: number[] = [];
  const acks: number[] = [];
  // The mixed workload's top-ups through the cache-off facade, which shares no Redis with A and B
  // and receives no webhooks here, changed this account with nothing announcing it: announce it
  // once, as the platform's webhook would, and start when both replicas show the same balance.
  await postSigned(webhookBaseUrl, secret, accountUpdated());
  await until(async () => usdcOf(await askA(ADA_USDC)) === usdcOf(await askB(ADA_USDC)));
  for (let change = 0; change < changes; change += 1) {
    const before = usdcOf(await askA(ADA_USDC));
    const onB = usdcOf(await askB(ADA_USDC));
    if (onB !== before) {
      const upstreamNow = await fetch(`${emulatorUrl}/v3/customers/cus_ada/accounts/acc_ada_polygon`, {
        headers: { 'x-api-key': API_KEY },
      }).then((response) => response.text());
      throw new Error(
        `the replicas disagree before change ${change}: A ${before}, B ${onB}, upstream ${/"available":"([^"]+)"/.exec(upstreamNow)?.[1] ?? '?'}, ` +
          `invalidations A ${await gauge(webhookBaseUrl, 'facade_upstream_cache_invalidations_total')} B ${await gauge(bUrl, 'facade_upstream_cache_invalidations_total')}`,
      );
    }
    const topUp = await fetch(`${emulatorUrl}/v3/sandbox/accounts/acc_ada_polygon/topup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': API_KEY, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
    });
    await topUp.arrayBuffer();
    if (!topUp.ok) throw new Error(`the top-up answered ${topUp.status}`);
    const expected = before + 1;
    const sent = performance.now();
    const ack = (await postSigned(webhookBaseUrl, secret, accountUpdated())).status;
    const acknowledged = performance.now();
    acks.push(acknowledged - sent);
    if (ack !== 200) throw new Error(`the webhook answered ${ack}`);
    // A and B are both read the moment A acknowledged; B again until it shows the change.
    const [onA, firstOnB] = await Promise.all([askA(ADA_USDC), askB(ADA_USDC)]);
    if (usdcOf(onA) !== expected) oldOnA += 1;
    let reads = 1;
    for (let onB = usdcOf(firstOnB); onB !== expected; onB = usdcOf(await askB(ADA_USDC))) {
      reads += 1;
      if (performance.now() - acknowledged > 10_000) {
        const upstreamNow = await fetch(`${emulatorUrl}/v3/customers/cus_ada/accounts/acc_ada_polygon`, {
          headers: { 'x-api-key': API_KEY },
        }).then((response) => response.text());
        throw new Error(
          `B never showed the change ${change}: expected ${expected}, B ${usdcOf(await askB(ADA_USDC))}, ` +
            `A ${usdcOf(await askA(ADA_USDC))}, B's invalidations ${await gauge(bUrl, 'facade_upstream_cache_invalidations_total')}, ` +
            `upstream ${upstreamNow.slice(0, 400)}`,
        );
      }
    }
    windowsOnB.push(performance.now() - acknowledged);
    readsOfB.push(reads);
  }
  const sorted = [...windowsOnB].sort((a, b) => a - b);
  const sortedAcks = [...acks].sort((a, b) => a - b);
  return {
    changes,
    oldAnswersOnA: oldOnA,
    windowOnB: { p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99), maxMs: sorted.at(-1) },
    readsOfBUntilFresh: { first: readsOfB.filter((reads) => reads === 1).length, max: Math.max(...readsOfB) },
    ack: { p50Ms: percentile(sortedAcks, 0.5), p99Ms: percentile(sortedAcks, 0.99) },
    load1: load1(),
  };
}

/**
 * 90 % reads and 10 % top-ups through the facade. A read is stale when it shows less than every
 * top-up that had completed before it started (top-ups only ever add to the balance).
 */
async function measureMixed(askCached: Ask, askUncached: Ask) {
  const run = async (ask: Ask) => {
    const initial = usdcOf(await ask(ADA_USDC));
    let completed = 0;
    let stale = 0;
    let reads = 0;
    let writes = 0;
    const result = await timed(async () => {
      if (Math.random() < 0.1) {
        const answer = await ask(TOP_UP, {
          input: {
            accountId: 'acc_ada_polygon',
            amount: '1.00',
            currency: 'USDC',
            idempotencyKey: randomUUID(),
          },
        });
        if (answer.errors !== undefined) throw new Error(JSON.stringify(answer.errors));
        completed += 1;
        writes += 1;
        return;
      }
      const floor = initial + completed;
      reads += 1;
      if (usdcOf(await ask(ADA_USDC)) < floor) stale += 1;
    });
    return { result, reads, writes, stale, load1: load1() };
  };
  // Two rounds each, alternating, so drift on a shared machine hits both alike; the totals of both.
  const rounds: { cached: Awaited<ReturnType<typeof run>>; uncached: Awaited<ReturnType<typeof run>> }[] = [];
  for (let round = 0; round < 2; round += 1)
    rounds.push({ cached: await run(askCached), uncached: await run(askUncached) });
  const total = (side: 'cached' | 'uncached') => {
    const sides = rounds.map((round) => round[side]);
    const operations = sides.reduce((sum, one) => sum + one.result.operations, 0);
    const seconds = sides.reduce((sum, one) => sum + one.result.durationMs, 0) / 1000;
    return {
      operationsPerSecond: operations / seconds,
      p50Ms: percentile(
        sides.map((one) => one.result.p50Ms).sort((a, b) => a - b),
        0.5,
      ),
      reads: sides.reduce((sum, one) => sum + one.reads, 0),
      writes: sides.reduce((sum, one) => sum + one.writes, 0),
      stale: sides.reduce((sum, one) => sum + one.stale, 0),
      load1: sides.map((one) => one.load1),
    };
  };
  const cached = total('cached');
  const uncached = total('uncached');
  return {
    cached,
    uncached,
    throughputVsCacheOff: cached.operationsPerSecond / uncached.operationsPerSecond,
  };
}

/** Subscribers of one customer connecting, leaving, and connecting again: the customer reads. */
async function measureReconnects(
  upstream: EmulatorControls,
  cached: ServiceProcess,
  uncached: ServiceProcess,
) {
  const query = 'subscription { customerChanged(customerId: "cus_acme") { eventId } }';
  const customerRoute = 'GET /v3/customers/{customerId}';
  const wave = async (service: ServiceProcess) => {
    const before = (await upstream.byRoute())[customerRoute] ?? 0;
    const clients = startClientProcess();
    const began = performance.now();
    try {
      const reply = await clients.ask({
        op: 'connect',
        id: 0,
        groups: [
          { label: 'wave', wsUrl: `${service.url.replace(/^http/, 'ws')}/graphql`, count: subscribers },
        ],
        query,
        concurrency: 200,
      });
      if (reply.op !== 'connect' || reply.failed > 0)
        throw new Error(`connections failed: ${JSON.stringify(reply)}`);
      await until(async () => (await gauge(service.url, 'facade_graphql_ws_subscriptions')) >= subscribers);
      const seconds = (performance.now() - began) / 1000;
      return { reads: ((await upstream.byRoute())[customerRoute] ?? 0) - before, seconds, load1: load1() };
    } finally {
      clients.stop();
      await until(async () => (await gauge(service.url, 'facade_graphql_ws_subscriptions')) === 0);
    }
  };
  return {
    subscribers,
    cacheOn: { first: await wave(cached), again: await wave(cached) },
    cacheOff: { first: await wave(uncached), again: await wave(uncached) },
  };
}

/** A filled past its cap with distinct reads, against the cache off after the same reads. */
async function measureMemoryAtCap(
  cached: ServiceProcess,
  uncached: ServiceProcess,
  askCached: Ask,
  askUncached: Ask,
) {
  const before = { cached: await settledMemory(cached), uncached: await settledMemory(uncached) };
  // Every `updatedSince` is a distinct key; each answer is acme's whole list of accounts.
  const base = Date.UTC(2020, 0, 1);
  const distinctRead = `query ($since: DateTime!) {
    customer(id: "cus_acme") { accounts(updatedSince: $since) { nodes { id } } }
  }`;
  const sinceOf = (index: number) => new Date(base + index * 1000).toISOString();
  // One count for every fill of a facade, so each read is a key it has not read before.
  const next = new Map<Ask, number>();
  const fill = async (ask: Ask, count: number) => {
    await runLoad({
      total: count,
      concurrency,
      operation: async () => {
        const index = (next.get(ask) ?? 0) + 1;
        next.set(ask, index);
        await ask(distinctRead, { since: sinceOf(index) });
      },
    });
  };
  let reads = 0;
  // Until the cap is reached and evictions have gone on for as many answers again.
  for (;;) {
    await fill(askCached, 1_000);
    reads += 1_000;
    const evictions = await gauge(cached.url, 'facade_upstream_cache_evictions_total');
    const entries = await gauge(cached.url, 'facade_upstream_cache_entries');
    if (evictions >= entries || reads >= 50_000) break;
  }
  await fill(askUncached, reads);
  return {
    capBytes,
    reads,
    heldBytes: await gauge(cached.url, 'facade_upstream_cache_bytes'),
    entries: await gauge(cached.url, 'facade_upstream_cache_entries'),
    evictions: await gauge(cached.url, 'facade_upstream_cache_evictions_total'),
    before,
    after: { cached: await settledMemory(cached), uncached: await settledMemory(uncached) },
    load1: load1(),
  };
}

/** RSS and V8 heap used after a full garbage collection. */
async function settledMemory(service: ServiceProcess): Promise<{ rss: number; heapUsed: number }> {
  const reply = await askMemoryUsage(service.child, 'full');
  if (reply === undefined) throw new Error(`${service.name} did not answer the memory probe`);
  return { rss: reply.usage.rss, heapUsed: reply.usage.heapUsed };
}

function timed(operation: () => Promise<void>): Promise<LoadResult> {
  return runLoad({ total: 1_000_000, durationMs: roundMs, concurrency, operation });
}

function graphqlAsker(pool: Pool): Ask {
  return async (query, variables) => {
    const response = await pool.request({
      method: 'POST',
      path: '/graphql',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.body.json()) as Record<string, unknown>;
    if (response.statusCode !== 200) throw new Error(`the facade answered ${response.statusCode}`);
    return body;
  };
}

function usdcOf(answer: Record<string, unknown>): number {
  const data = answer.data as
    { account?: { balances?: { currency: string; available: string }[] } } | undefined;
  const balances = data?.account?.balances;
  if (balances === undefined) throw new Error(`no account in ${JSON.stringify(answer).slice(0, 300)}`);
  return Number(balances.find((held) => held.currency === 'USDC')?.available ?? 0);
}

function accountUpdated() {
  return {
    id: `evt_bench_${randomUUID()}`,
    type: 'account.updated',
    occurredAt: new Date().toISOString(),
    environment: 'sandbox',
    data: {
      customerId: 'cus_ada',
      resourceType: 'account',
      resourceId: 'acc_ada_polygon',
      object: { id: 'acc_ada_polygon' },
    },
  };
}

interface EmulatorControls {
  latency(fixedMs: number, jitterMs: number): Promise<void>;
  total(): Promise<number>;
  byRoute(): Promise<Record<string, number>>;
}

function emulatorControls(url: string): EmulatorControls {
  const counts = async () =>
    (await (await fetch(`${url}/_emulator/requests`)).json()) as {
      total: number;
      byRoute: Record<string, number>;
    };
  return {
    async latency(fixedMs, jitter) {
      const response = await fetch(`${url}/_emulator/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ latency: { fixedMs, jitterMs: jitter }, rules: [] }),
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`the emulator refused the faults: ${response.status}`);
    },
    total: async () => (await counts()).total,
    byRoute: async () => (await counts()).byRoute,
  };
}

/** Each facade's metrics server, by the facade's base URL. */
const metricsUrls = new Map<string, string>();

/** One unlabelled sample of the `/metrics` of the facade at `baseUrl`. */
async function gauge(baseUrl: string, name: string): Promise<number> {
  const metricsUrl = metricsUrls.get(baseUrl);
  if (metricsUrl === undefined) throw new Error(`no metrics server known for ${baseUrl}`);
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
}

async function until(condition: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error('timed out waiting on the facade');
    await sleep(50);
  }
}

interface ClientProcess {
  ask(request: ClientsRequest): Promise<ClientsReply>;
  stop(): void;
}

function startClientProcess(): ClientProcess {
  const child: ChildProcess = fork(`${root}bench/fanout-clients.ts`, [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (reply: ClientsReply) => void>();
  let nextId = 0;
  child.on('message', (message: unknown) => {
    const reply = message as ClientsReply;
    waiting.get(reply.id)?.(reply);
    waiting.delete(reply.id);
  });
  return {
    ask(request) {
      nextId += 1;
      const id = nextId;
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        child.send({ ...request, id });
      });
    },
    stop() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

const ms = (value: number): string => `${value.toFixed(1)} ms`;
const ratio = (value: number): string => `${value.toFixed(2)}×`;
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

function toMarkdown(report: {
  at: string;
  machine: { cores: number; node: string; loadBefore: number[]; loadAfter: number[] };
  dashboard: Awaited<ReturnType<typeof measureDashboard>>;
  freshness: Awaited<ReturnType<typeof measureFreshness>>;
  mixed: Awaited<ReturnType<typeof measureMixed>>;
  reconnects: Awaited<ReturnType<typeof measureReconnects>>;
  memory: Awaited<ReturnType<typeof measureMemoryAtCap>>;
}): string {
  const { dashboard: d, freshness: f, mixed: m, reconnects: r, memory: mem } = report;
  const loads = (values: readonly number[]) => values.map((value) => value.toFixed(2)).join(' / ');
  return [
    `# Response cache benchmark, ${report.at}`,
    '',
    `${report.machine.cores} cores, Node ${report.machine.node}; load average before ${loads(report.machine.loadBefore)}, after ${loads(report.machine.loadAfter)}.`,
    `Rounds of ${roundMs / 1000} s at concurrency ${concurrency}; upstream latency ${latencyMs} ± ${jitterMs} ms where said.`,
    '',
    `## Dashboard asked again (\`${d.workload}\`, ${latencyMs} ± ${jitterMs} ms upstream; load ${loads(d.load1)})`,
    '',
    '| | upstream calls / op | p50 | throughput | facade CPU / op |',
    '|---|---:|---:|---:|---:|',
    `| facade, cache on | ${d.calls.cached} | ${ms(d.p50.cached)} | ${d.throughput.cached.toFixed(0)}/s | ${ms(d.cpuMsPerOp.cached)} |`,
    `| facade, cache off | ${d.calls.uncached} | ${ms(d.p50.uncached)} | ${d.throughput.uncached.toFixed(0)}/s | ${ms(d.cpuMsPerOp.uncached)} |`,
    `| direct REST | ${d.calls.direct} | ${ms(d.p50.direct)} | ${d.throughput.direct.toFixed(0)}/s | |`,
    '',
    `One operation at a time (load ${d.oneAtATime.load1}): p50 ${ms(d.oneAtATime.cached)} cache on, ${ms(d.oneAtATime.direct)} direct REST, ${ratio(d.oneAtATime.cached / d.oneAtATime.direct)}.`,
    '',
    `At concurrency ${concurrency}, cache on against direct REST: p50 ${ratio(d.p50VsDirect)}, throughput ${ratio(d.throughputVsDirect)}. ` +
      `Against the cache off: p50 ${ratio(d.p50VsCacheOff)}, throughput ${ratio(d.throughputVsCacheOff)}.`,
    '',
    `## A change at the upstream, its webhook acknowledged by replica A (${f.changes} changes; load ${f.load1})`,
    '',
    `- Old answers read on A after the acknowledgement: ${f.oldAnswersOnA} of ${f.changes}.`,
    `- Replica B, read from the moment A acknowledged until it shows the change (the time includes that read): p50 ${ms(f.windowOnB.p50Ms)}, p99 ${ms(f.windowOnB.p99Ms)}, max ${ms(f.windowOnB.maxMs ?? Number.NaN)}; fresh on the first read ${f.readsOfBUntilFresh.first} of ${f.changes} times, at most ${f.readsOfBUntilFresh.max} reads.`,
    `- Webhook acknowledgement: p50 ${ms(f.ack.p50Ms)}, p99 ${ms(f.ack.p99Ms)}.`,
    '',
    `## Mixed: 90 % reads, 10 % top-ups through the facade (${latencyMs} ± ${jitterMs} ms upstream; two rounds each, alternating)`,
    '',
    '| | operations/s | p50 | reads | writes | stale reads | load |',
    '|---|---:|---:|---:|---:|---:|---:|',
    `| cache on | ${m.cached.operationsPerSecond.toFixed(0)} | ${ms(m.cached.p50Ms)} | ${m.cached.reads} | ${m.cached.writes} | ${m.cached.stale} | ${loads(m.cached.load1)} |`,
    `| cache off | ${m.uncached.operationsPerSecond.toFixed(0)} | ${ms(m.uncached.p50Ms)} | ${m.uncached.reads} | ${m.uncached.writes} | ${m.uncached.stale} | ${loads(m.uncached.load1)} |`,
    '',
    `Throughput, cache on against off: ${ratio(m.throughputVsCacheOff)}.`,
    '',
    `## ${r.subscribers} subscribers of one customer connecting, then reconnecting (no upstream latency)`,
    '',
    '| | customer reads, first wave | seconds | load | customer reads, again | seconds | load |',
    '|---|---:|---:|---:|---:|---:|---:|',
    `| cache on | ${r.cacheOn.first.reads} | ${r.cacheOn.first.seconds.toFixed(1)} | ${r.cacheOn.first.load1} | ${r.cacheOn.again.reads} | ${r.cacheOn.again.seconds.toFixed(1)} | ${r.cacheOn.again.load1} |`,
    `| cache off | ${r.cacheOff.first.reads} | ${r.cacheOff.first.seconds.toFixed(1)} | ${r.cacheOff.first.load1} | ${r.cacheOff.again.reads} | ${r.cacheOff.again.seconds.toFixed(1)} | ${r.cacheOff.again.load1} |`,
    '',
    `## Resident memory at the cap (${mib(mem.capBytes)}; load ${mem.load1})`,
    '',
    `${mem.reads} distinct list reads on each facade; memory after a full GC.`,
    '',
    '| | held | answers | evicted | RSS before → after | V8 heap used before → after |',
    '|---|---:|---:|---:|---:|---:|',
    `| cache on | ${mib(mem.heldBytes)} | ${mem.entries} | ${mem.evictions} | ${mib(mem.before.cached.rss)} → ${mib(mem.after.cached.rss)} | ${mib(mem.before.cached.heapUsed)} → ${mib(mem.after.cached.heapUsed)} |`,
    `| cache off | | | | ${mib(mem.before.uncached.rss)} → ${mib(mem.after.uncached.rss)} | ${mib(mem.before.uncached.heapUsed)} → ${mib(mem.after.uncached.heapUsed)} |`,
    '',
    `Heap growth, cache on less cache off: ${mib(mem.after.cached.heapUsed - mem.before.cached.heapUsed - (mem.after.uncached.heapUsed - mem.before.uncached.heapUsed))} for a cap of ${mib(mem.capBytes)}.`,
    '',
  ].join('\n');
}

await main();
