/**
 * Request ids. Every operation gets the facade's own id, generated here: it is sent upstream as
 * `X-Request-Id` on each of its calls (the upstream echoes it as `correlationId`), answered in the
 * response's `X-Request-Id`, and written in the operation's log line and audit lines. A caller's own
 * `X-Request-Id` never takes its place: when it has a safe form it is kept beside it, as
 * `callerRequestId`, so a caller can neither choose nor collide with the ids the facade records.
 */
import { randomUUID } from 'node:crypto';

/**
 * A caller's request id as the facade keeps it: 1 to 64 letters, digits, `.`, `_`, `:` or `-`,
 * starting with a letter or digit (UUIDs, ULIDs, trace ids and the like). Nothing that could split a
 * log line, spoof a field or carry a payload.
 */
const SAFE_CALLER_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The facade's own ids (`req_` and 24 hex digits). */
const FACADE_REQUEST_ID = /^req_[0-9a-f]{24}$/;

/** A new facade request id. */
export function newRequestId(): string {
  // 24 hex digits of a random UUID (90 random bits), drawn from Node's cached entropy: `randomBytes`
  // would call into the CSPRNG once per operation (2 % of a trivial operation's CPU in a profile).
  return `req_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/** The caller's `X-Request-Id` when it has the safe form, else undefined (it is then not kept). */
export function acceptCallerRequestId(value: string | undefined): string | undefined {
  return value !== undefined && SAFE_CALLER_REQUEST_ID.test(value) ? value : undefined;
}

/** `requestId` when it is one of the facade's own ids, else a new one. */
export function resolveRequestId(requestId: string | undefined): string {
  return requestId !== undefined && FACADE_REQUEST_ID.test(requestId) ? requestId : newRequestId();
}
