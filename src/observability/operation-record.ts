/**
 * The one operation recorder of every transport: it alone writes the `graphql operation` log line,
 * counts the operation metrics and tells the app's lifecycle, for HTTP (Apollo Server stays its
 * executor; its hooks hand each operation here through src/http/operation-record-plugin.ts) and for
 * every live transport (graphql-ws, SSE and any later one, through src/edge/live-connections.ts),
 * with the transport named. It lives with the metrics and the lifecycle it writes, so neither
 * transport reaches back into the other's folder to record. Refusals are recorded too, as Apollo records an operation refused at validation.
 * Nothing is built for the lifecycle while nobody listens to it. An executed operation that carries
 * its `usage` is also counted in the field usage (`usage-recorder.ts`), whatever its transport.
 */
import type { GraphQLFormattedError } from 'graphql';
import type { LoaderStats } from '../loaders/fan-out-loader.ts';
import type { Logger } from '../logger.ts';
import type { LifecycleEmitter, OperationOutcome } from './lifecycle.ts';
import { UNKNOWN_OPERATION, type Metrics, type OperationTypeLabel } from './metrics.ts';
import type { OperationNameSource } from './operation-labels.ts';
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { OperationUsage } from './field-usage.ts';
import type { UsageRecorder } from './usage-recorder.ts';

/** One operation, as the record names it. */
export interface RecordedOperation {
  /** `graphql-ws`, `sse` ... */
  readonly transport: string;
  /** The transport's id of the operation (connection and operation id), stable until completion. */
  readonly id: string;
  readonly operationType: OperationTypeLabel;
  /** The parsed operation's name; null for an anonymous one (or one refused before parsing). */
  readonly operationName: string | null;
  /** The caller's subject, as audit lines name it. */
  readonly subject: string;
  /** The operation's request id (`X-Request-Id` of its upstream calls). */
  readonly requestId: string;
  /** Where its name came from: only an operator's or a trusted document's name is a label. */
  readonly nameSource: OperationNameSource;
  /** The connection's environment (its key's, or the one its token binds it to). */
  readonly environment?: PlatformEnvironment | undefined;
  /**
   * What the operation used, for the field usage: given for an operation the door admitted (one
   * refused before execution used nothing). Counted once, when it starts listening, or when it ends
   * if it never did.
   */
  readonly usage?: OperationUsage | undefined;
}

/** The `graphql operation` log line, the same for every transport. */
interface OperationLine {
  readonly transport: string;
  readonly operationName: string | null;
  readonly requestId: string;
  /** The HTTP status, for an operation answered over HTTP. */
  readonly status?: number;
  readonly durationMs: number;
  readonly errorCodes: readonly unknown[];
}

/** One HTTP operation once its answer is ready, as Apollo's hooks saw it. */
export interface HttpOperation {
  /**
   * The transport of one operation per request that answered it: `http` when absent (Apollo's
   * hooks), `mcp` for a tool call or a resource read over the MCP endpoint.
   */
  readonly transport?: string;
  readonly requestId: string;
  /** Apollo's name of the operation (null while none is known). */
  readonly operationName: string | null;
  /** The parsed operation: its type and its own name; undefined when it never resolved. */
  readonly parsed: { readonly type: OperationTypeLabel; readonly name: string | undefined } | undefined;
  /** Where its name came from: only an operator's or a trusted document's name is a label. */
  readonly nameSource: OperationNameSource;
  readonly status: number;
  /** `performance.now()` when Apollo took the request. */
  readonly startedAt: number;
  /** The codes of every error it met, as the client's codes are made. */
  readonly errorCodes: readonly unknown[];
  /** The answer's errors as sent (undefined for an answer in parts). */
  readonly answerErrors: readonly GraphQLFormattedError[] | undefined;
  /** The answer carries data. */
  readonly answerHasData: boolean;
  /** What its DataLoaders answered; absent when its context was never built. */
  readonly loaderStats: LoaderStats | undefined;
  /** Requests it sent to the upstream. */
  readonly upstreamCalls: number;
  /** The door's estimate, once it admitted the operation. */
  readonly estimatedCost: number | undefined;
  /** The environment the door bound its caller to; undefined with one key or before one was bound. */
  readonly environment: PlatformEnvironment | undefined;
  /** What the operation used, for the field usage: given once the door admitted it and it ran. */
  readonly usage?: OperationUsage | undefined;
}

export interface OperationRecorder {
  /** Apollo took an HTTP request (its name is the request's own until the operation resolves). */
  httpStarted(requestId: string, operationName: string | null): void;
  /** An HTTP operation's answer is ready: its line, its metrics, its lifecycle event. */
  httpCompleted(operation: HttpOperation): void;
  /** The operation listens (its queue subscribed and any replay read): no change is missed now. */
  started(operation: RecordedOperation): void;
  /**
   * The operation ended (by the client, the server, expiry or shutdown), or was refused;
   * `listened` when it had {@link started}.
   */
  completed(
    operation: RecordedOperation,
    errorCodes: readonly string[],
    startedAt: number,
    listened: boolean,
  ): void;
}

