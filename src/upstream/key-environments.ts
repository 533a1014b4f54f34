/**
 * Which environment (sandbox or live) each upstream key selects, learnt once per key by the
 * upstream probe and remembered, so graphql-ws connections and callers' own keys cost no upstream
 * call after the first. Only an accepted key is remembered: after any other answer the next use
 * asks again.
 */
import { PLATFORM_SCOPE } from './access.ts';
import type { UpstreamClient } from './client.ts';
import { createUpstreamContext } from './context.ts';
import { probeUpstream, type UpstreamProbe } from './probe.ts';

export interface KeyEnvironments {
  /**
   * What the probe says of `apiKey` (the facade's own key when undefined): for an accepted key,
   * its environment in `discovery`. Never throws.
   */
  probe(apiKey: string | undefined): Promise<UpstreamProbe>;
}

/** Keys remembered at most; past it the memory starts again (callers' own keys are unbounded). */
const MAX_REMEMBERED_KEYS = 1_000;

export function createKeyEnvironments(client: UpstreamClient, defaultApiKey: string): KeyEnvironments {
  const known = new Map<string, Promise<UpstreamProbe>>();
  return {
    probe(apiKey) {
      const key = apiKey ?? defaultApiKey;
      let probe = known.get(key);
      if (probe === undefined) {
        if (known.size >= MAX_REMEMBERED_KEYS) known.clear();
        probe = probeUpstream(
          createUpstreamContext(client, { apiKey: key, scope: PLATFORM_SCOPE, retries: 0 }),
        );
        known.set(key, probe);
        void probe.then((answer) => {
          if (answer.outcome !== 'ready') known.delete(key);
        });
      }
      return probe;
    },
  };
}
