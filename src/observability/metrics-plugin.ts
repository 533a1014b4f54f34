/**
 * Counts every GraphQL operation over HTTP into the app's metrics once its response is ready: the
 * operation (bounded name, type, outcome) and its duration, what its DataLoaders answered without
 * the upstream, and how many upstream calls it made. One hook per operation, none per field.
 */
import type { ApolloServerPlugin } from '@apollo/server';
import type { LoaderStats } from '../loaders/fan-out-loader.ts';
import type { CallBudget } from '../upstream/call-budget.ts';
import { UNKNOWN_OPERATION, type Metrics, type OperationTypeLabel } from './metrics.ts';

/** What the plugin reads from the request context; all are absent when the context was never built. */
export interface MeasurableContext {
  readonly upstream?: { readonly callBudget: CallBudget };
  readonly loaderStats?: LoaderStats;
  /** An operator's operation names may become labels (operation-labels.ts). */
  readonly caller?: { readonly operator: boolean } | undefined;
  /** The door's estimate, set once it admitted the operation (src/edge/http.ts). */
  readonly cost?: { readonly estimated: number | undefined };
}

/** Options of {@link createMetricsPlugin}. */
export interface MetricsPluginOptions {
  /** Whether `query` is a listed trusted document, whose name may become a label. Default: none is. */
  isTrustedDocument?: (query: string) => boolean;
}

/** Builds the metrics plugin. */
export function createMetricsPlugin<TContext extends MeasurableContext>(
  metrics: Metrics,
  options: MetricsPluginOptions = {},
): ApolloServerPlugin<TContext> {
  return {
    async requestDidStart() {
      const started = performance.now();
      return {
        async willSendResponse({ operation, contextValue, response, source }) {
          // Only a name from the parsed operation: the request's own `operationName` is any string.
          const operationType: OperationTypeLabel = operation?.operation ?? 'unknown';
          const operationName =
            operation === undefined
              ? UNKNOWN_OPERATION
              : metrics.operationNameLabel(operation.name?.value, {
                  fromOperator: contextValue.caller?.operator === true,
                  trustedDocument: options.isTrustedDocument?.(source) ?? false,
                });
          const failed =
            response.body.kind === 'single' && (response.body.singleResult.errors?.length ?? 0) > 0;
          const labels = {
            operation_name: operationName,
            operation_type: operationType,
            outcome: failed || (response.http.status ?? 200) >= 400 ? 'error' : 'ok',
          };
          metrics.operations.inc(labels);
          metrics.operationDuration.observe(labels, (performance.now() - started) / 1000);

          const byOperation = { operation_name: operationName, operation_type: operationType };
          const stats = contextValue.loaderStats;
          if (stats !== undefined && stats.loads > 0) {
            metrics.loaderLoads.inc({ ...byOperation, result: 'miss' }, stats.misses);
            metrics.loaderLoads.inc(
              { ...byOperation, result: 'hit' },
              Math.max(0, stats.loads - stats.misses),
            );
          }
          const budget = contextValue.upstream?.callBudget;
          const upstreamCalls = budget === undefined ? 0 : budget.sent;
          if (upstreamCalls > 0) metrics.operationUpstreamCalls.inc(byOperation, upstreamCalls);
          // Per admitted operation, the figures `extensions.cost` gives, so a team sees the spread.
          const estimated = contextValue.cost?.estimated;
          if (estimated !== undefined) {
            metrics.operationEstimatedCost.observe(byOperation, estimated);
            metrics.operationUpstreamCallsPerOperation.observe(byOperation, upstreamCalls);
          }
        },
      };
    },
  };
}
