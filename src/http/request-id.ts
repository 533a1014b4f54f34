import type { RequestHandler } from 'express';
import { acceptCallerRequestId, newRequestId } from '../upstream/request-id.ts';

/**
 * Gives every request its id (the caller's `X-Request-Id` when of a safe form, else a new one),
 * stores it in `res.locals.requestId` and echoes it in the response header, so a caller can quote it
 * and find the same id as `correlationId` in every upstream problem. The facade's own id
 * (`res.locals.facadeRequestId`) and the caller's (`res.locals.callerRequestId`) are kept for the
 * audit trail, apart (see src/upstream/request-id.ts).
 */
export function assignRequestId(): RequestHandler {
  return (req, res, next) => {
    const callerRequestId = acceptCallerRequestId(req.get('x-request-id'));
    const facadeRequestId = newRequestId();
    const requestId = callerRequestId ?? facadeRequestId;
    res.locals.requestId = requestId;
    res.locals.facadeRequestId = facadeRequestId;
    res.locals.callerRequestId = callerRequestId;
    res.setHeader('x-request-id', requestId);
    next();
  };
}
