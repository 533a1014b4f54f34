/**
 * Which environment (sandbox or live) each upstream key selects, learnt once per key by the
 * upstream probe and remembered, so graphql-ws connections and callers' own keys cost no upstream
 * call after the first. Only an accepted key is remembered: after any other answer the next use
 * asks again. The facade's own key is asked through its key source, which remembers the probe of
 * the key in use and hands over the one it made of a new key on rotation, so a rotation costs one
 * probe and nothing keyed by the old key goes stale.
 */
import { PLATFORM_SCOPE } from './access.ts';
import type { UpstreamClient } from './client.ts';
import { createUpstreamContext } from './context.ts';
import type { UpstreamKey } from './credentials.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import { probeUpstream, type UpstreamProbe } from './probe.ts';

export interface KeyEnvironments {
  /**
   * What the probe says of `apiKey` (the facade's own key when undefined or its source: with a key
   * per environment, `environment`'s): for an accepted key, its environment in `discovery`. Never
   * throws.
   */
  probe(apiKey: UpstreamKey | undefined, environment?: PlatformEnvironment): Promise<UpstreamProbe>;
}

/** The facade's own key as key environments ask it: its probe is remembered by the source. */
export interface ProbedKey {
  probe(): Promise<UpstreamProbe>;
}

/** Keys remembered at most; past it the memory starts again (callers' own keys are unbounded). */
const MAX_REMEMBERED_KEYS = 1_000;

/** Asks capability discovery with `apiKey`, without retries. Never throws. */
export function probeKey(client: UpstreamClient, apiKey: string): Promise<UpstreamProbe> {
  return probeUpstream(createUpstreamContext(client, { apiKey, scope: PLATFORM_SCOPE, retries: 0 }));
}

export function createKeyEnvironments(client: UpstreamClient, facadeKey: ProbedKey): KeyEnvironments {
  const known = new Map<string, Promise<UpstreamProbe>>();
  return {
    probe(apiKey) {
      if (typeof apiKey !== 'string') return facadeKey.probe();
      const key = apiKey;
      let probe = known.get(key);
      if (probe === undefined) {
        if (known.size >= MAX_REMEMBERED_KEYS) known.clear();
        probe = probeKey(client, key);
        known.set(key, probe);
        void probe.then((answer) => {
          if (answer.outcome !== 'ready') known.delete(key);
        });
      }
      return probe;
    },
  };
}
