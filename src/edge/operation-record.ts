/**
 * The one operation recorder of every transport: it alone writes the `graphql operation` log line,
 * for HTTP (through Apollo's logging plugin, src/observability/operation-logging-plugin.ts) and for
 * every live transport. For an operation run outside Apollo Server's request pipeline (a
 * subscription over graphql-ws, SSE or any later live transport) it also counts the operation
 * metrics and tells the lifecycle events an HTTP operation gets from Apollo's plugins, with the
 * transport named. Refusals are recorded too, as Apollo records an operation refused at validation.
 */
import type { Logger } from '../logger.ts';
import type { LifecycleEmitter } from '../observability/lifecycle.ts';
import type { Metrics, OperationTypeLabel } from '../observability/metrics.ts';
import type { OperationNameSource } from '../observability/operation-labels.ts';

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
}

/** The `graphql operation` log line, the same for every transport. */
export interface OperationLine {
  readonly transport: string;
  readonly operationName: string | null;
  readonly requestId: string;
  /** The HTTP status, for an operation answered over HTTP. */
  readonly status?: number;
  readonly durationMs: number;
  readonly errorCodes: readonly unknown[];
}

export interface OperationRecorder {
  /** Writes the `graphql operation` line of an operation that ended (HTTP's, from Apollo's plugin). */
  line(line: OperationLine): void;
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
}): OperationRecorder {
  const { logger, metrics, lifecycle } = options;
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
    line,
    started(operation) {
      if (!lifecycle.observed('subscriptionStarted')) return;
      lifecycle.emit('subscriptionStarted', {
        subscriptionId: operation.id,
        operationName: operation.operationName,
        subject: operation.subject,
      });
    },
    completed(operation, errorCodes, startedAt, listened) {
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
      };
      metrics.operations.inc(labels);
      metrics.operationDuration.observe(labels, durationMs / 1000);
      if (listened) lifecycle.emit('subscriptionCompleted', { subscriptionId: operation.id });
    },
  };
}
