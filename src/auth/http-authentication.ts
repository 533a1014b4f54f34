/**
 * The door of `/graphql` over HTTP: who is calling, answered before Apollo Server parses anything.
 * A request with a valid token (or an allowed key) goes on with its Caller in `res.locals.caller`;
 * an anonymous one only when its document is anonymous-safe; everything else ends here with 401
 * (or 503 when the issuer's keys cannot be fetched), never reaching the upstream.
 */
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logger.ts';
import { isAnonymousDocument } from './anonymous-documents.ts';
import type { Authenticator } from './authenticate.ts';
import type { Caller } from './caller.ts';

/** Counts a failed authentication; answers how long the address must wait, if it is over its limit. */
export type FailedAuthLimiter = (req: Request) => Promise<{ retryAfterSeconds: number } | undefined>;

export interface HttpAuthenticationOptions {
  authenticator: Authenticator;
  /** Anonymous introspection (`INTROSPECTION=public`). */
  publicIntrospection: boolean;
  /** Serve the landing page to an anonymous browser (it holds no data; Sandbox then asks for a token). */
  landingPage: boolean;
  /** Throttles failed authentications per client address; absent when rate limits are off. */
  failedAuthLimiter?: FailedAuthLimiter;
  logger: Logger;
}

/** What the rest of the request sees in `res.locals`. */
export interface AuthenticatedLocals {
  /** Undefined for an anonymous request that may go on (its document is anonymous-safe). */
  caller: Caller | undefined;
  /** The caller's own platform key, when it authenticated with one. */
  callerApiKey: string | undefined;
}

const UNAUTHENTICATED_MESSAGE =
  'Authentication required: send a valid access token as "Authorization: Bearer <token>".';

/** The express middleware; mount after the JSON body parser and before Apollo. */
export function authenticateHttp(options: HttpAuthenticationOptions): RequestHandler {
  const logger = options.logger.child({ component: 'auth' });
  return async (req, res, next) => {
    try {
      const authentication = await options.authenticator.authenticate({
        authorization: req.get('authorization'),
        apiKey: req.get('x-api-key'),
      });
      switch (authentication.outcome) {
        case 'authenticated':
          res.locals.caller = authentication.caller;
          res.locals.callerApiKey = authentication.apiKey;
          next();
          return;
        case 'anonymous':
          if (
            isLandingPageRequest(req, options.landingPage) ||
            isAnonymousRequest(req, options.publicIntrospection)
          ) {
            res.locals.caller = undefined;
            next();
            return;
          }
          refuse(res, 'invalid_request');
          return;
        case 'unavailable':
          logger.warn('could not check an access token: the issuer keys are unavailable', {
            requestId: res.locals.requestId as string | undefined,
          });
          sendError(
            res,
            503,
            'The access token cannot be checked right now; try again shortly.',
            'UNAVAILABLE',
            {
              'retry-after': '5',
            },
          );
          return;
        case 'invalid': {
          logger.debug('refused an access token', {
            reason: authentication.reason,
            requestId: res.locals.requestId as string | undefined,
          });
          const limited = await options.failedAuthLimiter?.(req);
          if (limited !== undefined) {
            sendError(
              res,
              429,
              `Too many failed authentications; retry after ${limited.retryAfterSeconds} s.`,
              'RATE_LIMITED',
              {
                'retry-after': String(limited.retryAfterSeconds),
              },
            );
            return;
          }
          refuse(res, 'invalid_token');
          return;
        }
      }
    } catch (error) {
      next(error);
    }
  };
}

/** 401 with the RFC 6750 challenge; the same message whatever was wrong, so it helps no forger. */
function refuse(res: Response, error: 'invalid_request' | 'invalid_token'): void {
  const challenge = error === 'invalid_token' ? 'Bearer error="invalid_token"' : 'Bearer';
  sendError(res, 401, UNAUTHENTICATED_MESSAGE, 'UNAUTHENTICATED', { 'www-authenticate': challenge });
}

function sendError(
  res: Response,
  status: number,
  message: string,
  code: string,
  headers: Record<string, string>,
): void {
  res.status(status).set(headers).set('cache-control', 'no-store');
  res.type('application/json').send(JSON.stringify({ errors: [{ message, extensions: { code } }] }));
}

/**
 * A browser opening `/graphql`: Apollo answers it with the landing page, which holds no data. It
 * must name no operation as Apollo reads the URL (a `query`, or an `extensions` naming a persisted
 * query): Apollo runs a GET whose `Accept` does not prefer HTML, so a request let through here as a
 * page would otherwise run its operation without a caller.
 */
function isLandingPageRequest(req: Request, landingPage: boolean): boolean {
  if (!landingPage || req.method !== 'GET' || req.accepts(['text/html']) !== 'text/html') return false;
  const params = searchParamsOf(req);
  return !params.has('query') && !params.has('extensions');
}

function isAnonymousRequest(req: Request, publicIntrospection: boolean): boolean {
  if (req.method === 'GET') {
    // Apollo refuses a repeated `query`; a persisted query's hash beside it must match it.
    const queries = searchParamsOf(req).getAll('query');
    return queries.length === 1 && isAnonymousDocument(queries[0], publicIntrospection);
  }
  const body = req.body as unknown;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  return isAnonymousDocument((body as { query?: unknown }).query, publicIntrospection);
}

/**
 * The URL's parameters read the way Apollo Server reads them (`URLSearchParams`, every key), not
 * through express's `req.query`, whose parser stops after 1000 keys: a `query` placed after 1000
 * others would be invisible here and run by Apollo.
 */
function searchParamsOf(req: Request): URLSearchParams {
  const url = req.url;
  const start = url.indexOf('?');
  return new URLSearchParams(start === -1 ? '' : url.slice(start + 1).split('#', 1)[0]);
}
