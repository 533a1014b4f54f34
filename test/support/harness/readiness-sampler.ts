/**
 * `/readyz` asked on a fixed beat, as a prober does, whatever the answers before: each sample is
 * sent on time even while an earlier one waits (a Redis PING that is not answered holds a check for
 * up to a second), so a spell of 503 cannot hide between two slow answers.
 */

/** One answer of `/readyz`: when it was asked and answered (`performance.now()`), and what it said. */
export interface ReadinessSample {
  readonly askedAt: number;
  readonly answeredAt: number;
  readonly status: number;
  readonly body: ReadinessBody;
}

/** The members of a `/readyz` body the tests read. */
export interface ReadinessBody {
  status: string;
  redis?: { reachable: boolean; reason?: string; unreachableSeconds?: number; graceSeconds?: number };
}

/** A running sampler: its samples so far (in the order answered), and how to stop it. */
export interface ReadinessSampler {
  readonly samples: readonly ReadinessSample[];
  /** Stops asking and resolves once every sample asked has been answered. */
  stop(): Promise<readonly ReadinessSample[]>;
}

/** Asks `${baseUrl}/readyz` every `everyMs` until stopped. A request that fails is a test failure. */
export function sampleReadiness(baseUrl: string, everyMs = 100): ReadinessSampler {
  const samples: ReadinessSample[] = [];
  const pending = new Set<Promise<void>>();
  const errors: unknown[] = [];
  const ask = (): void => {
    const askedAt = performance.now();
    const asked = (async () => {
      const response = await fetch(`${baseUrl}/readyz`);
      const body = (await response.json()) as ReadinessBody;
      samples.push({ askedAt, answeredAt: performance.now(), status: response.status, body });
    })()
      .catch((error: unknown) => {
        errors.push(error);
      })
      .finally(() => pending.delete(asked));
    pending.add(asked);
  };
  ask();
  const timer = setInterval(ask, everyMs);
  return {
    samples,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
      if (errors.length > 0) throw new Error(`/readyz could not be asked: ${String(errors[0])}`);
      return samples;
    },
  };
}
