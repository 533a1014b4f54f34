/**
 * How the gateways' response caches were told what events and writes made stale
 * (`src/events/gateway-caches/`): each invalidation of each gateway, how it ended and how long it
 * took, retries included.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** The gateway invalidations' metrics. */
export interface GatewayInvalidationMetrics {
  /** Invalidations of a gateway's cache, by gateway (`hive`, `router`) and outcome (`done`, `failed`). */
  readonly gatewayInvalidations: Counter<'gateway' | 'outcome'>;
  /** From an invalidation's start to its last attempt's end, by gateway and outcome. */
  readonly gatewayInvalidationDuration: Histogram<'gateway' | 'outcome'>;
}

/** From 1 ms (Redis on the same network) to the retries' longest run. */
const INVALIDATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Builds them in `registers`. */
export function createGatewayInvalidationMetrics(registers: Registry[]): GatewayInvalidationMetrics {
  return {
    gatewayInvalidations: new Counter({
      name: 'facade_gateway_invalidations_total',
      help: "Invalidations of a gateway's response cache for an event or a write, by gateway (hive, router) and outcome (done, failed after its attempts).",
      labelNames: ['gateway', 'outcome'] as const,
      registers,
    }),
    gatewayInvalidationDuration: new Histogram({
      name: 'facade_gateway_invalidation_seconds',
      help: "From an invalidation of a gateway's response cache to its last attempt's end, retries included.",
      labelNames: ['gateway', 'outcome'] as const,
      buckets: INVALIDATION_BUCKETS,
      registers,
    }),
  };
}
