/**
 * Measures the emulator's throughput for a simple authenticated GET (`GET /v3/customers/cus_acme`),
 * so the README can say how far it is from being a benchmark's bottleneck.
 *
 * The emulator runs as its own process (one event loop, so one core for its JavaScript); this
 * process only generates load with an undici pool. Usage:
 *   node bench/emulator-throughput.ts            # 20 000 requests, 32 connections
 *   BENCH_TOTAL=50000 BENCH_CONNECTIONS=64 node bench/emulator-throughput.ts
 */
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { Pool } from 'undici';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad } from './load.ts';
import { findFreePort, startService } from './processes.ts';

const total = positiveIntegerFromEnv('BENCH_TOTAL', 20_000);
const connections = positiveIntegerFromEnv('BENCH_CONNECTIONS', 32);
const path = '/v3/customers/cus_acme';

const port = await findFreePort();
const emulator = await startService({
  name: 'emulator',
  script: new URL('../emulator/main.ts', import.meta.url).pathname,
  port,
  env: { EMULATOR_PORT: String(port), EMULATOR_DATA: 'demo' },
  readyPath: '/_emulator/health',
});
const pinned = pinToCores(emulator.pid);
const pool = new Pool(emulator.url, { connections, pipelining: 1 });

/**
 * With two or more cores and `taskset` available, the emulator gets core 0 to itself and the load
 * generator core 1, so the number measures the emulator on one core, not the two competing.
 */
function pinToCores(emulatorPid: number): boolean {
  if (availableParallelism() < 2) return false;
  try {
    execFileSync('taskset', ['-pc', '0', String(emulatorPid)], { stdio: 'ignore' });
    execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

try {
  let unexpected = 0;
  const get = async () => {
    const { statusCode, body } = await pool.request({
      method: 'GET',
      path,
      headers: { 'x-api-key': 'sk_sandbox_emulator' },
    });
    await body.dump();
    if (statusCode !== 200) {
      unexpected++;
      throw new Error(`status ${statusCode}`);
    }
  };

  // Warm-up: let V8 optimise the hot path before measuring.
  await runLoad({ total: Math.min(2_000, total), concurrency: connections, operation: get });
  const result = await runLoad({ total, concurrency: connections, operation: get });
  const rss = await emulator.rssBytes();

  console.log(`GET ${path} against the emulator (${connections} connections, ${result.operations} requests)`);
  console.log(`  emulator pinned to one core: ${pinned ? 'yes (core 0; load generator on core 1)' : 'no'}`);
  console.log(`  throughput: ${Math.round(result.operationsPerSecond)} req/s`);
  console.log(
    `  latency:    p50 ${result.p50Ms.toFixed(2)} ms, p95 ${result.p95Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms`,
  );
  console.log(`  failures:   ${result.failures} (non-200: ${unexpected})`);
  console.log(`  emulator RSS after the run: ${(rss / 1024 / 1024).toFixed(0)} MiB`);
  if (result.failures > 0) process.exitCode = 1;
} finally {
  await pool.close();
  await emulator.stop();
}
