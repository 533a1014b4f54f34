/**
 * What the HTTP app answers outside GraphQL's own handling: unknown paths, and bodies that could
 * not be read. Always JSON, never a stack trace, never an HTML error page.
 */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '../logger.ts';

/** 404 for any path the app does not serve. */
export function handleNotFound(): RequestHandler {
  return (_req, res) => {
    res.status(404).json({ errors: [{ message: 'Not found.', extensions: { code: 'NOT_FOUND' } }] });
  };
}

/**
 * Last error handler: body-parser failures (malformed JSON, too large) get their 4xx status and a
 * short message in GraphQL's error shape; anything else is a masked 500, logged.
 */
export function handleHttpError(logger: Logger): ErrorRequestHandler {
  return (error: unknown, _req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const status = httpStatusOf(error);
    if (status !== undefined && status >= 400 && status < 500) {
      const message =
        (error as { type?: string }).type === 'entity.parse.failed'
          ? 'The request body is not valid JSON.'
          : (error as { type?: string }).type === 'entity.too.large'
            ? 'The request body is too large.'
            : 'The request could not be read.';
      res.status(status).json({ errors: [{ message, extensions: { code: 'BAD_REQUEST' } }] });
      return;
    }
    logger.error('unhandled HTTP error', { error, requestId: res.locals.requestId });
    res
      .status(500)
      .json({ errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
  };
}

function httpStatusOf(error: unknown): number | undefined {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' ? status : undefined;
}
