/**
 * `node bench/promises.ts`: promises the facade creates per operation, counted, not timed. The
 * promise machinery is a share of every operation's CPU that a profile on a busy machine measures
 * only roughly; the count is the same on any machine, so a change that removes promises shows here
 * exactly. Starts the emulator and, per case, a facade as `bench:compare` starts it (`src/main.ts`,
 * the same environment) with `bench/lib/promise-counter.ts` loaded, warms it, then sends
 * `BENCH_PROMISE_OPERATIONS` (200) operations one at a time and divides the promises created
 * meanwhile by them. `BENCH_PROFILE_CHECKOUT=<another worktree>` counts an earlier commit's facade.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { BENCH_CONNECTIONS, comparedFacadeEnv, graphqlAsker, setFaults } from './asking.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { findFreePort, startEmulatorService, startService, type ServiceProcess } from './processes.ts';
import { workloads } from './workloads.ts';

const operations = positiveIntegerFromEnv('BENCH_PROMISE_OPERATIONS', 200);
const root = fileURLToPath(new URL('..', import.meta.url));
const facadeRoot = process.env.BENCH_PROFILE_CHECKOUT ?? root;

const dashboard = workloads.find((workload) => workload.name === 'customer dashboard')!.query;
const cases = [
  { name: 'dashboard, cache off', cache: false, body: dashboard },
  { name: 'dashboard, cache on (hits)', cache: true, body: dashboard },
  { name: '`{ __typename }`', cache: false, body: JSON.stringify({ query: '{ __typename }' }) },
] as const;

async function countOf(facade: ServiceProcess, file: string): Promise<number> {
  process.kill(facade.pid, 'SIGUSR2');
  for (let tries = 0; tries < 100; tries++) {
    await sleep(20);
    try {
      const text = readFileSync(file, 'utf8');
      if (text !== '') return Number(text);
    } catch {
      // Not written yet.
    }
  }
  throw new Error('the facade wrote no promise count');
}

async function main(): Promise<void> {
  const emulator = await startEmulatorService();
  const rows: string[] = [];
  try {
    await setFaults(emulator, { latency: { fixedMs: 0, jitterMs: 0 } });
    for (const each of cases) {
      const file = join(mkdtempSync(join(tmpdir(), 'facade-promises-')), 'count');
      const port = await findFreePort();
      const facade = await startService({
        name: `facade (${each.name})`,
        script: join(facadeRoot, 'src/main.ts'),
        port,
        nodeArgs: ['--import', join(root, 'bench/lib/promise-counter.ts')],
        env: {
          ...comparedFacadeEnv({ port, metricsPort: await findFreePort() }, emulator.url, each.cache),
          PROMISE_COUNT_FILE: file,
        },
        readyPath: '/readyz',
      });
      const pool = new Pool(facade.url, { connections: BENCH_CONNECTIONS });
      const ask = graphqlAsker(pool);
      try {
        for (let n = 0; n < 50; n++) await ask(each.body);
        const before = await countOf(facade, file);
        for (let n = 0; n < operations; n++) await ask(each.body);
        const after = await countOf(facade, file);
        rows.push(`| ${each.name} | ${((after - before) / operations).toFixed(1)} |`);
      } finally {
        await pool.close();
        await facade.stop();
      }
    }
  } finally {
    await emulator.stop();
  }
  console.log(
    [
      `Promises created per operation (${facadeRoot}, ${operations} operations one at a time):`,
      '',
      '| case | promises / op |',
      '|---|---:|',
      ...rows,
    ].join('\n'),
  );
}

await main();
