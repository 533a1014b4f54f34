/**
 * Whether tracing is asked for, read from the standard OpenTelemetry variables alone. It imports
 * nothing, so `scripts/start.ts` and `src/config.ts` can ask it without loading any of
 * OpenTelemetry: with tracing off, not one OpenTelemetry module is imported or constructed (the
 * instrumentations patch modules as soon as they are built, and that alone costs throughput).
 */

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
 * What the configured sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`, read the way the SDK
 * reads them) can ever record:
 * - `never`: nothing, whatever the caller sends (`always_off`, `traceidratio` with ratio 0);
 * - `caller-sampled`: no trace of its own, only a caller's whose `traceparent` says sampled
 *   (`parentbased_always_off`, `parentbased_traceidratio` with ratio 0);
 * - `roots`: traces of its own too (the default `parentbased_always_on`, any other ratio, any name
 *   the SDK does not know, since it then falls back to its default).
 * Tracing's instrumentations do nothing but cost for a request that cannot be recorded: with
 * `never` they are not built, with `caller-sampled` they stand aside for requests without a sampled
 * `traceparent` (see `tracing-entry.ts`).
 */
export type TraceSampling = 'never' | 'caller-sampled' | 'roots';

export function traceSampling(env: Env): TraceSampling {
  const sampler = samplerName(env);
  switch (sampler) {
    case 'always_off':
      return 'never';
    case 'parentbased_always_off':
      return 'caller-sampled';
    case 'traceidratio':
      return samplerRatio(env) === 0 ? 'never' : 'roots';
    case 'parentbased_traceidratio':
      return samplerRatio(env) === 0 ? 'caller-sampled' : 'roots';
    default:
      return 'roots';
  }
}

/**
 * True when a span whose parent is not sampled is never sampled either: so do every
 * `parentbased_*` sampler, the default and any name the SDK falls back to the default for, and a
 * sampler that samples nothing; `always_on` and a non-zero `traceidratio` decide afresh per span.
 */
export function unsampledParentsStayUnsampled(env: Env): boolean {
  const sampler = samplerName(env);
  return traceSampling(env) === 'never' || (sampler !== 'always_on' && sampler !== 'traceidratio');
}

/** `OTEL_TRACES_SAMPLER` as the SDK takes it: blank is unset, and otherwise compared untrimmed. */
function samplerName(env: Env): string | undefined {
  const raw = env.OTEL_TRACES_SAMPLER;
  return raw === undefined || raw.trim() === '' ? undefined : raw;
}

/** `OTEL_TRACES_SAMPLER_ARG` as the SDK takes it: 1 when blank, not a number or outside [0, 1]. */
function samplerRatio(env: Env): number {
  const raw = value(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = raw === undefined ? Number.NaN : Number(raw);
  return Number.isNaN(ratio) || ratio < 0 || ratio > 1 ? 1 : ratio;
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
