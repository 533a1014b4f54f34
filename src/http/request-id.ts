import type { RequestHandler } from 'express';
import { acceptCallerRequestId, newRequestId } from '../upstream/request-id.ts';

/**
 * Gives every request the facade's own id, stores it in `res.locals.requestId` and answers it in
 * the response's `X-Request-Id`, so a caller can quote it and find the same id as `correlationId`
 * in every upstream problem. The caller's own `X-Request-Id`, when of a safe form, is kept apart in
 * `res.locals.callerRequestId` (audit lines carry both; see src/upstream/request-id.ts).
 */
export function assignRequestId(): RequestHandler {
  return (req, res, next) => {
    const requestId = newRequestId();
    res.locals.requestId = requestId;
    res.locals.callerRequestId = acceptCallerRequestId(req.get('x-request-id'));
    res.setHeader('x-request-id', requestId);
    next();
  };
}
