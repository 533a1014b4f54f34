/**
 * `npm run bench:tracing`: what tracing costs, as ratios to the same facade with tracing off in the
 * same run. Four facades over one emulator, started the way `npm start` starts them
 * (scripts/start.ts, so tracing loads through the launcher): tracing off; tracing on with sampling
 * off (`OTEL_TRACES_SAMPLER=always_off`); tracing on with root spans never sampled but a caller's
 * sampled `traceparent` obeyed (`parentbased_always_off`; the benchmark's requests send none);
 * tracing on with every trace recorded and exported to an OTLP sink in this process (which answers
 * and discards).
 *
 * Each round runs the four back to back (starting with a different one each round) and takes the
 * ratios within the round, so whatever else the machine does hits all of them alike; the median
 * over the rounds is reported. Reported, never
 * asserted. Options: BENCH_SECONDS per run (default 2), BENCH_ROUNDS (5), BENCH_CONCURRENCY (16).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { findFreePort, startService, type ServiceProcess, startEmulatorService } from './processes.ts';
import { workloads } from './workloads.ts';

const API_KEY = 'sk_sandbox_emulator';
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
  facade?: ServiceProcess;
  pool?: Pool;
}

async function main(): Promise<void> {
  // The OTLP sink: answers every export with 200 and keeps nothing.
  let exportedBytes = 0;
  const sink = http.createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (exportedBytes += chunk.length));
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

  const emulator = await startEmulatorService();
  const variants: Variant[] = [
    { name: 'tracing off', env: {} },
    {
      name: 'tracing on, sampling off',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER: 'always_off' },
    },
    {
      name: 'tracing on, roots unsampled',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER: 'parentbased_always_off' },
    },
    {
      name: 'tracing on, every trace exported',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'always_on',
      },
    },
  ];
  try {
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
          AUTH_MODE: 'none',
          RATE_LIMIT_ENABLED: 'false',
          ...variant.env,
        },
        readyPath: '/readyz',
      });
      variant.pool = new Pool(variant.facade.url, { connections: concurrency });
    }

    console.log(
      `Tracing's cost: throughput and p50 as ratios to tracing off (median of ${rounds} rounds of ${seconds} s, concurrency ${concurrency})\n`,
    );
    console.log('| operation | variant | ops/s | throughput ratio | p50 ms | p50 ratio | failed |');
    console.log('| --- | --- | ---: | ---: | ---: | ---: | ---: |');
    for (const operation of operations) {
      const ask = (pool: Pool) => async () => {
        const response = await pool.request({
          method: 'POST',
          path: '/graphql',
          headers: { 'content-type': 'application/json' },
          body: operation.body,
        });
        const json = (await response.body.json()) as { errors?: unknown };
        if (response.statusCode !== 200 || json.errors !== undefined) throw new Error('failed');
      };
      // Warm-up: JIT, connections, Apollo's document cache.
      for (const variant of variants) {
        await runLoad({ total: 2_000, durationMs: 1_000, concurrency, operation: ask(variant.pool!) });
      }
      const results = variants.map((): LoadResult[] => []);
      for (let round = 0; round < rounds; round += 1) {
        // Each round starts with another variant, so none always runs first (or right after a
        // noisy neighbour).
        for (let step = 0; step < variants.length; step += 1) {
          const index = (step + round) % variants.length;
          const variant = variants[index]!;
          results[index]!.push(
            await runLoad({
              total: Number.MAX_SAFE_INTEGER,
              durationMs: seconds * 1000,
              concurrency,
              operation: ask(variant.pool!),
            }),
          );
        }
      }
      for (const [index, variant] of variants.entries()) {
        const mine = results[index]!;
        const off = results[0]!;
        const throughputRatio = median(
          mine.map((r, i) => r.operationsPerSecond / off[i]!.operationsPerSecond),
        );
        const p50Ratio = median(mine.map((r, i) => r.p50Ms / off[i]!.p50Ms));
        console.log(
          `| ${operation.name} | ${variant.name} | ${Math.round(median(mine.map((r) => r.operationsPerSecond)))} | ${throughputRatio.toFixed(2)} | ${median(mine.map((r) => r.p50Ms)).toFixed(1)} | ${p50Ratio.toFixed(2)} | ${mine.reduce((sum, r) => sum + r.failures, 0)} |`,
        );
      }
    }
    console.log(`\nOTLP bytes received by the sink: ${exportedBytes} (only the last variant exports).`);
  } finally {
    for (const variant of variants) {
      await variant.pool?.close();
      await variant.facade?.stop();
    }
    await emulator.stop();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

await main();
