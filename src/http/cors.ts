/**
 * CORS for browser applications served from other origins (`CORS_ORIGINS`): an exact allow-list, no
 * credentials (callers send a bearer token in `Authorization`, never a cookie), and nothing at all
 * for requests without `Origin` (servers, curl), which CORS does not concern. The headers of an
 * allowed origin's answers are written by the `cors` package; this module decides who is allowed
 * and how a refusal looks. See docs/security.md.
 */
import corsPackage from 'cors';
import type { RequestHandler } from 'express';

/** Methods the GraphQL endpoint answers. */
const CORS_ALLOWED_METHODS = ['GET', 'POST', 'OPTIONS'] as const;

/**
 * Request headers a browser client may send, whatever `CORS_ALLOWED_HEADERS` adds: the credential,
 * GraphQL over HTTP's, Apollo Client's (CSRF prevention, and client awareness whenever a client sets
 * `name`/`version`), the request id, and W3C trace context and baggage (browser OpenTelemetry).
 * urql, Relay and graphql-request send no more than `content-type` and `accept` (safelisted);
 * graphql-ws is a WebSocket, which CORS does not cover (see src/edge/origin.ts).
 */
const CORS_DEFAULT_ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'accept',
  'apollo-require-preflight',
  'x-apollo-operation-name',
  'apollographql-client-name',
  'apollographql-client-version',
  'x-request-id',
  'traceparent',
  'tracestate',
  'baggage',
  // `Cache-Control: no-cache` reads one operation through the upstream response cache.
  'cache-control',
  // `X-GraphQL-Cost: true` asks for `extensions.cost` on the answer (src/edge/http.ts).
  'x-graphql-cost',
] as const;

/**
 * Response headers a browser client may read beyond the CORS-safelisted ones; the RateLimit fields
 * let it slow down before it is refused (src/edge/client-budgets.ts).
 */
const CORS_EXPOSED_HEADERS = ['retry-after', 'x-request-id', 'ratelimit', 'ratelimit-policy'] as const;

/**
 * How long a browser may reuse a preflight answer: two hours, the most Chromium honours. Removing an
 * origin from the list still takes effect at once: every actual response is checked again.
 */
export const CORS_MAX_AGE_SECONDS = 7200;

export interface CorsOptions {
  /** Allowed origins, each exactly as a browser sends it (`readEdgeConfig` normalises them). */
  origins: readonly string[];
  /**
   * Request headers allowed beyond {@link CORS_DEFAULT_ALLOWED_HEADERS} (`CORS_ALLOWED_HEADERS`),
   * lower case; a repeated one is listed once.
   */
  extraAllowedHeaders?: readonly string[];
  /** Response headers a browser may read beyond the defaults (MCP's `mcp-session-id`). */
  extraExposedHeaders?: readonly string[];
  /** Methods besides GET, POST and OPTIONS (MCP's DELETE, which ends a session). */
  extraMethods?: readonly string[];
}

/** The `Access-Control-Allow-Headers` list: the defaults, then the configured extras. */
function corsAllowedHeaders(extra: readonly string[] = []): string[] {
  return [...new Set<string>([...CORS_DEFAULT_ALLOWED_HEADERS, ...extra])];
}

/**
 * Express middleware answering CORS.
 * - No `Origin`: untouched.
 * - An allowed origin: `Access-Control-Allow-Origin` (that origin), `Vary: Origin`, exposed headers;
 *   an `OPTIONS` request is a preflight, answered 204 here with the allowed methods, headers and max
 *   age.
 * - Any other origin (including `null`): no CORS header, so the browser withholds the response. Its
 *   preflight is answered 403 rather than a header-less 204: the refusal then shows as such in the
 *   browser's network panel and in access logs, instead of as a success that mysteriously fails.
 * `Access-Control-Allow-Credentials` is never sent.
 */
export function cors(options: CorsOptions): RequestHandler {
  const allowed = new Set(options.origins);
  const answerAllowed = corsPackage({
    // Reached only for an allowed origin: reflect it (never `*`, never a list).
    origin: (origin, callback) => {
      callback(null, origin);
    },
    methods: [...CORS_ALLOWED_METHODS, ...(options.extraMethods ?? [])].join(', '),
    allowedHeaders: corsAllowedHeaders(options.extraAllowedHeaders).join(', '),
    exposedHeaders: [...CORS_EXPOSED_HEADERS, ...(options.extraExposedHeaders ?? [])].join(', '),
    maxAge: CORS_MAX_AGE_SECONDS,
    credentials: false,
    preflightContinue: false,
    optionsSuccessStatus: 204,
  });

  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined) {
      next();
      return;
    }
    if (allowed.has(origin)) {
      answerAllowed(req, res, next);
      return;
    }
    // Whatever the outcome, the answer depends on Origin: a shared cache must not reuse it for another.
    res.vary('Origin');
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (preflight) {
      res.status(403).json({
        errors: [{ message: 'This origin may not call the API.', extensions: { code: 'FORBIDDEN' } }],
      });
      return;
    }
    next();
  };
}
