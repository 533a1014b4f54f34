/**
 * CORS for browser applications served from other origins (`CORS_ORIGINS`): an exact allow-list, no
 * credentials (callers send a bearer token in `Authorization`, never a cookie), and nothing at all
 * for requests without `Origin` (servers, curl), which CORS does not concern. See docs/security.md.
 */
import type { RequestHandler } from 'express';

/** Methods the GraphQL endpoint answers. */
export const CORS_ALLOWED_METHODS = ['GET', 'POST', 'OPTIONS'] as const;

/** Request headers a browser client may send: the credential, GraphQL's and Apollo's, tracing. */
export const CORS_ALLOWED_HEADERS = [
  'authorization',
  'content-type',
  'apollo-require-preflight',
  'x-apollo-operation-name',
  'x-request-id',
  'idempotency-key',
  'traceparent',
  // `Cache-Control: no-cache` reads one operation through the upstream response cache.
  'cache-control',
] as const;

/** Response headers a browser client may read beyond the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = ['retry-after', 'x-request-id'] as const;

/**
 * How long a browser may reuse a preflight answer: two hours, the most Chromium honours. Removing an
 * origin from the list still takes effect at once: every actual response is checked again.
 */
export const CORS_MAX_AGE_SECONDS = 7200;

export interface CorsOptions {
  /** Allowed origins, each exactly as a browser sends it (`readEdgeConfig` normalises them). */
  origins: readonly string[];
}

/**
 * Express middleware answering CORS.
 * - No `Origin`: untouched.
 * - An allowed origin: `Access-Control-Allow-Origin` (that origin), `Vary: Origin`, exposed headers;
 *   a preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 here with the
 *   allowed methods, headers and max age.
 * - Any other origin (including `null`): no CORS header, so the browser withholds the response. Its
 *   preflight is answered 403 rather than a header-less 204: the refusal then shows as such in the
 *   browser's network panel and in access logs, instead of as a success that mysteriously fails.
 * `Access-Control-Allow-Credentials` is never sent.
 */
export function cors(options: CorsOptions): RequestHandler {
  const allowed = new Set(options.origins);
  const allowMethods = CORS_ALLOWED_METHODS.join(', ');
  const allowHeaders = CORS_ALLOWED_HEADERS.join(', ');
  const exposeHeaders = CORS_EXPOSED_HEADERS.join(', ');

  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined) {
      next();
      return;
    }
    // Whatever the outcome, the answer depends on Origin: a shared cache must not reuse it for another.
    res.vary('Origin');
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    if (!allowed.has(origin)) {
      if (preflight) {
        res.status(403).json({
          errors: [{ message: 'This origin may not call the API.', extensions: { code: 'FORBIDDEN' } }],
        });
        return;
      }
      next();
      return;
    }
    res.setHeader('Access-Control-Allow-Origin', origin);
    if (preflight) {
      res.setHeader('Access-Control-Allow-Methods', allowMethods);
      res.setHeader('Access-Control-Allow-Headers', allowHeaders);
      res.setHeader('Access-Control-Max-Age', String(CORS_MAX_AGE_SECONDS));
      res.status(204).end();
      return;
    }
    res.setHeader('Access-Control-Expose-Headers', exposeHeaders);
    next();
  };
}
