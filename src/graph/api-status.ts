/**
 * `Query.apiStatus`: the one resolver that turns upstream failures into data, because its purpose
 * is to report them (readiness probes ask it).
 */
import { discoverCapabilities } from '../upstream/capabilities.ts';
import type { UpstreamContext } from '../upstream/context.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { CapabilityDiscovery } from '../upstream/types.ts';

/** The `ApiStatus` object. */
export interface ApiStatusResult {
  reachable: boolean;
  keyValid: boolean;
  environment: string | null;
  capabilities: CapabilityDiscovery['capabilities'];
  problemCode: string | null;
}

/**
 * Asks the upstream's capability discovery (`GET /v3/capabilities`), which succeeds exactly when
 * the API is reachable and the key valid. Never throws: a refused key is `keyValid: false`; no
 * answer, or a 5xx one, is `reachable: false`.
 */
export async function checkApiStatus(up: UpstreamContext): Promise<ApiStatusResult> {
  try {
    const discovery = await discoverCapabilities(up);
    return {
      reachable: true,
      keyValid: true,
      environment: discovery.environment,
      capabilities: discovery.capabilities,
      problemCode: null,
    };
  } catch (error) {
    const problem = error instanceof UpstreamProblemError ? error.problem : undefined;
    const answered = problem !== undefined && problem.status < 500;
    return {
      reachable: answered,
      keyValid: false,
      environment: null,
      capabilities: [],
      problemCode: problem?.code ?? 'upstream_unavailable',
    };
  }
}
