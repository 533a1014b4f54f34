/**
 * The upstream's webhook payload as the facade carries it from the webhook route, through the
 * event log, to the subscription resolvers ("Events and webhooks" in `docs/upstream-assumptions.md`).
 */

import { isRfc3339DateTime } from '../../rfc3339.ts';
import type { PlatformEvent } from '../event-types.ts';

/** The result of {@link parsePlatformEvent}. */
export type PlatformEventParse = { ok: true; event: PlatformEvent } | { ok: false; message: string };

/**
 * Parses a webhook body into a {@link PlatformEvent}. Never throws: malformed JSON or an envelope
 * without the documented members gives `{ ok: false }` with a message naming the first problem.
 */
export function parsePlatformEvent(rawBody: Buffer | string): PlatformEventParse {
  let value: unknown;
  try {
    value = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
  } catch {
    return { ok: false, message: 'the body is not valid JSON' };
  }
  return toPlatformEvent(value);
}

/**
 * Checks that `value` has the envelope's shape and returns it typed. Used on arrival and again on
 * values read back from Redis, which another process wrote.
 */
export function toPlatformEvent(value: unknown): PlatformEventParse {
  if (!isRecord(value)) return invalid('the body must be a JSON object');
  const { id, type, occurredAt, environment, data } = value;
  if (!isNonEmptyString(id)) return invalid('"id" must be a non-empty string');
  if (!isNonEmptyString(type)) return invalid('"type" must be a non-empty string');
  if (typeof occurredAt !== 'string' || !isRfc3339DateTime(occurredAt)) {
    return invalid('"occurredAt" must be an RFC 3339 timestamp');
  }
  if (environment !== 'sandbox' && environment !== 'live') {
    return invalid('"environment" must be "sandbox" or "live"');
  }
  if (!isRecord(data)) return invalid('"data" must be an object');
  const { customerId, resourceType, resourceId, object } = data;
  if (customerId !== null && !isNonEmptyString(customerId)) {
    return invalid('"data.customerId" must be a non-empty string or null');
  }
  if (!isNonEmptyString(resourceType)) return invalid('"data.resourceType" must be a non-empty string');
  if (!isNonEmptyString(resourceId)) return invalid('"data.resourceId" must be a non-empty string');
  if (!('object' in data)) return invalid('"data.object" is required');
  return {
    ok: true,
    event: { id, type, occurredAt, environment, data: { customerId, resourceType, resourceId, object } },
  };
}

function invalid(message: string): PlatformEventParse {
  return { ok: false, message: `malformed event: ${message}` };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= 512;
}
