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
 * What the spans may carry: no header value (no header capture is configured), no URL with ids
 * (the facade's own upstream spans carry route templates; undici spans are made only for other
 * outgoing requests, such as fetching the issuer's keys), no Redis arguments, no GraphQL values.
 */
import type { IncomingMessage } from 'node:http';
import { UPSTREAM_USER_AGENT } from '../upstream/user-agent.ts';
import { traceSampling, tracingRequested, TRACING_STARTED, type TraceSampling } from './tracing-config.ts';

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

if (tracingRequested(process.env)) await startTracing(traceSampling(process.env));

async function startTracing(sampling: TraceSampling): Promise<void> {
  // Without the others (sampling `never`), no loader hook either: express and ioredis stay as they are.
  if (sampling !== 'never') {
    const { register } = await import('import-in-the-middle/register-hooks.mjs');
    register({ include: ['express', 'ioredis'] });
  }

  const [{ NodeSDK }, { HttpInstrumentation }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
  ]);

  /** Whether a request can never be recorded, so the HTTP instrumentation leaves it alone. */
  const ignoredRequest = (request: IncomingMessage): boolean => {
    if (UNTRACED_PATHS.has((request.url ?? '').split('?')[0]!)) return true;
    if (sampling === 'roots') return false;
    const header = request.headers.traceparent;
    const traceparent = Array.isArray(header) ? header[0] : header;
    if (sampling === 'never') return traceparent === undefined;
    return traceparent === undefined || !SAMPLED_TRACEPARENT.test(traceparent);
  };

  const sdk = new NodeSDK({
    // OTEL_SERVICE_NAME, when set, names the service; this is only the default.
    ...(process.env.OTEL_SERVICE_NAME?.trim() ? {} : { serviceName: 'platform-graphql-facade' }),
    // Traces only: metrics are Prometheus on /metrics and logs are JSON lines. Without these the SDK
    // builds OTLP metric and log exporters from the environment (and a metric exporter's shutdown
    // hangs for seconds).
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
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
    ],
  });
  sdk.start();
  (globalThis as Record<symbol, unknown>)[TRACING_STARTED] = true;
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
