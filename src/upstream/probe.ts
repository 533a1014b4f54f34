/**
 * One way of asking whether the upstream can be used with a key: capability discovery
 * (`GET /v3/capabilities`), which succeeds exactly when the API is reachable and the key valid.
 * `/readyz`, `apiStatus` and the graphql-ws connection check (through `key-environments.ts`) all
 * ask it here, so they classify the same answer the same way.
 */
import { discoverCapabilities } from './capabilities.ts';
import type { UpstreamContext } from './context.ts';
import {
  refusedCredentialOf,
  UpstreamProblemError,
  UpstreamUnavailableError,
  type UnavailableReason,
} from './errors.ts';
import type { CapabilityDiscovery, Problem } from './types.ts';

/** What capability discovery said. */
export type UpstreamProbe =
  /** The upstream answered and accepted the key. */
  | { outcome: 'ready'; discovery: CapabilityDiscovery }
  /** The upstream answered and refused the key (401 or 403). */
  | { outcome: 'refused'; problem: Problem }
  /** The upstream answered with another problem (a 5xx, or a 4xx discovery should never give). */
  | { outcome: 'failed'; problem: Problem }
  /** No usable answer arrived. */
  | { outcome: 'unreachable'; reason: UnavailableReason }
  /** The call failed in the facade itself (cancelled, refused by its own limits): nothing was learnt. */
  | { outcome: 'error' };

/** Asks capability discovery with `up`'s key. Never throws. */
export async function probeUpstream(up: UpstreamContext): Promise<UpstreamProbe> {
  try {
    return { outcome: 'ready', discovery: await discoverCapabilities(up) };
  } catch (thrown) {
    // The facade's own key refused reaches callers as its outage; here it is the answer asked for.
    const error = refusedCredentialOf(thrown) ?? thrown;
    if (error instanceof UpstreamProblemError) {
      const refused = error.status === 401 || error.status === 403;
      return { outcome: refused ? 'refused' : 'failed', problem: error.problem };
    }
    if (error instanceof UpstreamUnavailableError) return { outcome: 'unreachable', reason: error.reason };
    return { outcome: 'error' };
  }
}

/**
 * Whether the upstream is reachable, in the one meaning every report uses (`/readyz`, `apiStatus`):
 * it answered, with success or by refusing the key. No answer, a 5xx (the API or a proxy in front of
 * it failing) or nothing learnt is unreachable: there is nothing a caller could do with it now.
 */
export function isReachable(probe: UpstreamProbe): boolean {
  if (probe.outcome === 'ready' || probe.outcome === 'refused') return true;
  return probe.outcome === 'failed' && probe.problem.status < 500;
}
