/**
 * `npm run bench:profile`: where the facade's CPU goes, per operation, for the rows of
 * `bench:compare`.
 *
 * For each case (the customer dashboard with the response cache off, the same dashboard with the
 * cache on, answered from it, and `{ __typename }`) it starts the facade as `bench:compare` does
 * (`src/main.ts`, the same environment) under `node --cpu-prof`, warms it, runs the load for
 * `BENCH_PROFILE_SECONDS` (8) at `BENCH_CONCURRENCY` (16), stops it (SIGTERM: the profile is written
 * on exit) and summarises the samples taken while the load ran (the startup and the warm-up are left
 * out: the profile's clock is the monotonic one `process.hrtime` reads here). The summary gives the
 * CPU of each step of an operation in microseconds per operation (the share of busy samples times
 * the process's CPU per operation, from /proc), by self time (the code that ran) and by total time
 * (the code and what it called), then the modules and functions with the most self time.
 *
 * Steps are assigned by the file a function is in (`STEPS` below); a native function with no file
 * (a socket write, JSON.parse) counts where its nearest caller with a file is, and the garbage
 * collector and the idle loop count apart. `BENCH_PROFILE_CHECKOUT` profiles another checkout's facade
 * (a worktree of an earlier commit), for a step-by-step comparison; an argument picks the cases whose
 * name contains it (`npm run bench:profile -- typename`). The raw profiles stay in `bench/results/profiles/` (open
 * them in Chrome's DevTools); the summary goes to `bench/results/profile-current.md`.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { BENCH_CONNECTIONS, comparedFacadeEnv, graphqlAsker, setFaults } from './asking.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { microsecondsNow, summariseProfile, type CpuProfile, type ProfileSteps } from './lib/cpu-profile.ts';
import { runLoad } from './load.ts';
import { findFreePort, startEmulatorService, startService, type ServiceProcess } from './processes.ts';
import { workloads } from './workloads.ts';

const seconds = positiveIntegerFromEnv('BENCH_PROFILE_SECONDS', 8);
const concurrency = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const root = fileURLToPath(new URL('..', import.meta.url));
/** The checkout whose facade is profiled: this one, or `BENCH_PROFILE_CHECKOUT` (another worktree). */
const facadeRoot = process.env.BENCH_PROFILE_CHECKOUT ?? root;
const label = process.env.BENCH_PROFILE_CHECKOUT === undefined ? 'current' : basename(facadeRoot);

/**
 * The steps of an operation, by where the code is: the first pattern that matches a function's file
 * names its step. Node's own files are told apart by their names (`node:_http_server`).
 */
