/**
 * `Query.apiStatus`: the one resolver that turns upstream failures into data, because its purpose
 * is to report them (readiness probes ask it).
 */
import type { UpstreamContext } from '../upstream/context.ts';
import { isReachable, probeUpstream } from '../upstream/probe.ts';
import type { CapabilityDiscovery } from '../upstream/types.ts';

/** The `ApiStatus` object. */
export interface ApiStatusResult {
  reachable: boolean;
  keyValid: boolean;
  environment: string | null;
  callerEnvironment: string | null;
  capabilities: CapabilityDiscovery['capabilities'];
  problemCode: string | null;
}

/**
 * The upstream probe with the request's credentials, as data. A refused key is `keyValid: false`;
 * reachable as `isReachable` says (no answer, or a 5xx one, is not).
 */
export async function checkApiStatus(up: UpstreamContext): Promise<ApiStatusResult> {
  const probe = await probeUpstream(up);
  if (probe.outcome === 'ready') {
    const { environment, capabilities } = probe.discovery;
    return {
      reachable: true,
      keyValid: true,
      environment,
      callerEnvironment: up.environment ?? environment,
      capabilities,
      problemCode: null,
    };
  }
  const problem = probe.outcome === 'refused' || probe.outcome === 'failed' ? probe.problem : undefined;
  return {
    reachable: isReachable(probe),
    keyValid: false,
    environment: null,
    callerEnvironment: up.environment ?? null,
    capabilities: [],
    problemCode: problem?.code ?? 'upstream_unavailable',
  };
}
