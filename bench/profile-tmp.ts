import { Pool } from 'undici';
import { runLoad } from './load.ts';
import { findFreePort, startService } from './processes.ts';
import { workloads } from './workloads.ts';
const root = new URL('..', import.meta.url).pathname;
const ep = await findFreePort();
const emulator = await startService({
  name: 'emulator',
  script: `${root}emulator/main.ts`,
  port: ep,
  env: { EMULATOR_PORT: String(ep), EMULATOR_DATA: 'demo' },
  readyPath: '/_emulator/requests',
});
const fp = await findFreePort();
const facade = await startService({
  name: 'facade',
  script: process.env.SCRIPT ?? `${root}src/main.ts`,
  port: fp,
  env: {
    PORT: String(fp),
    HOST: '127.0.0.1',
    NODE_ENV: 'production',
    UPSTREAM_BASE_URL: emulator.url,
    UPSTREAM_API_KEY: 'sk_sandbox_emulator',
    UPSTREAM_CONNECTIONS: '64',
    LOG_LEVEL: 'info',
    WEBHOOK_REGISTER: 'false',
    NODE_OPTIONS: '--cpu-prof --cpu-prof-dir=/tmp/speed-prof',
  },
  readyPath: '/readyz',
});
const pool = new Pool(`http://127.0.0.1:${fp}`, { connections: 64 });
const w = workloads.find((x) => x.name === (process.env.WORKLOAD ?? 'customer dashboard'))!;
const body = process.env.TRIVIAL ? JSON.stringify({ query: '{ __typename }' }) : w.query;
const op = async () => {
  const r = await pool.request({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json' },
    body,
  });
  await r.body.text();
};
await runLoad({ total: 1e9, durationMs: 1000, concurrency: 16, operation: op });
const c0 = await facade.cpuMs();
const r = await runLoad({ total: 1e9, durationMs: 5000, concurrency: 16, operation: op });
const c1 = await facade.cpuMs();
console.log(r.operationsPerSecond.toFixed(0), 'ops/s', ((c1 - c0) / r.operations).toFixed(3), 'ms cpu/op');
await pool.close();
await facade.stop();
await emulator.stop();
