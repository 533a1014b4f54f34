/**
 * The circuit breaker of one upstream environment (one client): a dead upstream costs one probe
 * per interval instead of every request's attempts.
 *
 * Why consecutive failed calls, not a failure ratio in a window: the breaker is for an upstream
 * that is down, not for one that is flaky. A ratio opens on a partial failure too (half the calls
 * failing), and then refuses the half that would have worked: it turns a 50 % outage into a 100 %
 * one, where retries alone recover most calls. N calls in a row failing after all their attempts,
 * with any answer in between starting the count again, happens under load only when nearly
 * everything fails. A call, not an attempt, is what counts: retries are this client's own
 * amplification, and one unlucky call's three attempts should not count for three.
 *
 * What fails a call: no answer (a refused or reset connection, a timeout, the operation's deadline
 * while an attempt was out) or a 5xx. Any other answer, a 4xx included, is the upstream answering.
 * An answer that cannot be read (past 32 MiB) is one record's problem and counts for neither.
 *
 * Open: every call fails at once with `UPSTREAM_UNAVAILABLE` (`circuit_open`, retryable), nothing
 * sent, retries in progress included. Every probe interval one probe goes upstream (half-open):
 * capability discovery with the facade's own key, the request `/readyz` makes, which reads no
 * customer's data and needs no caller; while it is out the calls still fail at once. Answered, the
 * circuit closes; else it stays open for another interval. Probes come from a timer, not from
 * callers' requests: no caller waits on a probe to a dead upstream, a mutation is never the probe,
 * and the circuit closes within one interval of the upstream's return whatever the traffic.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { Logger } from '../logger.ts';
import { PLATFORM_SCOPE } from './access.ts';
import type { AttemptSender } from './attempt-sender.ts';
import { createCallBudget } from './call-budget.ts';
import type { CircuitChange, CircuitState, UpstreamCall, UpstreamCircuit } from './call.ts';

export type { CircuitChange, CircuitState, UpstreamCircuit } from './call.ts';
import { UpstreamCancelledError, UpstreamProblemError, UpstreamUnavailableError } from './errors.ts';
import { newRequestId } from './request-id.ts';
import { createRetryBudget } from './retry.ts';
import type { UpstreamRequest } from './types.ts';

/** `UPSTREAM_CIRCUIT_FAILURES` and `UPSTREAM_CIRCUIT_PROBE_INTERVAL_MS`. */
export interface CircuitConfig {
  /** Consecutive failed calls that open the circuit; 0 turns the breaker off. */
  failures: number;
  /** How long the circuit stays open before the next probe. */
  probeIntervalMs: number;
}

export interface CircuitBreaker extends UpstreamCircuit {
  /**
   * Lets a call's attempt go upstream, or refuses it.
   *
   * @throws {UpstreamUnavailableError} `circuit_open` unless the circuit is closed: nothing is sent.
   */
  admit(requestId: string): void;
  /** A call ended: the upstream `answered` (any status below 500), or the call `failed` (see module). */
  record(outcome: 'answered' | 'failed', failure?: string): void;
  /** Stops probing (the client closes). */
  close(): void;
}

export interface CircuitBreakerOptions {
  config: CircuitConfig;
  /** One request upstream, bypassing the circuit: true when it was answered (below 500). Never throws. */
  probe: () => Promise<boolean>;
  logger: Logger;
  environment?: PlatformEnvironment | undefined;
  /** Told of every change, the starting state included. Must not throw. */
  onChange?: (change: CircuitChange) => void;
}

/** Builds a closed breaker; with `config.failures` 0, one that never opens. */
export function createCircuitBreaker(options: CircuitBreakerOptions): CircuitBreaker {
  const { config, logger } = options;
  const labelled = options.environment === undefined ? {} : { environment: options.environment };
  let state: CircuitState = 'closed';
  let failures = 0;
  let openedAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const waiting = new Set<() => void>();

  function move(to: CircuitState): void {
    const from = state;
    state = to;
    options.onChange?.({ from, to, ...labelled });
    if (to !== 'closed') return;
    for (const wake of waiting) wake();
    waiting.clear();
  }

  function scheduleProbe(): void {
    if (stopped) return;
    timer = setTimeout(() => void probe(), config.probeIntervalMs);
    // A pending probe never keeps a closing process alive.
    timer.unref();
  }

  async function probe(): Promise<void> {
    timer = undefined;
    move('half-open');
    const answered = await options.probe();
    if (stopped) return;
    if (!answered) {
      move('open');
      scheduleProbe();
      return;
    }
    failures = 0;
    move('closed');
    logger.info('upstream circuit closed: the probe was answered, calls go upstream again', {
      openForMs: Math.round(performance.now() - openedAt),
    });
  }

  options.onChange?.({ from: undefined, to: 'closed', ...labelled });
  return {
    get state() {
      return state;
    },
    admit(requestId) {
      if (state !== 'closed') throw new UpstreamUnavailableError('circuit_open', requestId);
    },
    record(outcome, failure) {
      // Calls that end while the circuit is open were sent before it opened: the probe decides.
      if (config.failures === 0 || state !== 'closed') return;
      if (outcome === 'answered') {
        failures = 0;
        return;
      }
      failures += 1;
      if (failures < config.failures) return;
      openedAt = performance.now();
      move('open');
      logger.warn('upstream circuit opened: calls fail at once until a probe is answered', {
        failedCalls: failures,
        lastFailure: failure ?? 'unknown',
        probeIntervalMs: config.probeIntervalMs,
      });
      scheduleProbe();
    },
    whenClosed(signal) {
      if (state === 'closed' || signal?.aborted === true) return Promise.resolve();
      return new Promise((resolve) => {
        const wake = () => {
          waiting.delete(wake);
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        waiting.add(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    },
    close() {
      stopped = true;
      clearTimeout(timer);
      for (const wake of waiting) wake();
      waiting.clear();
    },
  };
}

/**
 * Whether a call that ended with `error` after `attempts` attempts counts as a failed call for the
 * breaker (see the module): no answer, a 5xx, or the deadline while an attempt was out.
 */
export function failsCircuit(error: unknown, attempts: number): boolean {
  if (error instanceof UpstreamUnavailableError) {
    return error.reason !== 'invalid_response' && error.reason !== 'circuit_open';
  }
  if (error instanceof UpstreamProblemError) return error.status >= 500;
  return error instanceof UpstreamCancelledError && error.reason === 'deadline' && attempts > 0;
}

/** Whether the upstream answered the call that ended with `error` (a problem below 500). */
export function answeredBy(error: unknown): boolean {
  return error instanceof UpstreamProblemError && error.status < 500;
}

/**
 * The breaker's probe over `sendOnce`: one attempt of capability discovery with the key
 * `keyOf` gives now (the facade's own, current across a rotation), past the circuit.
 */
export function createCircuitProbe(sendOnce: AttemptSender, keyOf: () => string): () => Promise<boolean> {
  return async () => {
    const apiKey = keyOf();
    const call: UpstreamCall = {
      credentials: { apiKey, configured: true },
      scope: PLATFORM_SCOPE,
      requestId: newRequestId(),
      retryBudget: createRetryBudget(0),
      callBudget: createCallBudget(1),
    };
    try {
      await sendOnce(call, CAPABILITY_DISCOVERY, 1, undefined, apiKey);
      return true;
    } catch (error) {
      return answeredBy(error);
    }
  };
}

/** What `/readyz` asks too: it reads no customer's data. */
const CAPABILITY_DISCOVERY: UpstreamRequest = Object.freeze({ method: 'GET', path: '/v3/capabilities' });