const STEPS: ProfileSteps = [
  ['tracing hooks (OpenTelemetry)', /node_modules\/@opentelemetry\//],
  ['logging, audit, metrics', /src\/(logger\.ts|observability\/)|node_modules\/(prom-client|pino)/],
  ['door checks', /src\/edge\//],
  ['response cache and its keys', /src\/upstream\/response-cache\.ts|src\/loaders\/keys\.ts/],
  ['loaders', /src\/loaders\/|node_modules\/dataloader\//],
  ['upstream client', /src\/upstream\/|node_modules\/undici\/|node:internal\/deps\/undici/],
  [
    'parse, validate, cost, look-ahead',
    /node_modules\/graphql\/(language|validation|utilities)\/|src\/graph\/(rules|query-limits|look-ahead|documents|selection|id-arguments)\.ts|node_modules\/@escape\.tech\//,
  ],
  ['execution and resolvers', /node_modules\/graphql\/|src\/graph\/|node_modules\/@apollo\/subgraph\//],
  ['Apollo Server', /node_modules\/@apollo\//],
  [
    'HTTP layer (node, express)',
    /src\/http\/|src\/app\.ts|node_modules\/(express|router|body-parser|raw-body|finalhandler|send|on-finished|content-type|type-is|qs|cors|negotiator|accepts|iconv-lite|depd|debug|statuses|http-errors|parseurl|encodeurl|vary|cookie|fresh|etag|mime|proxy-addr)\/|node:_http|node:http|node:net|node:internal\/(http|stream|streams|net|child_process|dns|url)|node:(stream|url|buffer|events|string_decoder)/,
  ],
  [
    'async hooks and promises (node)',
    /node:internal\/(async_hooks|process\/task_queues|timers|async_context)/,
  ],
];

/** One profiled case: how it is asked and of which facade. */
interface Case {
  name: string;
  cache: boolean;
  body: string;
}

const dashboard = workloads.find((workload) => workload.name === 'customer dashboard')!.query;
const cases: readonly Case[] = [
  { name: 'dashboard, cache off', cache: false, body: dashboard },
  { name: 'dashboard, cache on (hits)', cache: true, body: dashboard },
  { name: '`{ __typename }`', cache: false, body: JSON.stringify({ query: '{ __typename }' }) },
];

async function main(): Promise<void> {
  const only = process.argv[2];
  const chosen = only === undefined ? cases : cases.filter((each) => each.name.includes(only));
  const loadBefore = loadavg();
  const emulator = await startEmulatorService();
  const sections: string[] = [];
  try {
    await setFaults(emulator, { latency: { fixedMs: 0, jitterMs: 0 } });
    for (const each of chosen) sections.push(await profileCase(emulator, each));
  } finally {
    await emulator.stop();
  }
  const f = (values: number[]) => values.map((value) => value.toFixed(2)).join(', ');
  const report = [
    `# Where the facade’s CPU goes, per operation (${label === 'current' ? 'this checkout' : facadeRoot})`,
    '',
    `Run at ${new Date().toISOString()}, ${seconds} s of load per case at concurrency ${concurrency}, ` +
      `Node ${process.version}; load average ${f(loadBefore)} before, ${f(loadavg())} after.`,
    '',
    ...sections,
  ].join('\n');
  console.log(`\n${report}`);
  await writeFile(join(root, `bench/results/profile-${label}.md`), `${report}\n`);
}

async function profileCase(emulator: ServiceProcess, each: Case): Promise<string> {
  const directory = mkdtempSync(join(tmpdir(), 'facade-profile-'));
  const port = await findFreePort();
  const facade = await startService({
    name: `facade (${each.name})`,
    script: join(facadeRoot, 'src/main.ts'),
    port,
    nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${directory}`, '--cpu-prof-interval=250'],
    env: comparedFacadeEnv({ port, metricsPort: await findFreePort() }, emulator.url, each.cache),
    readyPath: '/readyz',
  });
  const pool = new Pool(facade.url, { connections: BENCH_CONNECTIONS });
  const ask = graphqlAsker(pool);
  const operation = async () => {
    await ask(each.body);
  };
  let window: [number, number];
  let cpuMsPerOp: number;
  let operations: number;
  try {
    await runLoad({ total: Number.MAX_SAFE_INTEGER, durationMs: 2000, concurrency, operation });
    const cpuBefore = await facade.cpuMs();
    const from = microsecondsNow();
    const load = await runLoad({
      total: Number.MAX_SAFE_INTEGER,
      durationMs: seconds * 1000,
      concurrency,
      operation,
    });
    window = [from, microsecondsNow()];
    cpuMsPerOp = ((await facade.cpuMs()) - cpuBefore) / Math.max(1, load.operations);
    operations = load.operations;
    if (load.failures > 0) throw new Error(`${each.name}: ${load.failures} operations failed`);
  } finally {
    await pool.close();
    await facade.stop();
  }
  const file = readdirSync(directory).find((name) => name.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`${each.name}: the facade wrote no profile`);
  const kept = join(root, 'bench/results/profiles', label);
  await mkdir(kept, { recursive: true });
  const slug = each.name.replaceAll(/[^A-Za-z0-9]+/g, '-').replaceAll(/^-|-$/g, '');
  await rename(join(directory, file), join(kept, `${slug}.cpuprofile`));
  const profile = JSON.parse(readFileSync(join(kept, `${slug}.cpuprofile`), 'utf8')) as CpuProfile;
  // The load's window on the profile's clock, for reading the raw profile again.
  await writeFile(
    join(kept, `${slug}.window.json`),
    `${JSON.stringify({ fromUs: window[0], toUs: window[1] })}\n`,
  );
  return summariseProfile({
    name: each.name,
    profile,
    window,
    cpuMsPerUnit: cpuMsPerOp,
    units: operations,
    unit: 'operation',
    steps: STEPS,
  });
}

await main();
