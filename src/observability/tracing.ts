/**
 * What the app adds to OpenTelemetry's own instrumentations once tracing is on (imported by
 * `createApp` only then, so with tracing off nothing of OpenTelemetry is loaded): a span per
 * upstream call, the `traceparent` sent upstream, and the trace id for log and audit lines.
 *
 * The SDK itself is started by `tracing-entry.ts` before the app is imported; this module only
 * talks to the OpenTelemetry API, which hands it that SDK's tracer (or no-ops without one).
 *
 * The spans of an event's way from the webhook to each subscriber are `event-tracing.ts`'s.
 *
 * An upstream call's span carries the method, the contract's route template (never the path with
 * ids), the status, the attempts and retries, the request id sent as `X-Request-Id` and the
 * upstream's correlation id. Never a header value, a key or a body.
 */
import {
  context,
  isSpanContextValid,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Tracer,
} from '@opentelemetry/api';
import type { EventTracer } from '../events/event-tracing.ts';
import type { UpstreamTracer } from '../upstream/client.ts';
import {
  UpstreamCallLimitError,
  UpstreamCancelledError,
  UpstreamProblemError,
  UpstreamUnavailableError,
} from '../upstream/errors.ts';
import { createRouteMatcher } from '../upstream/route-template.ts';
import { createEventTracer } from './event-tracing.ts';
import { traceSampling, unsampledParentsStayUnsampled } from './tracing-config.ts';

/** The instrumentation scope of the facade's own spans. */
export const FACADE_TRACER_NAME = 'platform-graphql-facade';

/** Attribute names of an upstream call span beyond OpenTelemetry's semantic conventions. */
export const UPSTREAM_SPAN_ATTRIBUTES = {
  attempts: 'facade.upstream.attempts',
  requestId: 'facade.upstream.request_id',
  correlationId: 'facade.upstream.correlation_id',
} as const;

export interface Tracing {
  /** Plug into `createUpstreamClient({ tracer })`. */
  readonly upstreamTracer: UpstreamTracer;
  /** Plug into `createEventsRuntime({ tracer })`: webhook receipt, publish, delivery spans. */
  readonly events: EventTracer;
  /** The trace id of the current operation, if any (for log and audit lines). */
  traceId(): string | undefined;
  /** Exports the spans still buffered (at shutdown, before the process exits). */
  flush(): Promise<void>;
}

/** The `end` of a call without a span: there is nothing to end. */
const endNothing = (): void => undefined;

/** What a call in an unsampled trace gets: the trace sent upstream as it is, no span. */
const UNSAMPLED_CALL = { headers: {}, end: endNothing };

/**
 * Builds the app's tracing hooks over the globally registered tracer provider. `env` tells which
 * sampler the SDK was started with (the process environment, read as the SDK reads it).
 */
export function createTracing(env: Readonly<Record<string, string | undefined>> = process.env): Tracing {
  const tracer: Tracer = trace.getTracer(FACADE_TRACER_NAME);
  const routeOf = createRouteMatcher();
  const skipUnsampled = unsampledParentsStayUnsampled(env);
  const rootsSampled = traceSampling(env) === 'roots';

  return {
    events: createEventTracer({ tracer, rootsSampled, unsampledParentsStayUnsampled: skipUnsampled }),
    upstreamTracer: {
      startCall(call, request) {
        const active = context.active();
        // Under a span that is not sampled, with a sampler that keeps its children unsampled, a span
        // of the call would be built only to be dropped: the operation's own context goes upstream
        // instead (same trace id, same unsampled flag), and nothing is built.
        // Outside any trace (a call at start, a request left untraced), with a sampler that records
        // no root: nothing to build and nothing to send.
        const parent = trace.getSpanContext(active);
        if (parent === undefined && !rootsSampled) return UNSAMPLED_CALL;
        if (skipUnsampled && parent !== undefined && (parent.traceFlags & TraceFlags.SAMPLED) === 0) {
          if (!isSpanContextValid(parent)) return UNSAMPLED_CALL;
          const headers: Record<string, string> = {};
          propagation.inject(active, headers);
          return { headers, end: endNothing };
        }
        const { template } = routeOf(request.path);
        const span = tracer.startSpan(
          `${request.method} ${template}`,
          {
            kind: SpanKind.CLIENT,
            attributes: {
              'http.request.method': request.method,
              'url.template': template,
              [UPSTREAM_SPAN_ATTRIBUTES.requestId]: call.requestId,
            },
          },
          active,
        );
        // The caller's trace (or this span's) goes upstream with every attempt of the call.
        const headers: Record<string, string> = {};
        propagation.inject(trace.setSpan(active, span), headers);
        return {
          headers,
          end({ attempts, response, error }) {
            if (span.isRecording()) {
              const status =
                response?.status ?? (error instanceof UpstreamProblemError ? error.status : undefined);
              if (status !== undefined) span.setAttribute('http.response.status_code', status);
              span.setAttribute(UPSTREAM_SPAN_ATTRIBUTES.attempts, attempts);
              span.setAttribute('http.request.resend_count', Math.max(0, attempts - 1));
              const correlationId = response?.correlationId ?? correlationIdOf(error);
              if (correlationId !== undefined) {
                span.setAttribute(UPSTREAM_SPAN_ATTRIBUTES.correlationId, correlationId);
              }
              if (response === undefined) {
                const type = errorType(error);
                span.setAttribute('error.type', type);
                span.setStatus({ code: SpanStatusCode.ERROR, message: type });
              }
            }
            span.end();
          },
        };
      },
    },
    traceId() {
      const spanContext = trace.getActiveSpan()?.spanContext();
      return spanContext !== undefined && isSpanContextValid(spanContext) ? spanContext.traceId : undefined;
    },
    async flush() {
      const provider = trace.getTracerProvider() as {
        getDelegate?: () => { forceFlush?: () => Promise<void> };
      };
      await provider.getDelegate?.().forceFlush?.();
    },
  };
}

/** A bounded name for why a call failed: the problem code, or the transport reason. */
function errorType(error: unknown): string {
  if (error instanceof UpstreamProblemError) return error.code;
  if (error instanceof UpstreamUnavailableError) return error.reason;
  if (error instanceof UpstreamCancelledError) return `cancelled_${error.reason}`;
  if (error instanceof UpstreamCallLimitError) return 'too_many_upstream_calls';
  return 'unexpected_error';
}

function correlationIdOf(error: unknown): string | undefined {
  if (!(error instanceof UpstreamProblemError)) return undefined;
  const id = (error.problem as { correlationId?: unknown }).correlationId;
  return typeof id === 'string' ? id : undefined;
}
