/**
 * `npm run bench:gateway-cache`: Hive Gateway's response cache in front of the facade, with the
 * shipped configuration (deploy/gateway.config.ts, gateway-response-cache.ts) and the real
 * `hive-gateway` CLI: two gateway replicas sharing a real Redis, the facade invalidating it.
 *
 * The emulator, the facade and both gateways run as processes of their own on loopback; the dev
 * issuer and the support-notes subgraph in this process. Every figure carries the machine's load.
 *
 * - Repeated dashboard: BENCH_GATEWAY_READS (200) reads of acme's dashboard alternating between the
 *   two gateways after one first read: operations the facade served and upstream calls (0 each).
 * - Freshness: BENCH_GATEWAY_CHANGES (100) times, a top-up made at the upstream directly and its
 *   signed `account.updated` webhook posted to the facade; once it is acknowledged, the next read
 *   through a gateway (alternating) must show it (stale answers counted). Per change: when the
 *   gateways' cache was invalidated (the Redis mark of the accounts list's tag, Redis's clock, the
 *   same machine's), against the webhook's send and its acknowledgement; and the time from the
 *   acknowledgement to that fresh read's answer. p50 and p99 of each.
 *
 * Options (environment): BENCH_GATEWAY_READS, BENCH_GATEWAY_CHANGES. The report goes to bench/results/
 * (`gateway-cache-<time>.md`, `gateway-cache-latest.md`, `gateway-cache-latest.json`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startDevIssuer, type DevIssuer } from '../dev-issuer/index.ts';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { createSupportNotesServer } from '../examples/support-notes/server.ts';
import { composeSupergraph, loadRepositorySubgraphs } from '../scripts/compose-supergraph.ts';
import { startRedisServer } from '../scripts/redis-server.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { accountUpdated, postSigned, root, upstreamRequests } from './lib/live-facade.ts';
import { percentile } from './load.ts';
import { findFreePort, startEmulatorService, startFacadeService, type ServiceProcess } from './processes.ts';
import { workloads } from './workloads.ts';

const reads = positiveIntegerFromEnv('BENCH_GATEWAY_READS', 200);
const changes = positiveIntegerFromEnv('BENCH_GATEWAY_CHANGES', 100);
const PREFIX = 'bench-gateway-cache:';
/** The tag every top-up's event invalidates and every dashboard carries: acme's list of accounts. */
const LIST_TAG = 'default:list:cus_acme:accounts';
const dashboard = JSON.parse(workloads.find((workload) => workload.name === 'customer dashboard')!.query) as {
  query: string;
  variables: Record<string, unknown>;
};

/** A gateway CLI process. */
type Gateway = { url: string; child: ChildProcess };

