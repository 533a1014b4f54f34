/**
 * How the trace exporter, sampler and batch variables are read (`tracing-config.ts`), as the
 * OpenTelemetry SDK reads them; what the facade cannot honour is named before anything starts.
 */
import { describe, expect, it } from 'vitest';
import {
  batchSettings,
  samplerChoice,
  traceExport,
  traceExportProblem,
} from '../../src/observability/tracing-config.ts';

describe('traceExport: where spans go once tracing is on', () => {
  it.each([
    [{}, { exporters: ['otlp'], protocol: 'http/protobuf' }],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: ' ' }, { exporters: ['otlp'], protocol: 'http/protobuf' }],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, { exporters: ['otlp'], protocol: 'http/json' }],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' },
      { exporters: ['otlp'], protocol: 'http/protobuf' },
    ],
    [{ OTEL_TRACES_EXPORTER: 'console' }, { exporters: ['console'], protocol: 'http/protobuf' }],
    [
      { OTEL_TRACES_EXPORTER: ' OTLP , console,otlp' },
      { exporters: ['otlp', 'console'], protocol: 'http/protobuf' },
    ],
  ])('%j: %j', (env, expected) => {
    expect(traceExportProblem(env)).toBeUndefined();
    expect(traceExport(env)).toEqual(expected);
  });

  it.each([
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /^OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json.*got "grpc"\.$/,
    ],
    [
      { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http' },
      /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be .*got "http"\.$/,
    ],
    [
      { OTEL_TRACES_EXPORTER: 'zipkin' },
      /^OTEL_TRACES_EXPORTER may name otlp, console or none; got "zipkin"\.$/,
    ],
    [{ OTEL_TRACES_EXPORTER: 'jaeger,otlp,zipkin' }, /got "jaeger,zipkin"\.$/],
  ])('%j is refused', (env, message) => {
    expect(traceExportProblem(env)).toMatch(message);
  });
});

describe('samplerChoice: the sampler the SDK is given', () => {
  it.each([
    [{}, { parentBased: true, root: 'always_on' }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_on' }, { parentBased: true, root: 'always_on' }],
    [{ OTEL_TRACES_SAMPLER: 'always_on' }, { parentBased: false, root: 'always_on' }],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, { parentBased: false, root: 'always_off' }],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, { parentBased: true, root: 'always_off' }],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' },
      { parentBased: false, root: 0.25 },
    ],
    [
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' },
      { parentBased: true, root: 0 },
    ],
    [
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      { parentBased: true, root: 1 },
    ],
    [{ OTEL_TRACES_SAMPLER: 'Always_Off' }, { parentBased: true, root: 'always_on' }],
  ])('%j: %j', (env, expected) => {
    expect(samplerChoice(env)).toEqual(expected);
  });
});

describe('batchSettings: OTEL_BSP_*', () => {
  it('takes numbers above 0 and leaves the rest to the SDK’s defaults', () => {
    expect(
      batchSettings({
        OTEL_BSP_MAX_QUEUE_SIZE: '4096',
        OTEL_BSP_SCHEDULE_DELAY: ' 1000 ',
        OTEL_BSP_EXPORT_TIMEOUT: '0',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 'many',
      }),
    ).toEqual({
      maxQueueSize: 4096,
      scheduledDelayMillis: 1000,
      exportTimeoutMillis: undefined,
      maxExportBatchSize: undefined,
    });
    expect(batchSettings({})).toEqual({
      maxQueueSize: undefined,
      scheduledDelayMillis: undefined,
      exportTimeoutMillis: undefined,
      maxExportBatchSize: undefined,
    });
  });
});
