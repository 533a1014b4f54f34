/**
 * The parts of event tracing that need no running facade: which carried trace contexts are read
 * (and which are ignored, whatever another process put in a bus message), and that a sampler that
 * records no root makes the hooks build nothing. The spans themselves: `event-traces.test.ts`.
 */
import { trace, type Tracer } from '@opentelemetry/api';
import { describe, expect, test } from 'vitest';
import { createEventTracer, toEventTraceContext, toLink } from '../../src/observability/event-tracing.ts';
import { readEventTraceContext } from '../../src/observability/trace-context.ts';
import { makeEvent } from '../support/harness/events.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`;

describe('a carried trace context', () => {
  test('a well-formed traceparent is read, with its tracestate when that is well formed too', () => {
    expect(readEventTraceContext({ traceparent: TRACEPARENT })).toEqual({ traceparent: TRACEPARENT });
    expect(readEventTraceContext({ traceparent: TRACEPARENT, tracestate: 'vendor=a1,other=b2' })).toEqual({
      traceparent: TRACEPARENT,
      tracestate: 'vendor=a1,other=b2',
    });
    // A bad tracestate alone is dropped: the traceparent still names the publish span.
    expect(readEventTraceContext({ traceparent: TRACEPARENT, tracestate: 'x'.repeat(513) })).toEqual({
      traceparent: TRACEPARENT,
    });
    expect(readEventTraceContext({ traceparent: TRACEPARENT, tracestate: 'a=\u0000' })).toEqual({
      traceparent: TRACEPARENT,
    });
  });

  test.each([
    ['nothing', undefined],
    ['null', null],
    ['a string', TRACEPARENT],
    ['an array', [TRACEPARENT]],
    ['a number as traceparent', { traceparent: 1 }],
    ['an object as traceparent', { traceparent: { toString: () => TRACEPARENT } }],
    ['upper-case hex', { traceparent: TRACEPARENT.toUpperCase() }],
    ['another version', { traceparent: `01-${TRACE_ID}-${SPAN_ID}-01` }],
    ['a short trace id', { traceparent: `00-${TRACE_ID.slice(1)}-${SPAN_ID}-01` }],
    ['trailing text', { traceparent: `${TRACEPARENT}-extra` }],
    ['a huge value', { traceparent: `${TRACEPARENT}${'0'.repeat(100_000)}` }],
  ])('%s is ignored', (_name, value) => {
    expect(readEventTraceContext(value)).toBeUndefined();
  });

  test('links only to a valid span context: all-zero ids are linked to nothing', () => {
    expect(toLink({ traceparent: `00-${'0'.repeat(32)}-${SPAN_ID}-01` })).toBeUndefined();
    expect(toLink({ traceparent: `00-${TRACE_ID}-${'0'.repeat(16)}-01` })).toBeUndefined();
    expect(toLink({ traceparent: 'garbage' })).toBeUndefined();
    expect(toLink(undefined)).toBeUndefined();
    const link = toLink({ traceparent: TRACEPARENT, tracestate: 'vendor=a1' });
    expect(link?.context).toMatchObject({
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: 1,
      isRemote: true,
    });
    expect(link?.context.traceState?.get('vendor')).toBe('a1');
    // And back: what a publish span's context is carried as.
    expect(toEventTraceContext(link!.context)).toEqual({ traceparent: TRACEPARENT, tracestate: 'vendor=a1' });
  });
});

describe('with a sampler that records no root', () => {
  test('outside a trace, no receipt, publish or delivery span is even started', async () => {
    let started = 0;
    const real = trace.getTracer('test');
    const counting: Tracer = {
      startSpan: (...args) => {
        started += 1;
        return real.startSpan(...args);
      },
      startActiveSpan: real.startActiveSpan.bind(real),
    };
    const tracer = createEventTracer({
      tracer: counting,
      rootsSampled: false,
      unsampledParentsStayUnsampled: true,
    });
    const event = makeEvent();

    expect(tracer.startReceipt()).toBeUndefined();
    const carried: unknown[] = [];
    await tracer.publish(event, 'facade:events:sandbox', async (trace) => {
      carried.push(trace);
    });
    expect(carried).toEqual([undefined]);
    expect(tracer.deliver(event, { traceparent: TRACEPARENT }, 'Watch')).toBeUndefined();
    expect(started).toBe(0);
  });
});