async function main(): Promise<void> {
  const started = new Date();
  const loadBefore = loadavg();
  const secret = generateWebhookSecret();
  const redisServer = await startRedisServer();
  const emulator = await startEmulatorService();
  const issuer = await startDevIssuer({ port: 0 });
  const notes = createSupportNotesServer();
  const { url: notesUrl } = await notes.listen(0);
  const workDir = await mkdtemp(join(tmpdir(), 'bench-gateway-cache-'));
  const gateways: Gateway[] = [];
  let facade: ServiceProcess | undefined;
  const redis = new Redis(redisServer.url);
  try {
    const metricsPort = await findFreePort();
    facade = await startFacadeService('facade', emulator.url, {
      METRICS_PORT: String(metricsPort),
      UPSTREAM_API_KEY: 'sk_sandbox_emulator',
      AUTH_ISSUER: issuer.issuer,
      AUTH_AUDIENCE: issuer.audience,
      CACHE_ENABLED: 'true',
      WEBHOOK_REGISTER: 'false',
      WEBHOOK_SECRETS: secret,
      GATEWAY_CACHE_REDIS_URL: redisServer.url,
      GATEWAY_CACHE_KEY_PREFIX: PREFIX,
    });
    const supergraph = join(workDir, 'supergraph.graphql');
    const subgraphs = loadRepositorySubgraphs({
      facadeUrl: `${facade.url}/graphql`,
      supportNotesUrl: notesUrl,
    });
    await writeFile(supergraph, composeSupergraph(subgraphs).supergraphSdl);
    for (let index = 0; index < 2; index += 1)
      gateways.push(await startGateway(supergraph, issuer, redisServer.url));
    const token = await issuer.token('demo-acme');
    const ask = async (gateway: Gateway) => askDashboard(gateway.url, token);
    const operations = () => facadeOperations(`http://127.0.0.1:${metricsPort}`);
    const repeated = await measureRepeated(ask, gateways, operations, emulator);
    const freshness = await measureFreshness(ask, gateways, { emulator, facade, secret, redis });
    const report = {
      at: started.toISOString(),
      machine: { cores: availableParallelism(), node: process.version, loadBefore, loadAfter: loadavg() },
      settings: { reads, changes },
      repeated,
      freshness,
    };
    const markdown = toMarkdown(report);
    console.log(`\n${markdown}`);
    await mkdir(`${root}bench/results`, { recursive: true });
    const stamp = report.at.replaceAll(':', '-').replace(/\.\d+Z$/, 'Z');
    await writeFile(`${root}bench/results/gateway-cache-${stamp}.md`, markdown);
    await writeFile(`${root}bench/results/gateway-cache-latest.md`, markdown);
    await writeFile(`${root}bench/results/gateway-cache-latest.json`, `${JSON.stringify(report, null, 2)}\n`);
  } finally {
    redis.disconnect();
    for (const gateway of gateways) gateway.child.kill('SIGTERM');
    await facade?.stop();
    await notes.close();
    await issuer.close();
    await emulator.stop();
    await redisServer.stop();
    await rm(workDir, { recursive: true, force: true });
  }
}

/** The `hive-gateway` CLI over `supergraph`, in deploy/ (where it reads gateway.config.ts), ready. */
async function startGateway(supergraph: string, issuer: DevIssuer, redisUrl: string): Promise<Gateway> {
  const port = await findFreePort();
  const bin = join(root, 'node_modules/@graphql-hive/gateway/dist/bin.js');
  const child = spawn(
    process.execPath,
    [bin, 'supergraph', supergraph, '--host', '127.0.0.1', '--port', String(port)],
    {
      cwd: join(root, 'deploy'),
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? tmpdir(),
        AUTH_ISSUER: issuer.issuer,
        AUTH_AUDIENCE: issuer.audience,
        GATEWAY_CACHE_REDIS_URL: redisUrl,
        GATEWAY_CACHE_KEY_PREFIX: PREFIX,
      },
      stdio: 'ignore',
    },
  );
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    if (child.exitCode !== null) break;
    const ready = await fetch(`${base}/readiness`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) return { url: `${base}/graphql`, child };
    await sleep(200);
  }
  child.kill('SIGKILL');
  throw new Error('hive-gateway did not become ready');
}

type Dashboard = {
  customer: { accounts: { nodes: { id: string; balances: { currency: string; available: string }[] }[] } };
};

/** Acme's dashboard through a gateway: acme's ETH account's available USDC. */
async function askDashboard(url: string, token: string): Promise<number> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(dashboard),
  });
  const body = (await response.json()) as { data?: Dashboard; errors?: unknown };
  if (body.data === undefined || body.errors !== undefined)
    throw new Error(`the dashboard failed: ${JSON.stringify(body)}`);
  const account = body.data.customer.accounts.nodes.find((node) => node.id === 'acc_acme_eth');
  return Number(account?.balances.find((balance) => balance.currency === 'USDC')?.available ?? 0);
}

/** Operations the facade has served (its `facade_operations_total`, every outcome). */
async function facadeOperations(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(/^facade_operations_total\{[^}]*\} (\d+)/gm)) total += Number(match[1]);
  return total;
}

/** The repeated dashboard: one first read, then `reads` more, alternating between the gateways. */
async function measureRepeated(
  ask: (gateway: Gateway) => Promise<number>,
  gateways: readonly Gateway[],
  operations: () => Promise<number>,
  emulator: ServiceProcess,
) {
  await ask(gateways[0]!);
  const upstreamBefore = await upstreamRequests(emulator);
  const operationsBefore = await operations();
  const startedAt = performance.now();
  for (let index = 0; index < reads; index += 1) await ask(gateways[index % 2]!);
  const seconds = (performance.now() - startedAt) / 1000;
  return {
    reads,
    facadeOperations: (await operations()) - operationsBefore,
    upstreamCalls: (await upstreamRequests(emulator)) - upstreamBefore,
    readsPerSecond: Math.round(reads / seconds),
  };
}

