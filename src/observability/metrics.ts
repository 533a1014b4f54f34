/**
 * The facade's Prometheus metrics (prom-client), served on `/metrics`. One {@link Registry} per
 * app, never prom-client's global one, so two apps in one process (tests, replicas side by side)
 * keep apart.
 *
 * No label carries an id, a key, a URL with ids in it or anything else a caller could make grow
 * without bound: upstream routes are the contract's templates, operation names go through
 * {@link createOperationLabels}, outcomes and reasons are closed sets.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  createGatewayInvalidationMetrics,
  type GatewayInvalidationMetrics,
} from './gateway-invalidation-metrics.ts';
import type { RequestHandler } from 'express';
import type { UpstreamObserver } from '../upstream/client.ts';
import { createRouteMatcher, type RouteMatcher } from '../upstream/route-template.ts';
import { createOperationLabels, type OperationLabeler } from './operation-labels.ts';
import { createCircuitMetrics } from './circuit-metrics.ts';

/** Label of a request that never became an operation (unparsable, invalid, unknown operation name). */
export const UNKNOWN_OPERATION = 'unknown';

/** Operation type label: a GraphQL operation type, or `unknown` before one is known. */
export type OperationTypeLabel = 'query' | 'mutation' | 'subscription' | 'unknown';

export interface MetricsOptions {
  /** Distinct operation names kept as labels; later new names count as `other`. */
  maxOperationNames: number;
  /** Collect Node's process metrics (CPU, memory, event loop, GC). Default true. */
  processMetrics?: boolean;
}

/** The labels of the operation counts and durations. */
type OperationLabel = 'operation_name' | 'operation_type' | 'outcome' | 'environment' | 'transport';

export interface Metrics extends GatewayInvalidationMetrics {
  readonly registry: Registry;
  /**
   * GraphQL operations over every transport, by bounded name, type, outcome (`ok`, `error`) and
   * transport (`http`, `graphql-ws`, `sse`, `multipart`, `mcp`), and by `environment` only when
   * callers are bound to one (a key per environment).
   */
  readonly operations: Counter<OperationLabel>;
  readonly operationDuration: Histogram<OperationLabel>;
  /** Values asked of the per-operation DataLoaders: `hit` (answered from the loader) or `miss` (read upstream). */
  readonly loaderLoads: Counter<'operation_name' | 'operation_type' | 'result'>;
  /** Upstream calls (retries included) made by operations, by bounded name and type. */
  readonly operationUpstreamCalls: Counter<'operation_name' | 'operation_type'>;
  /** Each admitted HTTP operation's estimated cost (the `QUERY_MAX_COST` measure), by bounded name and type. */
  readonly operationEstimatedCost: Histogram<'operation_name' | 'operation_type'>;
  /** Upstream calls (retries included) of each admitted HTTP operation, by bounded name and type. */
  readonly operationUpstreamCallsPerOperation: Histogram<'operation_name' | 'operation_type'>;
  /**
   * Operations missing from the trusted-documents manifest, by why (`unknown-id`, `untrusted-query`,
   * `id-and-query-differ`, `no-operation`) and what was done (`refused`, or `logged` and run in
   * log-only mode).
   */
  readonly untrustedOperations: Counter<'reason' | 'action'>;
  /** Upstream attempts by method, route template and status (`none` when no answer arrived). */
  readonly upstreamRequests: Counter<'method' | 'route' | 'status'>;
  readonly upstreamDuration: Histogram<'method' | 'route' | 'status'>;
  /** Attempts that were retries, by method, route and why the previous one failed. */
  readonly upstreamRetries: Counter<'method' | 'route' | 'reason'>;
  /** Webhook deliveries by outcome, and by `environment` (its route's) only with a key per environment. */
  readonly webhookDeliveries: Counter<'outcome' | 'environment'>;
  /** Signed webhook events parked as never processable, by environment and reason. */
  readonly webhookDeadLetters: Counter<'environment' | 'reason'>;
  readonly subscriberQueueOverflows: Counter;
  /** Events of the log delivered to subscribers resuming after a cursor. */
  readonly eventsReplayed: Counter;
  /** Events appended by the reconciliation of missed webhooks. */
  readonly eventsReconciled: Counter;
  /** Customers whose reads failed in a reconciliation run (each read again next run). */
  readonly eventsReconcileFailures: Counter;
  /** From an event's `occurredAt` to its payload leaving for a subscriber. */
  readonly eventDeliveryLatency: Histogram;
  /**
   * Requests refused by a rate limit, by bucket (a fixed name per limit, never a caller id):
   * `metrics.rateLimitRefusals.inc({ bucket: 'operations' })`.
   */
  readonly rateLimitRefusals: Counter<'bucket'>;
  /** Memory-reducing collections run once the process turned idle (src/observability/memory-release.ts). */
  readonly memoryReleases: Counter;
  /** Resident bytes those collections gave back (RSS before minus RSS after, summed). */
  readonly memoryReleasedBytes: Counter;
  /** 1 when the idle-time release can run (on, and node started with `--expose-gc`), else 0. */
  readonly memoryReleaseArmed: Gauge;
  /** The label of an operation name: its own only when it cannot be squatted (operation-labels.ts). */
  operationNameLabel: OperationLabeler;
  /** Watches upstream calls: plug into `createUpstreamClient({ observer })`. */
  readonly upstreamObserver: UpstreamObserver;
  /** `GET /metrics`: the registry in Prometheus text format. */
  handler(): RequestHandler;
}

