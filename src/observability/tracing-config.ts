/**
 * What the standard OpenTelemetry variables ask for, read without OpenTelemetry: whether tracing is
 * on, which sampler, where spans go. It imports nothing, so `scripts/start.ts` and `src/config.ts`
 * can ask it without loading any of OpenTelemetry: with tracing off, not one OpenTelemetry module is
 * imported or constructed (the instrumentations patch modules as soon as they are built, and that
 * alone costs throughput). `tracing-entry.ts` builds the SDK from these readings.
 */

type Env = Readonly<Record<string, string | undefined>>;

/**
 * True when traces should be exported: an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), or `OTEL_TRACES_EXPORTER` names an exporter (`otlp`,
 * `console`); never when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingRequested(env: Env): boolean {
  if (value(env.OTEL_SDK_DISABLED)?.toLowerCase() === 'true') return false;
  const exporters = exporterNames(env);
  if (exporters !== undefined) return !exporters.includes('none');
  return (
    value(env.OTEL_EXPORTER_OTLP_ENDPOINT) !== undefined ||
    value(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) !== undefined
  );
}

/** The exporters a process with tracing on sends spans to: `OTEL_TRACES_EXPORTER`, `otlp` if unset. */
export type TraceExporterName = 'otlp' | 'console';

/** How OTLP spans travel: OTLP over HTTP, as protobuf (the standard default) or JSON. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

const TRACE_EXPORTERS: readonly string[] = ['otlp', 'console'] satisfies TraceExporterName[];
const OTLP_PROTOCOLS: readonly string[] = ['http/protobuf', 'http/json'] satisfies OtlpProtocol[];

/** Where spans go once tracing is on (see {@link traceExportProblem} for names it cannot honour). */
export interface TraceExport {
  readonly exporters: readonly TraceExporterName[];
  /** `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`. */
  readonly protocol: OtlpProtocol;
}

/**
 * What the trace exporter variables ask for that this facade cannot do, as the line that refuses
 * the start, or undefined. Traces leave by OTLP over HTTP or to the console only: no gRPC exporter
 * and no Zipkin one is installed (docs/architecture.md, "Dependencies"), and a collector's gRPC port
 * would silently receive nothing, so a process asked for one refuses to start instead.
 */
export function traceExportProblem(env: Env): string | undefined {
  const unknown = (exporterNames(env) ?? []).filter((name) => !TRACE_EXPORTERS.includes(name));
  if (unknown.length > 0) {
    return `OTEL_TRACES_EXPORTER may name otlp, console or none; got ${JSON.stringify(unknown.join(','))}.`;
  }
  const [name, protocol] = protocolSetting(env);
  if (protocol !== undefined && !OTLP_PROTOCOLS.includes(protocol)) {
    return (
      `${name} must be http/protobuf or http/json: traces are exported by OTLP over HTTP ` +
      `(a collector's port 4318, not its gRPC port 4317); got ${JSON.stringify(protocol)}.`
    );
  }
  return undefined;
}

/** Where spans go; call it once {@link traceExportProblem} found nothing to refuse. */
export function traceExport(env: Env): TraceExport {
  const names = exporterNames(env) ?? ['otlp'];
  return {
    exporters: names.filter((name): name is TraceExporterName => TRACE_EXPORTERS.includes(name)),
    protocol: (protocolSetting(env)[1] as OtlpProtocol | undefined) ?? 'http/protobuf',
  };
}

/** `OTEL_TRACES_EXPORTER`'s names, trimmed, lower-cased, each once; undefined when it names none. */
function exporterNames(env: Env): string[] | undefined {
  const names = value(env.OTEL_TRACES_EXPORTER)
    ?.split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  return names === undefined || names.length === 0 ? undefined : [...new Set(names)];
}

/** The OTLP protocol variable that decides (the traces one first) and its value, if either is set. */
function protocolSetting(env: Env): [name: string, protocol: string | undefined] {
  const traces = value(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL);
  if (traces !== undefined) return ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', traces];
  return ['OTEL_EXPORTER_OTLP_PROTOCOL', value(env.OTEL_EXPORTER_OTLP_PROTOCOL)];
}

/**
 * The batch span processor's settings from `OTEL_BSP_*` (the SDK's defaults where a variable is
 * unset, or not a number above 0).
 */
export function batchSettings(env: Env): {
  maxQueueSize?: number;
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
  maxExportBatchSize?: number;
} {
  return {
    maxQueueSize: positiveNumber(env.OTEL_BSP_MAX_QUEUE_SIZE),
    scheduledDelayMillis: positiveNumber(env.OTEL_BSP_SCHEDULE_DELAY),
    exportTimeoutMillis: positiveNumber(env.OTEL_BSP_EXPORT_TIMEOUT),
    maxExportBatchSize: positiveNumber(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE),
  };
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
  const { parentBased, root } = samplerChoice(env);
  if (root !== 'always_off' && root !== 0) return 'roots';
  return parentBased ? 'caller-sampled' : 'never';
}

/**
 * True when a span whose parent is not sampled is never sampled either: so do every
 * `parentbased_*` sampler, the default and any name the SDK falls back to the default for, and a
 * sampler that samples nothing; `always_on` and a non-zero `traceidratio` decide afresh per span.
 */
export function unsampledParentsStayUnsampled(env: Env): boolean {
  return traceSampling(env) === 'never' || samplerChoice(env).parentBased;
}

/**
 * The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, read as the OpenTelemetry
 * SDK reads them: whether a parent's decision is followed, and what decides a root (always, never,
 * or a ratio of trace ids). Unset, blank or a name it does not know (names are compared exactly,
 * untrimmed): the default, `parentbased_always_on`.
 */
export interface SamplerChoice {
  readonly parentBased: boolean;
  readonly root: 'always_on' | 'always_off' | number;
}

export function samplerChoice(env: Env): SamplerChoice {
  const raw = env.OTEL_TRACES_SAMPLER;
  switch (raw === undefined || raw.trim() === '' ? undefined : raw) {
    case 'always_on':
      return { parentBased: false, root: 'always_on' };
    case 'always_off':
      return { parentBased: false, root: 'always_off' };
    case 'parentbased_always_off':
      return { parentBased: true, root: 'always_off' };
    case 'traceidratio':
      return { parentBased: false, root: samplerRatio(env) };
    case 'parentbased_traceidratio':
      return { parentBased: true, root: samplerRatio(env) };
    default:
      return { parentBased: true, root: 'always_on' };
  }
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

/** A number above 0, or undefined (unset, blank, not a number, 0 or less). */
function positiveNumber(raw: string | undefined): number | undefined {
  const number = Number(value(raw) ?? Number.NaN);
  return number > 0 ? number : undefined;
}
