/**
 * What the event pipeline tells tracing, and the trace context an event carries through the bus.
 *
 * The hooks ({@link EventTracer}) import nothing of OpenTelemetry: their implementation is
 * `src/observability/event-tracing.ts`, built only when tracing is on. With tracing off the
 * pipeline is given no tracer and does exactly what it did without one.
 *
 * The trace context travels beside the event in the bus message (a member of its own,
 * {@link TRACE_CONTEXT_MEMBER}), never inside the `PlatformEvent` the schema exposes. A message
 * without it is an ordinary event; one written by another process is read like any input, and a
 * trace context that is not a well-formed W3C `traceparent` (and optional `tracestate`) is ignored
 * (`src/observability/trace-context.ts` reads it: the format is tracing's, not the pipeline's).
 */
import type { EventTraceContext } from '../observability/trace-context.ts';
import type { PlatformEvent, WebhookDeliveryOutcome } from './event-types.ts';

/** The member of a bus message that carries its {@link EventTraceContext}. */
export const TRACE_CONTEXT_MEMBER = 'traceContext';

/** How one event's delivery to one subscriber ended. */
export type DeliveryOutcome =
  /** Its payload was read and executed for the subscriber. */
  | 'delivered'
  /** The upstream refused the subscriber's read: not an event this subscriber may see. */
  | 'dropped'
  /** Already shown by the subscription's replay (an event at or before the replayed record). */
  | 'skipped'
  /** Building the payload threw. */
  | 'failed';

/** The hooks the event pipeline calls when tracing is on. None may throw of its own. */
export interface EventTracer {
  /**
   * Opens the receipt span of one webhook delivery (a child of the HTTP server span when there is
   * one), ended by the route once the answer is sent. Undefined when it could not be recorded.
   */
  startReceipt(): WebhookReceiptTrace | undefined;
  /**
   * Runs the publication of `event` on `channel` under a producer span; `send` is given the trace
   * context to carry with the event (undefined when the publication is not recorded).
   */
  publish<T>(
    event: PlatformEvent,
    channel: string,
    send: (carried: EventTraceContext | undefined) => Promise<T>,
  ): Promise<T>;
  /**
   * Opens the delivery of `event` to one subscriber: a consumer span starting a trace of its own,
   * linked to the publish span `published` names (none when the message carried none, or a
   * garbled one). Undefined when no delivery can ever be recorded (the sampler records no root).
   */
  deliver(
    event: PlatformEvent,
    published: EventTraceContext | undefined,
    operationName: string | undefined,
  ): DeliveryTrace | undefined;
}

/** One webhook delivery's receipt span, as the route sees it. */
export interface WebhookReceiptTrace {
  /** The verified event the delivery carries (its id and type go on the span). */
  event(event: PlatformEvent): void;
  /** How the delivery was answered. */
  outcome(outcome: WebhookDeliveryOutcome): void;
  /** Runs `work` (the publication, above all) as the span's children; a failure marks the span. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** Ends the span; only the first end counts. */
  end(): void;
}

/** One event's delivery to one subscriber, as its span. */
export interface DeliveryTrace {
  /** Runs `work` (the subscriber's reads) as the span's children; a failure ends the span. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** Runs `work` (the execution of the payload) as the span's children, then ends it `delivered`. */
  finish<T>(work: () => Promise<T>): Promise<T>;
  /** Ends the span with `outcome`; only the first end counts. */
  end(outcome: DeliveryOutcome): void;
}
