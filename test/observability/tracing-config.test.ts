/**
 * When tracing is on: the standard OTEL_* variables alone decide, and everything else means off
 * (off means nothing of OpenTelemetry is loaded: see traces.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import {
  traceSampling,
  tracingRequested,
  unsampledParentsStayUnsampled,
} from '../../src/observability/tracing-config.ts';

describe('tracingRequested', () => {
  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
    [{ OTEL_SERVICE_NAME: 'facade', OTEL_TRACES_SAMPLER: 'always_on' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true],
    [{ OTEL_TRACES_EXPORTER: 'console' }, true],
    [{ OTEL_TRACES_EXPORTER: 'otlp, console' }, true],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, false],
    [{ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, false],
    [{ OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
  ])('%j: %s', (env, expected) => {
    expect(tracingRequested(env)).toBe(expected);
  });

  it('is what the configuration reports', () => {
    const base = {
      UPSTREAM_BASE_URL: 'http://127.0.0.1:4010',
      UPSTREAM_API_KEY: 'sk_test',
      AUTH_MODE: 'none',
    };
    expect(loadConfig(base).tracing).toEqual({ enabled: false });
    expect(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).toEqual({
      enabled: true,
    });
  });
});

describe('traceSampling: what the sampler can ever record, read as the SDK reads it', () => {
  it.each([
    [{}, 'roots', true],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_on' }, 'roots', true],
    [{ OTEL_TRACES_SAMPLER: 'always_on' }, 'roots', false],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, 'never', true],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, 'caller-sampled', true],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }, 'never', true],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }, 'roots', false],
    [
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' },
      'caller-sampled',
      true,
    ],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }, 'roots', true],
    // The SDK takes a blank, unreadable or out-of-range ratio as 1.
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' }, 'roots', true],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'none' }, 'roots', false],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '-1' }, 'roots', false],
    // An unknown name (the SDK compares names exactly) falls back to the default.
    [{ OTEL_TRACES_SAMPLER: 'ALWAYS_OFF' }, 'roots', true],
    [{ OTEL_TRACES_SAMPLER: ' always_off' }, 'roots', true],
  ])('%j: %s, unsampled parents stay unsampled: %s', (env, sampling, parentsDecide) => {
    expect(traceSampling(env)).toBe(sampling);
    expect(unsampledParentsStayUnsampled(env)).toBe(parentsDecide);
  });
});
