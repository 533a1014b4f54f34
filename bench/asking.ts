/**
 * What the query benchmarks share: the facade's settings as the comparing benchmarks run it,
 * asking a facade over a keep-alive pool, and setting the emulator's injected latency.
 */
import type { Pool } from 'undici';
import type { ServiceProcess } from './processes.ts';

/** Connections of the facade's upstream pool and of the benchmark's pool to the facade. */
export const BENCH_CONNECTIONS = 64;

/**
 * The facade's environment in `bench:compare` and `bench:profile`: production logging, no caller
 * authentication or rate limits (the facade's own cost is what they measure), the response cache on
 * or off, and the emulator's sandbox key.
 */
export function comparedFacadeEnv(
  ports: { port: number; metricsPort: number },
  emulatorUrl: string,
  cache: boolean,
): Record<string, string> {
  return {
    PORT: String(ports.port),
    METRICS_PORT: String(ports.metricsPort),
    HOST: '127.0.0.1',
    NODE_ENV: 'production',
    LOG_LEVEL: 'info',
    UPSTREAM_BASE_URL: emulatorUrl,
    UPSTREAM_API_KEY: 'sk_sandbox_emulator',
    UPSTREAM_CONNECTIONS: String(BENCH_CONNECTIONS),
    WEBHOOK_REGISTER: 'false',
    AUTH_MODE: 'none',
    RATE_LIMIT_ENABLED: 'false',
    CACHE_ENABLED: String(cache),
    CACHE_MAX_AGE_SECONDS: '3600',
  };
}

/** POSTs a GraphQL body and returns its data; a non-200 answer or any error is a failure. */
export function graphqlAsker(pool: Pool): (body: string) => Promise<unknown> {
  return async (body) => {
    const response = await pool.request({
      method: 'POST',
      path: '/graphql',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const json = (await response.body.json()) as { data?: unknown; errors?: unknown[] };
    if (response.statusCode !== 200 || json.errors !== undefined) {
      throw new Error(`answered ${response.statusCode}: ${JSON.stringify(json.errors)}`);
    }
    return json.data;
  };
}

/** Replaces the emulator's faults (latency, no rules). */
export async function setFaults(emulator: ServiceProcess, faults: object): Promise<void> {
  const response = await fetch(`${emulator.url}/_emulator/faults`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...faults, rules: [] }),
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`the emulator refused the faults: ${response.status}`);
}
