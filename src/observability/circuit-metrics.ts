/**
 * The upstream circuit breakers' metrics (`src/upstream/circuit-breaker.ts`): the state of each
 * environment's circuit and its changes, told by the client as they happen.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { CircuitChange, CircuitState } from '../upstream/circuit-breaker.ts';

/** The gauge's value of each state: 0 while calls go upstream. */
const STATE_VALUES: Readonly<Record<CircuitState, number>> = { closed: 0, open: 1, 'half-open': 2 };

/** Registers the circuit's series in `registers`; returns the hook that keeps them. */
export function createCircuitMetrics(registers: Registry[]): (change: CircuitChange) => void {
  // `environment` only with a key per environment, as the upstream's other series.
  const state = new Gauge({
    name: 'facade_upstream_circuit_state',
    help: 'The upstream circuit of each environment: 0 closed (calls go upstream), 1 open (they fail at once), 2 half-open (a probe is out).',
    labelNames: ['environment'] as const,
    registers,
  });
  const transitions = new Counter({
    name: 'facade_upstream_circuit_transitions_total',
    help: 'Changes of the upstream circuit of each environment, by the state it changed to.',
    labelNames: ['environment', 'to'] as const,
    registers,
  });
  return ({ from, to, environment }) => {
    const labels = environment === undefined ? {} : { environment };
    state.set(labels, STATE_VALUES[to]);
    if (from !== undefined) transitions.inc({ ...labels, to });
  };
}
