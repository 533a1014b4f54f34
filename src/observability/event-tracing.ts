/**
 * The spans of an event's way from the upstream to each subscriber, over the OpenTelemetry API
 * (loaded only with tracing on, through `tracing.ts`):
 *
 * - `receive webhook` (internal, under the HTTP server span): one per webhook POST, from its arrival
 *   to its answer, with its outcome and, once the signature is verified, the event's id and type;
 * - `publish event` (producer, its child): the hand-over to the bus; its context travels with the
 *   event, through Redis to every replica;
 * - `deliver event` (consumer): one per subscriber the event reaches, each the root of a trace of
 *   its own, linked to the publish span (the messaging convention for fan-out: one trace per
 *   subscriber, not one trace with every subscriber in it). The subscriber's upstream reads and the
 *   execution of its payload are its children.
 *
 * What is built follows what the sampler can record, as for the upstream calls: no receipt or
 * publish span outside a trace when roots are never sampled, none under a parent that is not
 * sampled, and no delivery span at all when roots are never sampled (a delivery starts a trace).
 * Never on a span: the signature, a secret, a header value, the event's payload.
 */
import {
  context,
  createTraceState,
  isSpanContextValid,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { DeliveryOutcome, DeliveryTrace, EventTracer } from '../events/event-tracing.ts';
import type { WebhookDeliveryOutcome } from '../events/receiving/webhook-route.ts';
import { readEventTraceContext, type EventTraceContext } from './trace-context.ts';

/** Attribute names of the event spans beyond OpenTelemetry's semantic conventions. */
const EVENT_SPAN_ATTRIBUTES = {
  /** The upstream's event id (`evt_…`), on all three spans: one search finds an event's spans. */
  eventId: 'facade.event.id',
  eventType: 'facade.event.type',
  /** How the webhook delivery was answered: `accepted`, `duplicate`, `forged`, `stale`, ... */
  webhookOutcome: 'facade.webhook.outcome',
  /** How the delivery to one subscriber ended: `delivered`, `dropped`, `skipped`, `failed`. */
  deliveryOutcome: 'facade.delivery.outcome',
} as const;

/** The span names, fixed: what varies (event type, outcome, channel) is in attributes. */
const EVENT_SPAN_NAMES = {
  receipt: 'receive webhook',
  publish: 'publish event',
  delivery: 'deliver event',
} as const;

/** Outcomes that mean the facade failed, not the sender. */
const FAILED_WEBHOOK_OUTCOMES: ReadonlySet<WebhookDeliveryOutcome> = new Set(['unavailable']);

export interface EventTracingOptions {
  tracer: Tracer;
  /** Whether the sampler may record a span without a parent (`traceSampling` is `roots`). */
  rootsSampled: boolean;
  /** Whether a span under an unsampled parent is never sampled either. */
  unsampledParentsStayUnsampled: boolean;
}

/** The event pipeline's {@link EventTracer} over `options.tracer`. */
export function createEventTracer(options: EventTracingOptions): EventTracer {
  const { tracer, rootsSampled } = options;

  /** Whether a span started in `active` could ever be recorded. */
  const mayRecord = (active: Context): boolean => {
    const parent = trace.getSpanContext(active);
    if (parent === undefined) return rootsSampled;
    return !(options.unsampledParentsStayUnsampled && (parent.traceFlags & TraceFlags.SAMPLED) === 0);
  };

  return {
    startReceipt() {
      const active = context.active();
      if (!mayRecord(active)) return undefined;
      const span = tracer.startSpan(EVENT_SPAN_NAMES.receipt, { kind: SpanKind.INTERNAL }, active);
      const within = trace.setSpan(active, span);
      let ended = false;
      return {
        event(event) {
          span.setAttributes({
            [EVENT_SPAN_ATTRIBUTES.eventId]: event.id,
            [EVENT_SPAN_ATTRIBUTES.eventType]: event.type,
          });
        },
        outcome(outcome) {
          span.setAttribute(EVENT_SPAN_ATTRIBUTES.webhookOutcome, outcome);
          if (FAILED_WEBHOOK_OUTCOMES.has(outcome)) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
          }
        },
        async run(work) {
          try {
            return await context.with(within, work);
          } catch (error) {
            failed(span);
            throw error;
          }
        },
        end() {
          if (ended) return;
          ended = true;
          span.end();
        },
      };
    },

    async publish(event, channel, send) {
      const active = context.active();
      if (!mayRecord(active)) return send(undefined);
      const span = tracer.startSpan(
        EVENT_SPAN_NAMES.publish,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            'messaging.operation.type': 'send',
            'messaging.operation.name': 'publish',
            'messaging.destination.name': channel,
            'messaging.message.id': event.id,
            [EVENT_SPAN_ATTRIBUTES.eventId]: event.id,
            [EVENT_SPAN_ATTRIBUTES.eventType]: event.type,
          },
        },
        active,
      );
      // Only a recorded span is worth linking to: an unsampled one would be a link to nothing.
      const carried = span.isRecording() ? toEventTraceContext(span.spanContext()) : undefined;
      return runEnding(span, trace.setSpan(active, span), () => send(carried));
    },

    deliver(event, published, operationName) {
      // A delivery starts a trace: a sampler that records no root would drop every one.
      if (!rootsSampled) return undefined;
      const link = toLink(published);
      const span = tracer.startSpan(
        EVENT_SPAN_NAMES.delivery,
        {
          kind: SpanKind.CONSUMER,
          root: true,
          ...(link === undefined ? {} : { links: [link] }),
          attributes: {
            'messaging.operation.type': 'process',
            'messaging.operation.name': 'deliver',
            'messaging.message.id': event.id,
            [EVENT_SPAN_ATTRIBUTES.eventId]: event.id,
            [EVENT_SPAN_ATTRIBUTES.eventType]: event.type,
            'graphql.operation.type': 'subscription',
            ...(operationName === undefined ? {} : { 'graphql.operation.name': operationName }),
          },
        },
        ROOT_CONTEXT,
      );
      return deliveryTrace(span);
    },
  };
}

