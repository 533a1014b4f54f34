/**
 * Sandbox and live in one deployment against one deployment per environment: the emulator, the
 * dev issuer and three facades as in production (processes of their own): one holding both keys
 * (`UPSTREAM_API_KEY_SANDBOX`, `UPSTREAM_API_KEY_LIVE`) and one per environment (`UPSTREAM_API_KEY`).
 * A sandbox caller and a live caller (tokens minted by the dev issuer, with the environment claim)
 * run the same read back to back, at the same time: against the one facade, then each against its
 * own. Reported as ratios in one run: each environment's throughput in the shared process over its
 * own process's, and the shared process's resident memory over the two processes' together.
 *
 * Options: `BENCH_ENVIRONMENTS_SECONDS` (load per round, default 8), `BENCH_ENVIRONMENTS_WORKERS`
 * (workers per environment, default 4), `BENCH_ENVIRONMENTS_ROUNDS` (rounds alternating the two
 * set-ups, default 2).
 */
import { startDevIssuer } from '../dev-issuer/index.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { runLoad, type LoadResult } from './load.ts';
import { startEmulatorService, startFacadeService, type ServiceProcess } from './processes.ts';

const seconds = positiveIntegerFromEnv('BENCH_ENVIRONMENTS_SECONDS', 8);
const workers = positiveIntegerFromEnv('BENCH_ENVIRONMENTS_WORKERS', 4);
const rounds = positiveIntegerFromEnv('BENCH_ENVIRONMENTS_ROUNDS', 2);
const SANDBOX_KEY = 'sk_sandbox_emulator';
const LIVE_KEY = 'sk_live_emulator';
/** A read of every customer of the environment and their accounts (through the response cache). */
const QUERY = '{ customers(first: 100) { nodes { id displayName accounts(first: 10) { nodes { id } } } } }';
type Environment = 'sandbox' | 'live';

async function main(): Promise<void> {
  const services: ServiceProcess[] = [];
  const issuer = await startDevIssuer({
    clients: [
      {
        clientId: 'sandbox-app',
        clientSecret: 'sandbox-app-secret',
        roles: ['operator'],
        environment: 'sandbox',
      },
      { clientId: 'live-app', clientSecret: 'live-app-secret', roles: ['operator'], environment: 'live' },
    ],
  });
  try {
    const emulator = await startEmulatorService();
    services.push(emulator);
    const facade = async (name: string, keys: Record<string, string>): Promise<ServiceProcess> => {
      const started = await startFacadeService(name, emulator.url, {
        UPSTREAM_API_KEY: '',
        ...keys,
        AUTH_ISSUER: issuer.issuer,
        AUTH_AUDIENCE: issuer.audience,
      });
      services.push(started);
      return started;
    };
    const both = await facade('both environments', {
      UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY,
      UPSTREAM_API_KEY_LIVE: LIVE_KEY,
    });
    const sandboxOnly = await facade('sandbox only', { UPSTREAM_API_KEY: SANDBOX_KEY });
    const liveOnly = await facade('live only', { UPSTREAM_API_KEY: LIVE_KEY });
    const tokens: Record<Environment, string> = {
      sandbox: await issuer.token('sandbox-app'),
      live: await issuer.token('live-app'),
    };

    /** Both callers at once, each against `targets[environment]`; per environment what it measured. */
    const run = async (
      targets: Record<Environment, ServiceProcess>,
    ): Promise<Record<Environment, LoadResult>> => {
      const [sandbox, live] = await Promise.all(
        (['sandbox', 'live'] as const).map((environment) =>
          runLoad({
            total: Number.MAX_SAFE_INTEGER,
            durationMs: seconds * 1000,
            concurrency: workers,
            operation: () => ask(targets[environment].url, tokens[environment], environment),
          }),
        ),
      );
      return { sandbox: sandbox!, live: live! };
    };

    // Warm-up of every process (JIT, connections, caches), then alternating rounds.
    await run({ sandbox: both, live: both });
    await run({ sandbox: sandboxOnly, live: liveOnly });
    const shared: Record<Environment, number[]> = { sandbox: [], live: [] };
    const separate: Record<Environment, number[]> = { sandbox: [], live: [] };
    let failures = 0;
    for (let round = 0; round < rounds; round += 1) {
      const apart = await run({ sandbox: sandboxOnly, live: liveOnly });
      const together = await run({ sandbox: both, live: both });
      for (const environment of ['sandbox', 'live'] as const) {
        separate[environment].push(apart[environment].operationsPerSecond);
        shared[environment].push(together[environment].operationsPerSecond);
        failures += apart[environment].failures + together[environment].failures;
      }
    }
    const rss = {
      both: await both.rssBytes(),
      sandbox: await sandboxOnly.rssBytes(),
      live: await liveOnly.rssBytes(),
    };
    const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
    console.log(
      `environments: ${workers} workers per environment, ${seconds} s per round, ${rounds} rounds, failures ${failures}`,
    );
    for (const environment of ['sandbox', 'live'] as const) {
      const together = mean(shared[environment]);
      const apart = mean(separate[environment]);
      console.log(
        `  ${environment}: ${together.toFixed(0)} ops/s in the shared process, ${apart.toFixed(0)} ops/s in its own: ratio ${(together / apart).toFixed(2)}`,
      );
    }
    console.log(
      `  memory (RSS after the load): shared ${mib(rss.both)} MiB; sandbox only ${mib(rss.sandbox)} MiB + live only ${mib(rss.live)} MiB = ${mib(rss.sandbox + rss.live)} MiB: ratio ${(rss.both / (rss.sandbox + rss.live)).toFixed(2)}`,
    );
    if (failures > 0) process.exitCode = 1;
  } finally {
    for (const service of services.reverse()) await service.stop();
    await issuer.close();
  }
}

/** One read as `token`; throws unless it answered data of `environment`'s customers alone. */
async function ask(url: string, token: string, environment: Environment): Promise<void> {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: QUERY }),
  });
  const body = (await response.json()) as {
    data?: { customers: { nodes: { id: string }[] } };
    errors?: unknown[];
  };
  if (!response.ok || body.errors !== undefined || body.data === undefined) {
    throw new Error(`${response.status} ${JSON.stringify(body.errors)}`);
  }
  const live = body.data.customers.nodes.every((node) => node.id.startsWith('cus_live_'));
  if (live !== (environment === 'live')) throw new Error(`${environment} caller saw the other environment`);
}

await main();
