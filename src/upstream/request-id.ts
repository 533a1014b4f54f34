import { randomFillSync } from 'node:crypto';

/** 1 to 200 visible ASCII characters: what the upstream accepts and echoes as `X-Request-Id`. */
const ACCEPTABLE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** Random bytes in one generated id. */
const ID_BYTES = 12;

/**
 * Ids are cut from one buffer of random bytes refilled every 256 ids: one call into the CSPRNG per
 * 256 operations instead of one (and one buffer) per operation. Every byte is used once.
 */
const entropy = Buffer.alloc(ID_BYTES * 256);
let entropyOffset = entropy.length;

/**
 * The request id of one GraphQL operation: the caller's `X-Request-Id` when it is acceptable, so
 * every upstream `correlationId` ties back to the caller's own id, else a fresh `req_` id.
 */
export function resolveRequestId(callerRequestId: string | undefined): string {
  if (callerRequestId !== undefined && ACCEPTABLE_REQUEST_ID.test(callerRequestId)) return callerRequestId;
  return `req_${nextRandomHex()}`;
}

function nextRandomHex(): string {
  if (entropyOffset === entropy.length) {
    randomFillSync(entropy);
    entropyOffset = 0;
  }
  const start = entropyOffset;
  entropyOffset += ID_BYTES;
  return entropy.toString('hex', start, entropyOffset);
}
