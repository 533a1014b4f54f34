/**
 * Starts OpenTelemetry before the app is imported: `node --import ./src/observability/tracing-entry.ts
 * src/main.ts`, or `npm start`, whose launcher (scripts/start.ts) imports this first when tracing is
 * asked for. It must run before the app's modules load: express and ioredis are ESM imports here and
 * get their spans only through import-in-the-middle's loader hook, registered below before anything
 * imports them. http, undici and graphql are patched without it.
 *
 * With tracing not asked for (see `tracing-config.ts`), this imports and builds nothing.
 *
 * With sampling off, an instrumentation's work on a request that cannot be recorded is pure cost
 * (about half the throughput of a trivial query, measured in bench/README.md), so what is built
 * follows what the sampler can ever record (`traceSampling`):
 * - `never` (`always_off`): only the HTTP instrumentation, and only for a request that carries a
 *   `traceparent`, so the caller's trace id still reaches log lines and the upstream; nothing else
 *   is built.
 * - `caller-sampled` (`parentbased_always_off`): every instrumentation, but a request without a
 *   sampled `traceparent` is ignored by the HTTP instrumentation, which runs it with tracing
 *   suppressed: express, undici, ioredis and the upstream client (`tracing.ts`) then make no span,
 *   graphql only the SDK's shared invalid one.
 * - `roots` (the default, or any ratio above 0): every instrumentation on every request.
 *
 * The SDK is assembled here from its parts (a tracer provider, a batch span processor, the OTLP/HTTP
 * exporters, the resource, the context manager, the W3C propagators), not from
 * `@opentelemetry/sdk-node`, which would also install gRPC, Zipkin, metric and log exporters this
 * facade never uses (docs/architecture.md, "Dependencies"). It reads the standard variables the way
 * that SDK does (`tracing-config.ts`); an exporter or protocol it cannot honour (gRPC, Zipkin)
 * refuses the start with one line on stderr, as a bad setting does.
 *
 * What the spans may carry: no header value (no header capture is configured), no URL with ids
 * (the facade's own upstream spans carry route templates; undici spans are made only for other
 * outgoing requests, such as fetching the issuer's keys), no Redis arguments, no GraphQL values.
 */
import type { IncomingMessage } from 'node:http';
import { UPSTREAM_USER_AGENT } from '../upstream/user-agent.ts';
import {
  batchSettings,
  samplerChoice,
  traceExport,
  traceExportProblem,
  traceSampling,
  tracingRequested,
  TRACING_STARTED,
  type TraceSampling,
} from './tracing-config.ts';

/** The service name spans carry unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names one. */
const DEFAULT_SERVICE_NAME = 'platform-graphql-facade';

/** No header value in a span: the attributes the HTTP instrumentation reads from headers, unset. */
const HEADER_DERIVED_ATTRIBUTES = {
  'user_agent.original': undefined,
  'server.address': undefined,
  'server.port': undefined,
  'client.address': undefined,
};

/** Probes and scrapes that would otherwise make a trace each. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** A W3C `traceparent` (any version) whose flags say sampled. */
const SAMPLED_TRACEPARENT = /^\s*[\da-f]{2}-[\da-f]{32}-[\da-f]{16}-[\da-f]([13579bdf])/i;

if (tracingRequested(process.env)) {
  const problem = traceExportProblem(process.env);
  if (problem !== undefined) {
    process.stderr.write(`${problem}\n`);
    process.exit(1);
  }
  await startTracing(traceSampling(process.env));
}

async function startTracing(sampling: TraceSampling): Promise<void> {
  // Without the others (sampling `never`), no loader hook either: express and ioredis stay as they are.
  if (sampling !== 'never') {
    const { register } = await import('import-in-the-middle/register-hooks.mjs');
    register({ include: ['express', 'ioredis'] });
  }

  const [api, { AsyncLocalStorageContextManager }, core, { TracerProvider }, { HttpInstrumentation }] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/instrumentation-http'),
    ]);
  // The SDK's own warnings (a failed export) on stderr, when OTEL_LOG_LEVEL asks for them.
  const logLevel = process.env.OTEL_LOG_LEVEL?.trim();
  if (logLevel) {
    api.diag.setLogger(new api.DiagConsoleLogger(), { logLevel: core.diagLogLevelFromString(logLevel) });
  }

  /** Whether a request can never be recorded, so the HTTP instrumentation leaves it alone. */
  const ignoredRequest = (request: IncomingMessage): boolean => {
    if (UNTRACED_PATHS.has((request.url ?? '').split('?')[0]!)) return true;
    if (sampling === 'roots') return false;
    const header = request.headers.traceparent;
    const traceparent = Array.isArray(header) ? header[0] : header;
    if (sampling === 'never') return traceparent === undefined;
    return traceparent === undefined || !SAMPLED_TRACEPARENT.test(traceparent);
  };

  // Built, an instrumentation is enabled: it patches its module as that loads.
  const instrumentations = [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: ignoredRequest,
      // Attributes the instrumentation would copy from request headers (User-Agent, Host,
      // X-Forwarded-For): undefined drops them.
      startIncomingSpanHook: () => HEADER_DERIVED_ATTRIBUTES,
      // Nothing here sends requests through node:http; undici's are traced below.
      disableOutgoingRequestInstrumentation: true,
    }),
    // Nothing ever recorded: the others would make non-recording spans and nothing else.
    ...(sampling === 'never' ? [] : await otherInstrumentations(sampling)),
  ];

  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(
    new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }),
  );
  // Traces only: metrics are Prometheus on /metrics and logs are JSON lines.
  const [sampler, spanProcessors, resource] = await Promise.all([
    samplerFromEnvironment(),
    spanProcessorsFromEnvironment(),
    resourceFromEnvironment(),
  ]);
  const provider = new TracerProvider({ resource, sampler, spanProcessors });
  api.trace.setGlobalTracerProvider(provider);
  // What the SDK's `registerInstrumentations` does for traces: each makes its spans with this provider.
  for (const instrumentation of instrumentations) instrumentation.setTracerProvider(provider);
  (globalThis as Record<symbol, unknown>)[TRACING_STARTED] = true;
}