/** Runs `work` in `within`, then ends `span` (as an error when `work` failed). */
async function runEnding<T>(span: Span, within: Context, work: () => Promise<T>): Promise<T> {
  try {
    return await context.with(within, work);
  } catch (error) {
    failed(span);
    throw error;
  } finally {
    span.end();
  }
}

function failed(span: Span): void {
  span.setAttribute('error.type', 'unexpected_error');
  span.setStatus({ code: SpanStatusCode.ERROR, message: 'unexpected_error' });
}

function deliveryTrace(span: Span): DeliveryTrace {
  const within = trace.setSpan(ROOT_CONTEXT, span);
  let ended = false;
  const end = (outcome: DeliveryOutcome): void => {
    if (ended) return;
    ended = true;
    span.setAttribute(EVENT_SPAN_ATTRIBUTES.deliveryOutcome, outcome);
    if (outcome === 'failed') failed(span);
    span.end();
  };
  const run = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await context.with(within, work);
    } catch (error) {
      end('failed');
      throw error;
    }
  };
  return {
    run,
    async finish(work) {
      const result = await run(work);
      end('delivered');
      return result;
    },
    end,
  };
}

/** The W3C trace context of a span, as the bus carries it. */
export function toEventTraceContext(spanContext: SpanContext): EventTraceContext | undefined {
  if (!isSpanContextValid(spanContext)) return undefined;
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, '0');
  const traceparent = `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
  const tracestate = spanContext.traceState?.serialize();
  return tracestate === undefined || tracestate === '' ? { traceparent } : { traceparent, tracestate };
}

/**
 * The link to the publish span a carried trace context names, or undefined when it names none
 * usable (absent, not well formed, all-zero ids). Never throws.
 */
export function toLink(carried: EventTraceContext | undefined): Link | undefined {
  // Checked again here: the hook may be handed a value that did not come through the bus.
  const read = readEventTraceContext(carried);
  if (read === undefined) return undefined;
  const [, traceId = '', spanId = '', flags = '00'] = read.traceparent.split('-');
  const spanContext: SpanContext = {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  if (!isSpanContextValid(spanContext)) return undefined;
  if (read.tracestate !== undefined) {
    try {
      // Deprecated for core's TraceState, which this project does not depend on directly; the API's
      // parser stays until @opentelemetry/api 2 removes it.
      // eslint-disable-next-line @typescript-eslint/no-deprecated
      spanContext.traceState = createTraceState(read.tracestate);
    } catch {
      // A tracestate the API will not parse is left out; the link stands without it.
    }
  }
  return { context: spanContext };
}
