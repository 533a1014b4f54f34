/**
 * Rotating the upstream key under load: the emulator and the facade run as processes of their own,
 * the facade reading its key from a file laid out as a mounted Kubernetes Secret
 * (`UPSTREAM_API_KEY_FILE`). Workers send a query then a sandbox top-up (each with an
 * Idempotency-Key of its own) back to back. Midway the new key is added at the emulator, the
 * Secret is replaced (the kubelet's symlink swap), the facade's reload line is awaited, and after
 * the window the old key is revoked at the emulator. Reported: failed operations (goal 0), doubled
 * or lost writes (the emulator's balance against the acknowledged top-ups; goal 0), and the
 * latency around the switch and around the revocation against the seconds before the switch.
 *
 * Options: `BENCH_ROTATION_BEFORE_SECONDS` (load before the switch, default 20),
 * `BENCH_ROTATION_WINDOW_SECONDS` (both keys valid, default 5), `BENCH_ROTATION_AFTER_SECONDS`
 * (load after the revocation, default 10), `BENCH_ROTATION_WORKERS` (default 8),
 * `BENCH_ROTATION_TRIGGER` (`watch`, the default: the facade sees the file change; `sighup`: the
 * facade is also sent SIGHUP).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  addEmulatorKey,
  ledgerBalance,
  mountedSecret,
  revokeEmulatorKey,
  runRotationLoad,
  TOP_UP_AMOUNT,
  type LoadOperation,
} from '../scripts/key-rotation.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { percentile } from './load.ts';
import { startEmulatorService, startFacadeService, type ServiceProcess } from './processes.ts';

const OLD_KEY = 'sk_sandbox_emulator';
const NEW_KEY = 'sk_sandbox_bench_rotated';
const IDENTITY = 'sandbox-read-write';

const beforeSeconds = positiveIntegerFromEnv('BENCH_ROTATION_BEFORE_SECONDS', 20);
const windowSeconds = positiveIntegerFromEnv('BENCH_ROTATION_WINDOW_SECONDS', 5);
const afterSeconds = positiveIntegerFromEnv('BENCH_ROTATION_AFTER_SECONDS', 10);
const workers = positiveIntegerFromEnv('BENCH_ROTATION_WORKERS', 8);
const trigger = process.env['BENCH_ROTATION_TRIGGER'] === 'sighup' ? 'sighup' : 'watch';
/** The first seconds of load are a warm-up, left out of the baseline. */
const WARM_UP_MS = 2_000;
/** How long after the switch (and after the revocation) counts as "around" it. */
const AROUND_MS = 2_000;

interface Stats {
  operations: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
}

function statsOf(operations: readonly LoadOperation[]): Stats {
  const latencies = operations.map((operation) => operation.latencyMs).sort((a, b) => a - b);
  return {
    operations: operations.length,
    failed: operations.filter((operation) => !operation.ok).length,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    max: latencies.at(-1) ?? 0,
  };
}

const fixed = (value: number): string => value.toFixed(1);
const ratio = (value: number, baseline: number): string =>
  baseline > 0 ? (value / baseline).toFixed(2) : 'n/a';

