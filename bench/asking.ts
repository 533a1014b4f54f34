/**
 * What the query benchmarks share: asking a facade over a keep-alive pool, and setting the
 * emulator's injected latency.
 */
import type { Pool } from 'undici';
import type { ServiceProcess } from './processes.ts';

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
