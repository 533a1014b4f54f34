import { randomBytes } from 'node:crypto';

/** 1 to 200 visible ASCII characters: what the upstream accepts and echoes as `X-Request-Id`. */
const ACCEPTABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * The request id of one GraphQL operation: the caller's `X-Request-Id` when it is acceptable, so
 * every upstream `correlationId` ties back to the caller's own id, else a fresh `req_` id.
 */
export function resolveRequestId(callerRequestId: string | undefined): string {
  if (callerRequestId !== undefined && ACCEPTABLE_REQUEST_ID.test(callerRequestId)) return callerRequestId;
  return `req_${randomBytes(12).toString('hex')}`;
}
