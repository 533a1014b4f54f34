/**
 * What the app's work tells the metrics and the memory release: the events runtime's deliveries,
 * latencies, overflows, replays and reconciliations, the gateways' cache invalidations, and every operation the one recorder records
 * on every transport (each one work the memory release waits past).
 */
import type { EventsRuntimeOptions } from '../events/events-runtime.ts';
import type { GatewayInvalidationObserver } from '../events/gateway-caches/gateway-caches.ts';
import type { MemoryRelease } from './memory-release.ts';
import type { Metrics } from './metrics.ts';
import type { OperationRecorder } from './operation-record.ts';

/**
 * What the events runtime tells the metrics: deliveries, latencies, overflows, replays,
 * reconciliations; each delivery is work for the memory release.
 */
export function eventMetrics(
  metrics: Metrics,
  memoryRelease: MemoryRelease,
): Pick<
  EventsRuntimeOptions,
  'onWebhookDelivery' | 'onDeadLetter' | 'liveObserver' | 'onReconciled' | 'onReconcileFailed'
> {
  return {
    // A pipeline has an environment only with a key per environment: one environment's series unchanged.
    onWebhookDelivery: (outcome, environment) =>
      metrics.webhookDeliveries.inc({ outcome, ...(environment === undefined ? {} : { environment }) }),
    onDeadLetter: ({ environment, reason }) => metrics.webhookDeadLetters.inc({ environment, reason }),
    liveObserver: {
      // Streams opening, deliveries and live queries' executions are waited on: no memory release under them.
      ...(memoryRelease.armed ? { working: () => memoryRelease.working() } : {}),
      delivered: (event) => {
        memoryRelease.touch();
        metrics.eventDeliveryLatency.observe(Math.max(0, (Date.now() - Date.parse(event.occurredAt)) / 1000));
      },
      overflowed: () => metrics.subscriberQueueOverflows.inc(),
      replayed: () => metrics.eventsReplayed.inc(),
    },
    onReconciled: (count) => metrics.eventsReconciled.inc(count),
    onReconcileFailed: () => metrics.eventsReconcileFailures.inc(),
  };
}

/**
 * `recorder`, telling `memoryRelease` of every operation started or ended on every transport; the
 * recorder itself when the release cannot run.
 */
export function touchingOnEachOperation(
  recorder: OperationRecorder,
  memoryRelease: MemoryRelease,
): OperationRecorder {
  if (!memoryRelease.armed) return recorder;
  return {
    httpStarted(requestId, operationName) {
      memoryRelease.touch();
      recorder.httpStarted(requestId, operationName);
    },
    httpCompleted(operation) {
      memoryRelease.touch();
      recorder.httpCompleted(operation);
    },
    started(operation) {
      memoryRelease.touch();
      recorder.started(operation);
    },
    completed(operation, errorCodes, startedAt, listened) {
      memoryRelease.touch();
      recorder.completed(operation, errorCodes, startedAt, listened);
    },
  };
}

/** What the gateways' cache invalidations tell the metrics: each one's outcome and duration. */
export function gatewayInvalidationObserver(metrics: Metrics): GatewayInvalidationObserver {
  return {
    invalidated(gateway, outcome, seconds) {
      metrics.gatewayInvalidations.inc({ gateway, outcome });
      metrics.gatewayInvalidationDuration.observe({ gateway, outcome }, seconds);
    },
  };
}