/** The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name (`samplerChoice`). */
async function samplerFromEnvironment() {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } =
    await import('@opentelemetry/sdk-trace');
  const { parentBased, root: decides } = samplerChoice(process.env);
  const root =
    decides === 'always_on'
      ? new AlwaysOnSampler()
      : decides === 'always_off'
        ? new AlwaysOffSampler()
        : new TraceIdRatioBasedSampler(decides);
  return parentBased ? new ParentBasedSampler({ root }) : root;
}

/**
 * One processor per exporter `OTEL_TRACES_EXPORTER` names: OTLP over HTTP in batches
 * (`OTEL_BSP_*`; the exporter reads `OTEL_EXPORTER_OTLP_*` itself: endpoint, headers, timeout,
 * compression), the console span by span.
 */
async function spanProcessorsFromEnvironment() {
  const { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor } =
    await import('@opentelemetry/sdk-trace');
  const { exporters, protocol } = traceExport(process.env);
  return Promise.all(
    exporters.map(async (name) => {
      if (name === 'console') return new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() });
      const { OTLPTraceExporter } = await (protocol === 'http/json'
        ? import('@opentelemetry/exporter-trace-otlp-http')
        : import('@opentelemetry/exporter-trace-otlp-proto'));
      return new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...batchSettings(process.env) });
    }),
  );
}

/**
 * What every span says of the process: the SDK's defaults, this service's name, the host, the OS,
 * the process and an instance id (the detectors the Node SDK runs by default), then
 * `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`, the latter winning.
 */
async function resourceFromEnvironment() {
  const resources = await import('@opentelemetry/resources');
  return resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': DEFAULT_SERVICE_NAME }))
    .merge(
      resources.detectResources({
        detectors: [
          resources.hostDetector,
          resources.osDetector,
          resources.processDetector,
          resources.serviceInstanceIdDetector,
          resources.resourceAttributesEnvDetector,
          resources.serviceNameEnvDetector,
        ],
      }),
    );
}

/** The instrumentations beyond HTTP, for a sampler that can record something. */
async function otherInstrumentations(sampling: TraceSampling) {
  const [
    { ExpressInstrumentation },
    { UndiciInstrumentation },
    { GraphQLInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-graphql'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  return [
    new ExpressInstrumentation(),
    new UndiciInstrumentation({
      // The upstream client makes its own span per call (route template, retries, correlation id)
      // and propagates the trace itself: its requests (known by their User-Agent) are not traced
      // again, so no span carries an upstream URL with ids in it.
      ignoreRequestHook: (request) => fromUpstreamClient(request.headers),
      startSpanHook: () => ({ 'user_agent.original': undefined }),
      // Other outgoing requests outside a request's trace (the issuer's keys) start no trace of
      // their own when the sampler records no root.
      requireParentforSpans: sampling !== 'roots',
    }),
    new GraphQLInstrumentation({
      // One span per parse, validate and execute; none per field (cheap, and the operation span
      // is what a trace reader wants). Argument values never appear (allowValues defaults off).
      ignoreResolveSpans: true,
      allowValues: false,
    }),
    new IORedisInstrumentation({
      // The command name only: arguments hold event payloads and keys.
      dbStatementSerializer: (commandName) => commandName,
    }),
  ];
}

/** Whether undici's request headers (a raw string or a flat name/value list) are the upstream client's. */
function fromUpstreamClient(headers: string | (string | string[])[]): boolean {
  if (typeof headers === 'string') {
    return (
      headers.toLowerCase().includes(`\r\nuser-agent: ${UPSTREAM_USER_AGENT}\r\n`) ||
      headers.toLowerCase().startsWith(`user-agent: ${UPSTREAM_USER_AGENT}\r\n`)
    );
  }
  for (let index = 0; index < headers.length; index += 2) {
    const name = headers[index];
    if (typeof name === 'string' && name.toLowerCase() === 'user-agent') {
      return headers[index + 1] === UPSTREAM_USER_AGENT;
    }
  }
  return false;
}
