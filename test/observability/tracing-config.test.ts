/**
 * When tracing is on: the standard OTEL_* variables alone decide, and everything else means off
 * (off means nothing of OpenTelemetry is loaded: see traces.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { tracingRequested } from '../../src/observability/tracing-config.ts';

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
