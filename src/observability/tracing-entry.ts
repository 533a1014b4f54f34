/**
 * Starts OpenTelemetry before the app is imported: `node --import ./src/observability/tracing-entry.ts
 * src/main.ts`, or `npm start`, whose launcher (scripts/start.ts) imports this first when tracing is
 * asked for. It must run before the app's modules load: express and ioredis are ESM imports here and
 * get their spans only through import-in-the-middle's loader hook, registered below before anything
 * imports them. http, undici and graphql are patched without it.
 *
 * With tracing not asked for (see `tracing-config.ts`), this imports and builds nothing.
 *
 * What the spans may carry: no header value (no header capture is configured), no URL with ids
 * (the facade's own upstream spans carry route templates; undici spans are made only for other
 * outgoing requests, such as fetching the issuer's keys), no Redis arguments, no GraphQL values.
 */
import { UPSTREAM_USER_AGENT } from '../upstream/user-agent.ts';
import { tracingRequested, TRACING_STARTED } from './tracing-config.ts';

/** No header value in a span: the attributes the HTTP instrumentation reads from headers, unset. */
const HEADER_DERIVED_ATTRIBUTES = {
  'user_agent.original': undefined,
  'server.address': undefined,
  'server.port': undefined,
  'client.address': undefined,
};

/** Probes and scrapes that would otherwise make a trace each. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

if (tracingRequested(process.env)) await startTracing();

async function startTracing(): Promise<void> {
  const { register } = await import('import-in-the-middle/register-hooks.mjs');
  register({ include: ['express', 'ioredis'] });

  const [
    { NodeSDK },
    { HttpInstrumentation },
    { ExpressInstrumentation },
    { UndiciInstrumentation },
    { GraphQLInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-graphql'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);

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
        ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has((request.url ?? '').split('?')[0]!),
        // Attributes the instrumentation would copy from request headers (User-Agent, Host,
        // X-Forwarded-For): undefined drops them.
        startIncomingSpanHook: () => HEADER_DERIVED_ATTRIBUTES,
        // Nothing here sends requests through node:http; undici's are traced below.
        disableOutgoingRequestInstrumentation: true,
      }),
      new ExpressInstrumentation(),
      new UndiciInstrumentation({
        // The upstream client makes its own span per call (route template, retries, correlation id)
        // and propagates the trace itself: its requests (known by their User-Agent) are not traced
        // again, so no span carries an upstream URL with ids in it.
        ignoreRequestHook: (request) => fromUpstreamClient(request.headers),
        startSpanHook: () => ({ 'user_agent.original': undefined }),
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
    ],
  });
  sdk.start();
  (globalThis as Record<symbol, unknown>)[TRACING_STARTED] = true;
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
