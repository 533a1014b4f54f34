/**
 * `npm run bench:budgets`: what the operations budgets and their RateLimit header fields cost, as
 * ratios to the same facade with every budget off (`RATE_LIMIT_ENABLED=false`) in the same run.
 * Three facades over one emulator, started the way `npm start` starts them, each verifying real
 * tokens of a dev issuer in this process (so token checks cost all three alike): budgets off; the
 * caller's own budget (`RATE_LIMIT_REQUESTS`) with the header fields; the caller's client named in
 * `RATE_LIMIT_BY_CLIENT` with the header fields. Budgets are counted in memory (no `REDIS_URL`):
 * what is measured is the facade's own work per operation, not a Redis round trip.
 *
 * Each round runs the three back to back (starting with a different one each round) and takes the
 * ratios within the round, so whatever else the machine does hits all of them alike; the median
 * over the rounds is reported: throughput, p50 and the facade's CPU per operation (user + system
 * from /proc). Reported, never asserted. Options: BENCH_SECONDS per run (default 2), BENCH_ROUNDS
 * (5), BENCH_CONCURRENCY (16).
 */
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { startDevIssuer } from '../dev-issuer/index.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { findFreePort, startService, type ServiceProcess, startEmulatorService } from './processes.ts';
import { workloads } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
const CLIENT_ID = 'bench-dashboard';
/** Large enough that no budget is spent during the run: the cost of counting, not of refusing. */
const BUDGET = '10000000';
const root = fileURLToPath(new URL('..', import.meta.url));
const seconds = positiveIntegerFromEnv('BENCH_SECONDS', 2);
const rounds = positiveIntegerFromEnv('BENCH_ROUNDS', 5);
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);

const dashboard = workloads.find((workload) => workload.name === 'customer dashboard')!;
const operations = [
  { name: 'customer dashboard (4 upstream calls)', body: dashboard.query },
  { name: '`{ __typename }`', body: JSON.stringify({ query: '{ __typename }' }) },
];

interface Variant {
  name: string;
  env: Record<string, string>;
  /** The `RateLimit-Policy` an answer must carry (checked once before measuring). */
  policy: string | undefined;
  facade?: ServiceProcess;
  pool?: Pool;
}

interface Measured extends LoadResult {
  cpuMsPerOperation: number;
}

async function main(): Promise<void> {
  const issuer = await startDevIssuer({
    clients: [{ clientId: CLIENT_ID, clientSecret: `${CLIENT_ID}-secret`, roles: ['operator'] }],
  });
  const emulator = await startEmulatorService();
  const variants: Variant[] = [
    { name: 'budgets off', env: { RATE_LIMIT_ENABLED: 'false' }, policy: undefined },
    {
      name: 'per-caller budget, header fields',
      env: { RATE_LIMIT_REQUESTS: BUDGET },
      policy: `"per-caller";q=${BUDGET};w=60`,
    },
    {
      name: 'per-client budget, header fields',
      env: { RATE_LIMIT_REQUESTS: BUDGET, RATE_LIMIT_BY_CLIENT: `${CLIENT_ID}=${BUDGET}` },
      policy: `"per-client";q=${BUDGET};w=60`,
    },
  ];
  try {
    const authorization = `Bearer ${await issuer.token(CLIENT_ID)}`;
    for (const variant of variants) {
      const port = await findFreePort();
      variant.facade = await startService({
        name: `facade (${variant.name})`,
        script: `${root}scripts/start.ts`,
        port,
        env: {
          PORT: String(port),
          HOST: '127.0.0.1',
          NODE_ENV: 'production',
          UPSTREAM_BASE_URL: emulator.url,
          UPSTREAM_API_KEY: API_KEY,
          LOG_LEVEL: 'info',
          WEBHOOK_REGISTER: 'false',
          // Three facades side by side: each its own free metrics port.
          METRICS_PORT: '0',
          AUTH_ISSUER: issuer.issuer,
          AUTH_AUDIENCE: issuer.audience,
          AUTH_JWKS_URL: issuer.jwksUrl,
          ...variant.env,
        },
        readyPath: '/readyz',
      });
      variant.pool = new Pool(variant.facade.url, { connections: concurrency });
    }

    console.log(
      `Operations budgets and RateLimit header fields: ratios to budgets off (median of ${rounds} rounds of ${seconds} s, concurrency ${concurrency}, budgets in memory)\n`,
    );
    console.log(
      '| operation | variant | ops/s | throughput ratio | p50 ms | p50 ratio | CPU ms/op | CPU/op ratio | failed |',
    );
    console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const operation of operations) {
      const ask = (pool: Pool) => async () => {
        const response = await pool.request({
          method: 'POST',
          path: '/graphql',
          headers: { 'content-type': 'application/json', authorization },
          body: operation.body,
        });
        const json = (await response.body.json()) as { errors?: unknown };
        if (response.statusCode !== 200 || json.errors !== undefined) throw new Error('failed');
      };
      for (const variant of variants) {
        // The answers are what the variant says: no header fields when off, its policy when on.
        const response = await variant.pool!.request({
          method: 'POST',
          path: '/graphql',
          headers: { 'content-type': 'application/json', authorization },
          body: operation.body,
        });
        await response.body.dump();
        const policy = response.headers['ratelimit-policy'];
        if (response.statusCode !== 200 || policy !== variant.policy) {
          throw new Error(
            `${variant.name}: status ${response.statusCode}, RateLimit-Policy ${String(policy)}`,
          );
        }
        // Warm-up: JIT, connections, Apollo's document cache.
        await runLoad({ total: 2_000, durationMs: 1_000, concurrency, operation: ask(variant.pool!) });
      }
      const results = variants.map((): Measured[] => []);
      for (let round = 0; round < rounds; round += 1) {
        // Each round starts with another variant, so none always runs first.
        for (let step = 0; step < variants.length; step += 1) {
          const index = (step + round) % variants.length;
          const variant = variants[index]!;
          const cpuBefore = await variant.facade!.cpuMs();
          const result = await runLoad({
            total: Number.MAX_SAFE_INTEGER,
            durationMs: seconds * 1000,
            concurrency,
            operation: ask(variant.pool!),
          });
          const cpuMs = (await variant.facade!.cpuMs()) - cpuBefore;
          results[index]!.push({ ...result, cpuMsPerOperation: cpuMs / Math.max(1, result.operations) });
        }
      }
      const off = results[0]!;
      for (const [index, variant] of variants.entries()) {
        const mine = results[index]!;
        const ratio = (pick: (r: Measured) => number) => median(mine.map((r, i) => pick(r) / pick(off[i]!)));
        console.log(
          `| ${operation.name} | ${variant.name} | ${Math.round(median(mine.map((r) => r.operationsPerSecond)))} | ${ratio((r) => r.operationsPerSecond).toFixed(2)} | ${median(mine.map((r) => r.p50Ms)).toFixed(1)} | ${ratio((r) => r.p50Ms).toFixed(2)} | ${median(mine.map((r) => r.cpuMsPerOperation)).toFixed(3)} | ${ratio((r) => r.cpuMsPerOperation).toFixed(2)} | ${mine.reduce((sum, r) => sum + r.failures, 0)} |`,
        );
      }
    }
  } finally {
    for (const variant of variants) {
      await variant.pool?.close();
      await variant.facade?.stop();
    }
    await emulator.stop();
    await issuer.close();
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

await main();