export function createOperationRecorder(options: {
  logger: Logger;
  metrics: Metrics;
  lifecycle: LifecycleEmitter;
  /**
   * Whether callers are bound to an environment (a key per environment): only then do the
   * operation metrics carry `environment`, so one environment's series keep their labels.
   */
  bindsEnvironments?: boolean;
  /** Field usage per client (`USAGE_*`): told of every executed operation that carries its usage. */
  usage?: Pick<UsageRecorder, 'record'> | undefined;
}): OperationRecorder {
  const { logger, metrics, lifecycle, usage } = options;
  const environmentLabel = (environment: PlatformEnvironment | undefined) =>
    options.bindsEnvironments === true && environment !== undefined ? { environment } : {};
  const line = (fields: OperationLine): void => {
    logger.info('graphql operation', {
      transport: fields.transport,
      operationName: fields.operationName,
      requestId: fields.requestId,
      ...(fields.status === undefined ? {} : { status: fields.status }),
      durationMs: fields.durationMs,
      errorCodes: fields.errorCodes,
    });
  };
  return {
    httpStarted(requestId, operationName) {
      if (lifecycle.observed('operationStarted'))
        lifecycle.emit('operationStarted', { requestId, operationName });
    },
    httpCompleted(operation) {
      if (operation.usage !== undefined) usage?.record(operation.usage);
      const elapsedMs = performance.now() - operation.startedAt;
      const transport = operation.transport ?? 'http';
      line({
        transport,
        operationName: operation.operationName,
        requestId: operation.requestId,
        status: operation.status,
        durationMs: Math.round(elapsedMs),
        errorCodes: operation.errorCodes,
      });
      countHttpOperation(metrics, operation, elapsedMs, {
        ...environmentLabel(operation.environment),
        transport,
      });
      if (lifecycle.observed('operationCompleted')) {
        lifecycle.emit('operationCompleted', {
          requestId: operation.requestId,
          operationName: operation.operationName,
          status: operation.status,
          outcome: outcomeOf(operation),
          errorCodes: (operation.answerErrors ?? []).map((error) => {
            const code = error.extensions?.['code'];
            return typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR';
          }),
          durationMs: Math.round(elapsedMs),
        });
      }
    },
    started(operation) {
      if (operation.usage !== undefined) usage?.record(operation.usage);
      if (!lifecycle.observed('subscriptionStarted')) return;
      lifecycle.emit('subscriptionStarted', {
        subscriptionId: operation.id,
        operationName: operation.operationName,
        subject: operation.subject,
      });
    },
    completed(operation, errorCodes, startedAt, listened) {
      if (!listened && operation.usage !== undefined) usage?.record(operation.usage);
      const durationMs = Math.round(performance.now() - startedAt);
      line({
        transport: operation.transport,
        operationName: operation.operationName,
        requestId: operation.requestId,
        durationMs,
        errorCodes,
      });
      const labels = {
        operation_name: metrics.operationNameLabel(operation.operationName, operation.nameSource),
        operation_type: operation.operationType,
        outcome: errorCodes.length > 0 ? 'error' : 'ok',
        ...environmentLabel(operation.environment),
        transport: operation.transport,
      };
      metrics.operations.inc(labels);
      metrics.operationDuration.observe(labels, durationMs / 1000);
      if (listened) lifecycle.emit('subscriptionCompleted', { subscriptionId: operation.id });
    },
  };
}

/**
 * An HTTP operation's metrics: the operation (bounded name, type, outcome) and its duration, what
 * its DataLoaders answered without the upstream, how many upstream calls it made and, once the door
 * admitted it, its estimated cost beside them.
 */
function countHttpOperation(
  metrics: Metrics,
  operation: HttpOperation,
  elapsedMs: number,
  labels: { environment?: PlatformEnvironment; transport: string },
): void {
  const { parsed } = operation;
  // Only a name from the parsed operation: the request's own `operationName` is any string.
  const operationType: OperationTypeLabel = parsed?.type ?? 'unknown';
  const operationName =
    parsed === undefined ? UNKNOWN_OPERATION : metrics.operationNameLabel(parsed.name, operation.nameSource);
  const failed = (operation.answerErrors?.length ?? 0) > 0 || operation.status >= 400;
  const byOutcome = {
    operation_name: operationName,
    operation_type: operationType,
    outcome: failed ? 'error' : 'ok',
    ...labels,
  };
  metrics.operations.inc(byOutcome);
  metrics.operationDuration.observe(byOutcome, elapsedMs / 1000);

  const byOperation = { operation_name: operationName, operation_type: operationType };
  const stats = operation.loaderStats;
  if (stats !== undefined && stats.loads > 0) {
    metrics.loaderLoads.inc({ ...byOperation, result: 'miss' }, stats.misses);
    metrics.loaderLoads.inc({ ...byOperation, result: 'hit' }, Math.max(0, stats.loads - stats.misses));
  }
  if (operation.upstreamCalls > 0) metrics.operationUpstreamCalls.inc(byOperation, operation.upstreamCalls);
  // Per admitted operation, the figures `extensions.cost` gives, so a team sees the spread.
  if (operation.estimatedCost !== undefined) {
    metrics.operationEstimatedCost.observe(byOperation, operation.estimatedCost);
    metrics.operationUpstreamCallsPerOperation.observe(byOperation, operation.upstreamCalls);
  }
}

/** Whether an HTTP answer succeeded, partly (errors beside data) or not at all. */
function outcomeOf(operation: HttpOperation): OperationOutcome {
  if ((operation.answerErrors?.length ?? 0) === 0) return 'success';
  return operation.answerHasData ? 'partial' : 'failure';
}
