/**
 * The upstream's webhook payload as the facade carries it from the webhook route, through the
 * event log, to the subscription resolvers ("Events and webhooks" in `docs/upstream-assumptions.md`).
 *
 * Everything the facade will later do with an event is checked here, before anything uses it: ids
 * that become upstream path segments and cache keys have the plain form `restPath` takes, the event
 * id (the key of de-duplication) is printable ASCII, names that key the facade's tables are names,
 * and no string anywhere is text that cannot be written as UTF-8.
 * An event that fails is one the facade can never process, however often it is delivered: the
 * route parks it (dead-letters.ts) instead of letting a later step throw on it.
 */

import { isRfc3339DateTime } from '../../rfc3339.ts';
import { isPlainId } from '../../upstream/rest-path.ts';
import type { PlatformEvent } from '../event-types.ts';

/**
 * How deep an event may nest: the envelope, `data`, the record and its own nesting (a capability's
 * applications and their institution reach 6). Deeper is no record of the platform's, and is what
 * makes recursive steps further on (serialisation, structured clones) run out of stack.
 */
export const MAX_EVENT_DEPTH = 32;

/** An event id: printable ASCII without space, as a `webhook-id` header can carry it. */
const EVENT_ID = /^[\x21-\x7e]{1,512}$/;

/** The longest event kind or resource type: the platform's are under 30 characters. */
const MAX_NAME_LENGTH = 128;

/**
 * An event kind or resource type: dot-separated words of letters, digits and `_` (Standard
 * Webhooks' form of event types).
 */
const NAME = new RegExp(`^(?=.{1,${MAX_NAME_LENGTH}}$)[A-Za-z0-9_]+(?:\\.[A-Za-z0-9_]+)*$`);

/**
 * Why an event can never be processed. A closed set: it labels a metric, and each names a check
 * here or in the webhook route.
 */
export const POISON_REASONS = [
  /** The body is not UTF-8, or not JSON. */
  'invalid_json',
  /** Nested deeper than {@link MAX_EVENT_DEPTH}. */
  'too_deep',
  /** A string or member name that is not well-formed Unicode (a lone surrogate). */
  'invalid_text',
  /** A number JSON can write but no double holds (it would be read back as null). */
  'invalid_number',
  /** Not the documented envelope: a member missing or of the wrong type. */
  'invalid_envelope',
  /** `data.customerId` or `data.resourceId` is not a plain id, or `id` not printable ASCII. */
  'invalid_id',
  /** `type` or `data.resourceType` is not a name. */
  'invalid_name',
  /** The signed `webhook-id` header differs from the body's `id` (the webhook route's check). */
  'id_mismatch',
  /** The event names the environment the route does not take (the webhook route's check). */
  'other_environment',
] as const;

/** One of {@link POISON_REASONS}. */
export type PoisonReason = (typeof POISON_REASONS)[number];

/** Why an event can never be processed, and where. */
export interface EventPoison {
  readonly reason: PoisonReason;
  /** JSON Pointer to the first offending value ('' for the whole body). Not escaped: it may be poison too. */
  readonly pointer: string;
  /** The problem in words. Never quotes the body. */
  readonly message: string;
}

/**
 * The result of {@link parsePlatformEvent}. A refused event keeps the JSON value it held, when it
 * was JSON, so the route can keep its identifying members (escaped) in the dead-letter record.
 */
export type PlatformEventParse =
  { ok: true; event: PlatformEvent } | ({ ok: false; value?: unknown } & EventPoison);

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses a webhook body into a {@link PlatformEvent}. Never throws: a body that is not UTF-8 JSON,
 * nests too deep, holds a string that is not Unicode or a number no double holds, or is not the
 * documented envelope gives `{ ok: false }` naming the first problem.
 */
