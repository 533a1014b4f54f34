/**
 * The W3C trace context an event carries through the bus beside it, and how to read one safely.
 * The format is tracing's knowledge; the event pipeline (`events/log/event-log.ts`, which reads it
 * from a bus message) and the event spans (`event-tracing.ts`, which link to it) both read it
 * here. Nothing of OpenTelemetry is imported: the pipeline reads it with tracing off too.
 */

/** A W3C trace context: the publish span an event's deliveries link to. */
export interface EventTraceContext {
  /** `00-<trace id>-<span id>-<flags>`. */
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** A version-00 `traceparent`, as this process writes it. */
const TRACEPARENT = /^00-[\da-f]{32}-[\da-f]{16}-[\da-f]{2}$/;
/** `tracestate` is printable ASCII and at most 512 characters (W3C Trace Context). */
const TRACESTATE = /^[\x20-\x7e]{0,512}$/;

/**
 * The trace context of a bus message member, or undefined when there is none or it is not well
 * formed. Never throws: the message may come from any process that can publish on the channel.
 */
export function readEventTraceContext(value: unknown): EventTraceContext | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { traceparent, tracestate } = value as Record<string, unknown>;
  if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent)) return undefined;
  // A malformed tracestate is dropped alone: the traceparent still names the publish span.
  return typeof tracestate === 'string' && TRACESTATE.test(tracestate) && tracestate !== ''
    ? { traceparent, tracestate }
    : { traceparent };
}
