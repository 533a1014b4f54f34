/**
 * Whether tracing is asked for, read from the standard OpenTelemetry variables alone. It imports
 * nothing, so `scripts/start.ts` and `src/config.ts` can ask it without loading any of
 * OpenTelemetry: with tracing off, not one OpenTelemetry module is imported or constructed (the
 * instrumentations patch modules as soon as they are built, and that alone costs throughput).
 */

/** The variables this reads; any other OTEL_* variable only tunes tracing once it is on. */
export const TRACING_VARIABLES = [
  'OTEL_SDK_DISABLED',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_TRACES_EXPORTER',
] as const;

type Env = Readonly<Record<string, string | undefined>>;

/**
 * True when traces should be exported: an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), or `OTEL_TRACES_EXPORTER` names an exporter (`otlp`,
 * `console`); never when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingRequested(env: Env): boolean {
  if (value(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return false;
  const exporters = value(env.OTEL_TRACES_EXPORTER)
    ?.split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (exporters !== undefined && exporters.length > 0) {
    return !exporters.includes('none');
  }
  return (
    value(env.OTEL_EXPORTER_OTLP_ENDPOINT) !== undefined ||
    value(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) !== undefined
  );
}

/**
 * Set by `tracing-entry.ts` once the SDK has started, so the app can tell "asked for and running"
 * from "asked for but started without the entry" (then it warns).
 */
export const TRACING_STARTED = Symbol.for('platform-graphql-facade.tracing-started');

/** True when `tracing-entry.ts` started the SDK in this process. */
export function tracingStarted(): boolean {
  return (globalThis as Record<symbol, unknown>)[TRACING_STARTED] === true;
}

function value(raw: string | undefined): string | undefined {
  const trimmed = raw?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}