async function main(): Promise<void> {
  const services: ServiceProcess[] = [];
  try {
    const emulator = await startEmulatorService();
    services.push(emulator);
    const secret = mountedSecret(`${OLD_KEY}\n`);
    const facade = await startFacadeService('facade', emulator.url, {
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_FILE: secret.file,
      LOG_LEVEL: 'info',
      AUTH_MODE: 'none',
    });
    services.push(facade);
    const lines: string[] = [];
    let partial = '';
    facade.child.stdout?.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString()).split('\n');
      partial = parts.pop() ?? '';
      lines.push(...parts);
    });
    const rotatedAt = (): boolean => lines.some((line) => line.includes('UPSTREAM_API_KEY: rotated'));

    const startBalance = await ledgerBalance(emulator.url, OLD_KEY);
    let stopped = false;
    const started = performance.now();
    const load = runRotationLoad({
      graphqlUrl: `${facade.url}/graphql`,
      headers: () => ({}),
      workers,
      stop: () => stopped,
    });

    await sleep(beforeSeconds * 1000);
    // The procedure of docs/operations.md: the new key at the upstream, the Secret, the reload line.
    await addEmulatorKey(emulator.url, NEW_KEY, IDENTITY);
    const switchAt = performance.now();
    secret.replace(`${NEW_KEY}\n`);
    if (trigger === 'sighup') process.kill(facade.pid, 'SIGHUP');
    while (!rotatedAt()) {
      if (performance.now() - switchAt > 30_000) throw new Error('the facade did not log the rotation');
      await sleep(10);
    }
    const reloadedAt = performance.now();
    await sleep(windowSeconds * 1000);
    const revokeAt = performance.now();
    await revokeEmulatorKey(emulator.url, OLD_KEY);
    await sleep(afterSeconds * 1000);
    stopped = true;
    const operations = await load;
    const endBalance = await ledgerBalance(emulator.url, NEW_KEY);

    const during = (from: number, to: number) =>
      operations.filter((operation) => operation.startedMs >= from && operation.startedMs < to);
    const before = statsOf(during(started + WARM_UP_MS, switchAt));
    const aroundSwitch = statsOf(during(switchAt, reloadedAt + AROUND_MS));
    const aroundRevoke = statsOf(during(revokeAt, revokeAt + AROUND_MS));
    const all = statsOf(operations);
    const acknowledged = operations.filter((operation) => operation.acknowledged === true).length;
    const creditedCents = Math.round((endBalance - startBalance) * 100);
    const amountCents = Math.round(Number(TOP_UP_AMOUNT) * 100);
    const doubled = Math.max(0, creditedCents / amountCents - acknowledged);
    const failures = new Map<string, number>();
    for (const operation of operations) {
      if (operation.failure !== undefined)
        failures.set(operation.failure, (failures.get(operation.failure) ?? 0) + 1);
    }
    const keyLeaked = lines.some((line) => line.includes(OLD_KEY) || line.includes(NEW_KEY));

    const row = (name: string, stats: Stats) =>
      `| ${name} | ${stats.operations} | ${stats.failed} | ${fixed(stats.p50)} | ${ratio(stats.p50, before.p50)} | ${fixed(stats.p99)} | ${ratio(stats.p99, before.p99)} | ${fixed(stats.max)} |`;
    const report = [
      `Key rotation under load: ${workers} workers (a query then a top-up each), trigger ${trigger}, ` +
        `${beforeSeconds} s before the switch, ${windowSeconds} s window, ${afterSeconds} s after the revocation.`,
      '',
      '| phase | operations | failed | p50 ms | p50 ratio | p99 ms | p99 ratio | max ms |',
      '| --- | --- | --- | --- | --- | --- | --- | --- |',
      row(`before the switch (after a ${WARM_UP_MS / 1000} s warm-up)`, before),
      row(`switch: file replaced to ${AROUND_MS / 1000} s after the reload line`, aroundSwitch),
      row(`revocation: ${AROUND_MS / 1000} s after the old key was revoked`, aroundRevoke),
      row('whole run', all),
      '',
      `- file replaced to reload line: ${fixed(reloadedAt - switchAt)} ms`,
      `- failed operations: ${all.failed}${failures.size === 0 ? '' : ` (${[...failures].map(([reason, count]) => `${reason}: ${count}`).join('; ')})`}`,
      `- acknowledged top-ups: ${acknowledged}; credited at the emulator: ${creditedCents / amountCents}; doubled writes: ${doubled}; lost acknowledged writes: ${Math.max(0, acknowledged - creditedCents / amountCents)}`,
      `- a key in the facade's log: ${keyLeaked ? 'YES' : 'no'}`,
      `- load average after: ${(await import('node:os'))
        .loadavg()
        .map((value) => value.toFixed(2))
        .join(', ')}`,
    ].join('\n');
    process.stdout.write(`${report}\n`);
    if (all.failed > 0 || doubled > 0 || keyLeaked) process.exitCode = 1;
  } finally {
    for (const service of services.reverse()) await service.stop();
  }
}

await main();
