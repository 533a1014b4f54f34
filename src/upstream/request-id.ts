/**
 * Request ids. A caller's `X-Request-Id` of a safe form becomes the operation's request id: sent
 * upstream as `X-Request-Id` on each of its calls (the upstream echoes it as `correlationId`),
 * answered in the response and written in its log lines, so a caller's own id (or a gateway's,
 * propagated) ties everything together; any other value is dropped and an id is generated. The
 * facade also gives every operation an id of its own, which no caller chooses: the audit trail
 * records that one as `requestId` and the caller's, when there was one, apart as `callerRequestId`,
 * so a caller can neither choose nor collide with the ids the audit trail keeps.
 */
import { randomUUID } from 'node:crypto';

/**
 * A caller's request id as the facade accepts it: 1 to 64 letters, digits, `.`, `_`, `:` or `-`,
 * starting with a letter or digit (UUIDs, ULIDs, trace ids and the like). Nothing that could split a
 * log line, spoof a field or carry a payload.
 */
const SAFE_CALLER_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** A new id of the facade's own (`req_` and 24 hex digits). */
export function newRequestId(): string {
  // 24 hex digits of a random UUID (90 random bits), drawn from Node's cached entropy: `randomBytes`
  // would call into the CSPRNG once per operation (2 % of a trivial operation's CPU in a profile).
  return `req_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/** The caller's `X-Request-Id` when it has the safe form, else undefined. */
export function acceptCallerRequestId(value: string | undefined): string | undefined {
  return value !== undefined && SAFE_CALLER_REQUEST_ID.test(value) ? value : undefined;
}

/** The request id of one operation: `requestId` when of the safe form, else a new one. */
export function resolveRequestId(requestId: string | undefined): string {
  return acceptCallerRequestId(requestId) ?? newRequestId();
}
