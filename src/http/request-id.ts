import type { RequestHandler } from 'express';
import { resolveRequestId } from '../upstream/request-id.ts';

/**
 * Gives every request its id (the caller's `X-Request-Id` when acceptable, else a new one), stores
 * it in `res.locals.requestId` and echoes it in the response header, so a caller can quote it and
 * find the same id as `correlationId` in every upstream problem.
 */
export function assignRequestId(): RequestHandler {
  return (req, res, next) => {
    const requestId = resolveRequestId(req.get('x-request-id'));
    res.locals.requestId = requestId;
    res.setHeader('x-request-id', requestId);
    next();
  };
}
