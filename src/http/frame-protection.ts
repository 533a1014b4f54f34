/**
 * No page of the facade may be framed by another site: the Sandbox page served on `/graphql` runs
 * operations with whatever headers its user set, so a hostile page framing it could trick a click.
 * `frame-ancestors 'none'` is the standard answer; `X-Frame-Options: DENY` covers older browsers.
 * Set on every answer, JSON included, where it costs two headers and changes nothing else.
 */
import type { RequestHandler } from 'express';

export function frameProtection(): RequestHandler {
  return (_req, res, next) => {
    res.setHeader('Content-Security-Policy', "frame-ancestors 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    next();
  };
}