/** Upstream and operation durations: 5 ms to 30 s. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Estimated operation costs: one field up to the default `QUERY_MAX_COST` (5,000) and past it. */
const COST_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000];
/** Upstream calls of one operation: none up to the default `UPSTREAM_MAX_CALLS_PER_OPERATION` (100). */
const CALL_COUNT_BUCKETS = [0, 1, 2, 3, 5, 10, 25, 50, 100, 250];
/** Event to delivery: webhook retries can stretch it to minutes. */
const LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Builds the metrics of one app, each registered in the app's own registry. */
export function createMetrics(options: MetricsOptions): Metrics {
  const registry = new Registry();
  const registers = [registry];
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry });

  // `environment` only with a key per environment: one deployment's sandbox and live traffic apart,
  // a single environment's series unchanged.
  const operationLabels = [
    'operation_name',
    'operation_type',
    'outcome',
    'environment',
    'transport',
  ] as const;
  const operationNameLabel = createOperationLabels(options.maxOperationNames);

  const metrics: Metrics = {
    registry,
    operations: new Counter({
      name: 'graphql_operations_total',
      help: 'GraphQL operations over every transport, by operation name (bounded), type, outcome and transport.',
      labelNames: operationLabels,
      registers,
    }),
    operationDuration: new Histogram({
      name: 'graphql_operation_duration_seconds',
      help: 'Duration of GraphQL operations over every transport, by operation name (bounded), type, outcome and transport.',
      labelNames: operationLabels,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    loaderLoads: new Counter({
      name: 'graphql_dataloader_loads_total',
      help: 'Values asked of the per-operation DataLoaders: hit (no upstream read) or miss (read upstream).',
      labelNames: ['operation_name', 'operation_type', 'result'] as const,
      registers,
    }),
    operationUpstreamCalls: new Counter({
      name: 'graphql_operation_upstream_calls_total',
      help: 'Upstream calls (retries included) made by GraphQL operations, by operation name and type.',
      labelNames: ['operation_name', 'operation_type'] as const,
      registers,
    }),
    operationEstimatedCost: new Histogram({
      name: 'graphql_operation_estimated_cost',
      help: 'Estimated cost (the QUERY_MAX_COST measure) of admitted GraphQL operations over HTTP, by operation name and type.',
      labelNames: ['operation_name', 'operation_type'] as const,
      buckets: COST_BUCKETS,
      registers,
    }),
    operationUpstreamCallsPerOperation: new Histogram({
      name: 'graphql_operation_upstream_calls_per_operation',
      help: 'Upstream calls (retries included) of each admitted GraphQL operation over HTTP, by operation name and type.',
      labelNames: ['operation_name', 'operation_type'] as const,
      buckets: CALL_COUNT_BUCKETS,
      registers,
    }),
    untrustedOperations: new Counter({
      name: 'graphql_untrusted_operations_total',
      help: 'Operations missing from the trusted-documents manifest, by reason and action (refused, or logged in log-only mode).',
      labelNames: ['reason', 'action'] as const,
      registers,
    }),
    ...createUpstreamMetrics(registers),
    ...createWebhookMetrics(registers),
    subscriberQueueOverflows: new Counter({
      name: 'facade_subscriber_queue_overflows_total',
      help: 'Subscriptions ended because their subscriber let too many events wait.',
      registers,
    }),
    eventsReplayed: new Counter({
      name: 'facade_events_replayed_total',
      help: 'Events of the log delivered to subscribers that resumed after a cursor.',
      registers,
    }),
    eventsReconciled: new Counter({
      name: 'facade_events_reconciled_total',
      help: 'Events appended to the log by the reconciliation of missed webhooks.',
      registers,
    }),
    eventsReconcileFailures: new Counter({
      name: 'facade_events_reconcile_failures_total',
      help: 'Customers whose reads failed in a reconciliation run; each is read again next run, the others move on.',
      registers,
    }),
    eventDeliveryLatency: new Histogram({
      name: 'facade_event_delivery_latency_seconds',
      help: "From an upstream event's occurredAt to its payload leaving for a subscriber.",
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    rateLimitRefusals: new Counter({
      name: 'facade_rate_limit_refusals_total',
      help: 'Requests refused by a rate limit, by bucket.',
      labelNames: ['bucket'] as const,
      registers,
    }),
    ...createMemoryReleaseMetrics(registers),
    ...createGatewayInvalidationMetrics(registers),
    operationNameLabel,
    handler: () => exposition(registry),
  };

  return metrics;
}

/** What the idle-time memory release tells (src/observability/memory-release.ts). */
function createMemoryReleaseMetrics(
  registers: Registry[],
): Pick<Metrics, 'memoryReleases' | 'memoryReleasedBytes' | 'memoryReleaseArmed'> {
  return {
    memoryReleases: new Counter({
      name: 'facade_memory_releases_total',
      help: 'Memory-reducing garbage collections run after the process had been idle for MEMORY_RELEASE_IDLE_MS.',
      registers,
    }),
    memoryReleasedBytes: new Counter({
      name: 'facade_memory_released_bytes_total',
      help: 'Resident memory given back by those collections (RSS before minus RSS after, summed).',
      registers,
    }),
    memoryReleaseArmed: new Gauge({
      name: 'facade_memory_release_armed',
      help: 'Whether the idle-time memory release can run: 1 when on and node runs with --expose-gc, else 0.',
      registers,
    }),
  };
}

/** Serves `registry` in Prometheus's text format, never cached. */
function exposition(registry: Registry): RequestHandler {
  return (_request, response, next) => {
    registry.metrics().then((text) => {
      response.setHeader('content-type', registry.contentType);
      response.setHeader('cache-control', 'no-store');
      response.status(200).send(text);
    }, next);
  };
}

/** The webhook route's counters: how each delivery was answered, and the events it parked. */
function createWebhookMetrics(
  registers: Registry[],
): Pick<Metrics, 'webhookDeliveries' | 'webhookDeadLetters'> {
  return {
    webhookDeliveries: new Counter({
      name: 'facade_webhook_deliveries_total',
      help: 'Webhook deliveries received, by outcome (accepted, duplicate, forged, stale, malformed, in_flight, unavailable, dead_lettered, ...).',
      labelNames: ['outcome', 'environment'] as const,
      registers,
    }),
    webhookDeadLetters: new Counter({
      name: 'facade_webhook_dead_letters_total',
      help: 'Signed webhook events parked as never processable, by environment (sandbox, live, unknown) and reason.',
      labelNames: ['environment', 'reason'] as const,
      registers,
    }),
  };
}

/** The upstream attempts' metrics, and the observer the upstream client tells of each attempt. */
function createUpstreamMetrics(
  registers: Registry[],
): Pick<Metrics, 'upstreamRequests' | 'upstreamDuration' | 'upstreamRetries' | 'upstreamObserver'> {
  // `environment` only with a key per environment: one deployment's two upstreams apart.
  const upstreamLabels = ['method', 'route', 'status', 'environment'] as const;
  const routeOf: RouteMatcher = createRouteMatcher();
  const upstreamRequests = new Counter({
    name: 'facade_upstream_requests_total',
    help: 'Upstream HTTP attempts, by method, route template and status (none: no answer arrived).',
    labelNames: upstreamLabels,
    registers,
  });
  const upstreamDuration = new Histogram({
    name: 'facade_upstream_request_duration_seconds',
    help: 'Duration of upstream HTTP attempts, by method, route template and status.',
    labelNames: upstreamLabels,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const upstreamRetries = new Counter({
    name: 'facade_upstream_retries_total',
    help: 'Upstream attempts that were retries, by method, route template and the previous failure.',
    labelNames: ['method', 'route', 'reason'] as const,
    registers,
  });
  // The failure of each call's last attempt, to label its retry.
  const lastFailure = new WeakMap<object, string>();

  return {
    upstreamRequests,
    upstreamDuration,
    upstreamRetries,
    upstreamObserver: {
      circuit: createCircuitMetrics(registers),
      attempt({ request, attempt, status, durationSeconds, failure, environment }) {
        const { template } = routeOf(request.path);
        const labels = {
          method: request.method,
          route: template,
          status: status === undefined ? 'none' : String(status),
          ...(environment === undefined ? {} : { environment }),
        };
        upstreamRequests.inc(labels);
        upstreamDuration.observe(labels, durationSeconds);
        if (attempt > 1) {
          upstreamRetries.inc({
            method: request.method,
            route: template,
            reason: lastFailure.get(request) ?? 'unknown',
          });
        }
        if (failure !== undefined) lastFailure.set(request, failureLabel(status, failure));
      },
    },
  };
}

/**
 * The reason label of a failed attempt: its status when one arrived (a closed set of numbers), else
 * the transport reason (a closed set). Never the upstream's problem code: the upstream's catalog is
 * open, so its codes could grow a label without bound.
 */
function failureLabel(status: number | undefined, failure: string): string {
  if (status !== undefined) return String(status);
  return /^[a-z_]+$/.test(failure) ? failure : 'unknown';
}
