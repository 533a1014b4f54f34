/**
 * The request id every upstream call of one operation carries (`X-Request-Id`), so the upstream's
 * `correlationId` ties its logs to the caller's request.
 */
import { randomUUID } from 'node:crypto';

/** 1 to 200 visible ASCII characters: what the upstream accepts and echoes as `X-Request-Id`. */
const ACCEPTABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * The request id of one GraphQL operation: the caller's `X-Request-Id` when it is acceptable, so
 * every upstream `correlationId` ties back to the caller's own id, else a fresh `req_` id.
 */
export function resolveRequestId(callerRequestId: string | undefined): string {
  if (callerRequestId !== undefined && ACCEPTABLE_REQUEST_ID.test(callerRequestId)) return callerRequestId;
  // 24 hex digits of a random UUID (90 random bits), drawn from Node's cached entropy: `randomBytes`
  // would call into the CSPRNG once per operation (2 % of a trivial operation's CPU in a profile).
  return `req_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}
