/**
 * One environment's upstream probe as `/readyz` asks it: one call at a time, its answer reused for
 * `READINESS_CACHE_MS` after it settled, and waited for no longer than
 * `READINESS_UPSTREAM_DEADLINE_MS` from its start.
 *
 * Why a deadline: the kubelet gives `/readyz` its `timeoutSeconds` (3 s as shipped) and counts a late
 * answer as a failed probe. An upstream that accepts the connection and answers nothing holds the
 * probe for the upstream client's own timeouts (15 s for the headers by default); waited for, it
 * failed the readiness probe of every replica at once, which is the all-replicas-out outage that
 * src/http/health.ts exists to avoid. Past the deadline the upstream is reported as not known to be
 * reachable (`probe_timeout`), and readiness goes on from what is local to the replica.
 *
 * Why the probe is not cancelled at its deadline: started again by each check, a hanging upstream
 * would get one more connection per check. Left running, it is the one call of its environment
 * until the upstream client's timeouts end it, every check meanwhile reads `probe_timeout` at once,
 * and its answer, however late (a slow upstream that answers after 2 s is reachable), is what the
 * checks read for `cacheMs` after it settled.
 */
import type { UpstreamClient } from '../upstream/client.ts';
import { PLATFORM_SCOPE } from '../upstream/access.ts';
import { createUpstreamContext } from '../upstream/context.ts';
import type { UpstreamKey } from '../upstream/credentials.ts';
import { probeUpstream, type UpstreamProbe } from '../upstream/probe.ts';

/** What a check read of one upstream: its probe's answer, or none by the deadline. */
export type ProbeReading =
  | { readonly timedOut: false; readonly probe: UpstreamProbe; readonly requestId: string }
  /** The probe (`requestId`) had not answered `deadlineMs` after it started; it goes on. */
  | { readonly timedOut: true; readonly requestId: string };

/** How long the probe is waited for and its answer reused, and the clock of the reuse. */
export interface SharedProbeTiming {
  /** How long an answer is reused after it settled (`READINESS_CACHE_MS`). */
  readonly cacheMs: number;
  /** How long a check waits for the probe, from the probe's start (`READINESS_UPSTREAM_DEADLINE_MS`). */
  readonly deadlineMs: number;
  /** Clock in milliseconds (of the reuse; the deadline is a timer). */
  readonly now: () => number;
}

interface Running {
  readonly answer: Promise<ProbeReading>;
  /** Resolves `deadlineMs` after the probe started (never, once it answered). */
  readonly deadline: Promise<ProbeReading>;
}

/** The probe of one upstream with the facade's own key, shared by every check (see the module). */
export class SharedUpstreamProbe {
  readonly #client: UpstreamClient;
  readonly #apiKey: UpstreamKey;
  readonly #timing: SharedProbeTiming;
  #running: Running | undefined;
  #settled: { reading: ProbeReading; at: number } | undefined;

  constructor(client: UpstreamClient, apiKey: UpstreamKey, timing: SharedProbeTiming) {
    this.#client = client;
    this.#apiKey = apiKey;
    this.#timing = timing;
  }

  /**
   * The answer settled within `cacheMs`, else the probe under way or a new one (`requestId` names
   * it upstream), whichever comes first of its answer and its deadline. Never rejects.
   */
  read(requestId: string | undefined): Promise<ProbeReading> {
    const settled = this.#settled;
    if (
      this.#running === undefined &&
      settled !== undefined &&
      this.#timing.now() - settled.at < this.#timing.cacheMs
    )
      return Promise.resolve(settled.reading);
    const running = (this.#running ??= this.#start(requestId));
    // The answer first: once both are in, the answer wins.
    return Promise.race([running.answer, running.deadline]);
  }

  /** One probe, never retried: fast, and adding no retry load to a struggling upstream. */
  #start(requestId: string | undefined): Running {
    const up = createUpstreamContext(this.#client, {
      apiKey: this.#apiKey,
      scope: PLATFORM_SCOPE,
      requestId,
      retries: 0,
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<ProbeReading>((resolve) => {
      timer = setTimeout(() => resolve({ timedOut: true, requestId: up.requestId }), this.#timing.deadlineMs);
      // A deadline never keeps the process up; the probe's own connection decides that.
      timer.unref();
    });
    const answer = probeUpstream(up).then((probe): ProbeReading => {
      clearTimeout(timer);
      const reading: ProbeReading = { timedOut: false, probe, requestId: up.requestId };
      this.#running = undefined;
      this.#settled = { reading, at: this.#timing.now() };
      return reading;
    });
    return { answer, deadline };
  }
}
