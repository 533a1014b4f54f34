/**
 * Whether the facade's configuration reads the Sentinel settings (`REDIS_SENTINELS` and the rest):
 * the shipped topology (compose.yaml, deploy/kubernetes) names them, and what needs the facades to
 * share the event log through them is asserted only where the configuration reads them. Found by
 * watching which variables `loadConfig` reads, not by a version or a flag.
 */
import { loadConfig } from '../../src/config.ts';

/** The Sentinel settings the shipped topology gives the facade. */
export const SENTINEL_SETTINGS = [
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_MASTER',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
  'REDIS_MIN_REPLICAS_ACK',
] as const;

/** The names `loadConfig` reads from `environment` (it may throw after reading them: still read). */
export function variablesRead(environment: Record<string, string>): Set<string> {
  const read = new Set<string>();
  const recorded = new Proxy(environment, {
    get(target, name) {
      if (typeof name === 'string') read.add(name);
      return target[name as string];
    },
  });
  try {
    loadConfig(recorded);
  } catch {
    // What it read before refusing is what is asked here.
  }
  return read;
}

/** Whether the facade reads `REDIS_SENTINELS` at all. */
export function facadeReadsSentinels(): boolean {
  return variablesRead({ AUTH_MODE: 'none', REDIS_SENTINELS: '127.0.0.1:26379' }).has('REDIS_SENTINELS');
}