export function parsePlatformEvent(rawBody: Buffer | string): PlatformEventParse {
  let text: string;
  try {
    text = typeof rawBody === 'string' ? rawBody : UTF8.decode(rawBody);
  } catch {
    return refuse('invalid_json', '', 'the body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return refuse('invalid_json', '', 'the body is not valid JSON');
  }
  const parsed = toPlatformEvent(value);
  return parsed.ok ? parsed : { ...parsed, value };
}

/**
 * Checks that `value` has the envelope's shape and that everything in it can be processed, and
 * returns it typed. Used on arrival and again on values read back from Redis, which another process
 * wrote.
 */
export function toPlatformEvent(value: unknown): PlatformEventParse {
  return findUnfitValue(value) ?? toEnvelope(value);
}

function toEnvelope(value: unknown): PlatformEventParse {
  if (!isRecord(value)) return refuse('invalid_envelope', '', 'the body must be a JSON object');
  const { id, type, occurredAt, environment, data } = value;
  if (!isEventId(id)) return refuse('invalid_id', '/id', `"id" must be ${EVENT_ID_TEXT}`);
  if (!isName(type)) return refuse('invalid_name', '/type', `"type" must be ${NAME_TEXT}`);
  if (typeof occurredAt !== 'string' || !isRfc3339DateTime(occurredAt)) {
    return refuse('invalid_envelope', '/occurredAt', '"occurredAt" must be an RFC 3339 timestamp');
  }
  if (environment !== 'sandbox' && environment !== 'live') {
    return refuse('invalid_envelope', '/environment', '"environment" must be "sandbox" or "live"');
  }
  if (!isRecord(data)) return refuse('invalid_envelope', '/data', '"data" must be an object');
  const { customerId, resourceType, resourceId, object } = data;
  if (customerId !== null && !isPlainIdValue(customerId)) {
    return refuse('invalid_id', '/data/customerId', `"data.customerId" must be ${PLAIN_ID_TEXT} or null`);
  }
  if (!isName(resourceType)) {
    return refuse('invalid_name', '/data/resourceType', `"data.resourceType" must be ${NAME_TEXT}`);
  }
  if (!isPlainIdValue(resourceId)) {
    return refuse('invalid_id', '/data/resourceId', `"data.resourceId" must be ${PLAIN_ID_TEXT}`);
  }
  if (!isRecord(object)) {
    return refuse('invalid_envelope', '/data/object', '"data.object" must be an object (the record)');
  }
  return {
    ok: true,
    event: { id, type, occurredAt, environment, data: { customerId, resourceType, resourceId, object } },
  };
}

const EVENT_ID_TEXT = '1 to 512 printable ASCII characters other than space';
const PLAIN_ID_TEXT = 'a plain id (1 to 128 ASCII letters, digits, "_" or "-")';
const NAME_TEXT = 'a name (dot-separated letters, digits and "_", at most 128)';

/**
 * The first value of `root` nothing further on can carry faithfully: nesting past
 * {@link MAX_EVENT_DEPTH}, a string or member name with a lone surrogate, a number read as
 * ±Infinity. Iterative, so no input makes this run out of stack.
 */
function findUnfitValue(root: unknown): (EventPoison & { ok: false }) | undefined {
  const pending: { value: unknown; pointer: string; depth: number }[] = [
    { value: root, pointer: '', depth: 1 },
  ];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, pointer, depth } = next;
    if (typeof value === 'string' && !value.isWellFormed()) {
      return refuse('invalid_text', pointer, 'a string is not well-formed Unicode (a lone surrogate)');
    }
    if (typeof value === 'number' && !Number.isFinite(value)) {
      return refuse('invalid_number', pointer, 'a number is out of the range of a double');
    }
    if (typeof value !== 'object' || value === null) continue;
    if (depth > MAX_EVENT_DEPTH) {
      return refuse('too_deep', pointer, `the body nests deeper than ${MAX_EVENT_DEPTH} levels`);
    }
    for (const [key, member] of Object.entries(value)) {
      const at = `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
      if (!key.isWellFormed()) {
        return refuse('invalid_text', at, 'a member name is not well-formed Unicode (a lone surrogate)');
      }
      pending.push({ value: member, pointer: at, depth: depth + 1 });
    }
  }
  return undefined;
}

function refuse(reason: PoisonReason, pointer: string, message: string): EventPoison & { ok: false } {
  return { ok: false, reason, pointer, message };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Whether `value` can be an event's id: it keys de-duplication and is logged, never a path, so
 * printable ASCII is enough (the reconciler's own ids hold `:` and `.`).
 */
function isEventId(value: unknown): value is string {
  return typeof value === 'string' && EVENT_ID.test(value);
}

function isPlainIdValue(value: unknown): value is string {
  return typeof value === 'string' && isPlainId(value);
}

/**
 * Whether `value` is a {@link NAME}. Names of `Object.prototype`'s members (`constructor`) are not:
 * the facade looks kinds and resource types up in plain objects, where they would find a function.
 */
function isName(value: unknown): value is string {
  return typeof value === 'string' && NAME.test(value) && !(value in Object.prototype);
}
