/**
 * Which environment (sandbox or live) each upstream key selects, learnt once per key by capability
 * discovery and remembered, so graphql-ws connections and callers' own keys cost no upstream call
 * after the first. A failed discovery is not remembered: the next use asks again.
 */
import { PLATFORM_SCOPE } from './access.ts';
import { discoverCapabilities } from './capabilities.ts';
import type { UpstreamClient } from './client.ts';
import { createUpstreamContext } from './context.ts';
import type { CapabilityDiscovery } from './types.ts';

export type KeyEnvironment = CapabilityDiscovery['environment'];

export interface KeyEnvironments {
  /**
   * The environment of `apiKey` (the facade's own key when undefined).
   *
   * @throws {UpstreamProblemError} 401/403 when the upstream refuses the key.
   * @throws {UpstreamUnavailableError} when the upstream cannot be reached.
   */
  of(apiKey: string | undefined): Promise<KeyEnvironment>;
}

/** Keys remembered at most; past it the memory starts again (callers' own keys are unbounded). */
const MAX_REMEMBERED_KEYS = 1_000;

export function createKeyEnvironments(client: UpstreamClient, defaultApiKey: string): KeyEnvironments {
  const known = new Map<string, Promise<KeyEnvironment>>();
  return {
    of(apiKey) {
      const key = apiKey ?? defaultApiKey;
      let environment = known.get(key);
      if (environment === undefined) {
        if (known.size >= MAX_REMEMBERED_KEYS) known.clear();
        environment = discoverCapabilities(
          createUpstreamContext(client, { apiKey: key, scope: PLATFORM_SCOPE, retries: 0 }),
        ).then((discovery) => discovery.environment);
        known.set(key, environment);
        environment.catch(() => known.delete(key));
      }
      return environment;
    },
  };
}