/** Each change's webhook, its acknowledgement, the gateways' invalidation and the next read. */
async function measureFreshness(
  ask: (gateway: Gateway) => Promise<number>,
  gateways: readonly Gateway[],
  parts: { emulator: ServiceProcess; facade: ServiceProcess; secret: string; redis: Redis },
) {
  const sentToInvalidated: number[] = [];
  const invalidatedBeforeAck: number[] = [];
  const ackToFreshAnswer: number[] = [];
  let stale = 0;
  for (let index = 0; index < changes; index += 1) {
    const before = await ask(gateways[index % 2]!);
    const topUp = await fetch(`${parts.emulator.url}/v3/sandbox/accounts/acc_acme_eth/topup`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': 'sk_sandbox_emulator',
        'idempotency-key': randomUUID(),
      },
      body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
    });
    if (!topUp.ok) throw new Error(`the top-up failed: ${topUp.status}`);
    const sentAt = Date.now();
    const acknowledged = await postSigned(parts.facade.url, parts.secret, accountUpdated(index));
    const ackAt = Date.now();
    if (acknowledged.status !== 200) throw new Error(`the webhook was answered ${acknowledged.status}`);
    const after = await ask(gateways[(index + 1) % 2]!);
    ackToFreshAnswer.push(Date.now() - ackAt);
    if (after !== before + 1) stale += 1;
    const invalidatedAt = Number(await parts.redis.get(`${PREFIX}invalidated:${LIST_TAG}`));
    sentToInvalidated.push(invalidatedAt - sentAt);
    invalidatedBeforeAck.push(ackAt - invalidatedAt);
  }
  const summary = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
  };
  return {
    changes,
    staleFirstReads: stale,
    sentToInvalidatedMs: summary(sentToInvalidated),
    invalidatedBeforeAckMs: summary(invalidatedBeforeAck),
    ackToFreshAnswerMs: summary(ackToFreshAnswer),
  };
}

type Report = {
  at: string;
  machine: { cores: number; node: string; loadBefore: number[]; loadAfter: number[] };
  settings: { reads: number; changes: number };
  repeated: Awaited<ReturnType<typeof measureRepeated>>;
  freshness: Awaited<ReturnType<typeof measureFreshness>>;
};

function toMarkdown(report: Report): string {
  const { repeated, freshness, machine } = report;
  const ms = ({ p50, p99 }: { p50: number; p99: number }) => `${p50} / ${p99}`;
  return [
    `# Hive Gateway's response cache, invalidated by the facade (${report.at})`,
    '',
    `${machine.cores} cores, Node ${machine.node}, load ${machine.loadBefore.map((load) => load.toFixed(2)).join(' ')} before, ${machine.loadAfter.map((load) => load.toFixed(2)).join(' ')} after.`,
    '',
    '| What | Figure |',
    '| --- | --- |',
    `| repeated dashboard through two gateways: reads / operations the facade served / upstream calls | ${repeated.reads} / ${repeated.facadeOperations} / ${repeated.upstreamCalls} (${repeated.readsPerSecond} reads/s, one client) |`,
    `| changes / first reads after the acknowledgement that were stale | ${freshness.changes} / ${freshness.staleFirstReads} |`,
    `| webhook sent → gateways' cache invalidated, ms (p50 / p99) | ${ms(freshness.sentToInvalidatedMs)} |`,
    `| gateways' cache invalidated → webhook acknowledged, ms (p50 / p99; the invalidation comes first) | ${ms(freshness.invalidatedBeforeAckMs)} |`,
    `| acknowledged → fresh answer through the other gateway, ms (p50 / p99; one facade read) | ${ms(freshness.ackToFreshAnswerMs)} |`,
    '',
  ].join('\n');
}

await main();
