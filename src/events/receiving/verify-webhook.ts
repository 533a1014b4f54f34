/**
 * Standard Webhooks signature check of an upstream delivery: nothing is parsed, de-duplicated or
 * published before the body is proven to come from the upstream, within the allowed clock skew.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** Standard Webhooks' default: five minutes either side of the receiver's clock. */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 5 * 60;
/** An HMAC-SHA256 digest is 32 bytes; anything else in a `v1,` entry cannot match. */
const DIGEST_BYTES = 32;

/** Header values as Node and express hand them over (a repeated header may be an array). */
export type WebhookHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** What {@link verifyWebhook} checks. */
export interface VerifyWebhookInput {
  /** Request headers; names are matched case-insensitively. */
  headers: WebhookHeaders;
  /** The request body exactly as received: the signature covers these bytes, not a re-serialisation. */
  rawBody: Buffer | string;
  /**
   * Signing secrets (`whsec_<base64>`) that are currently valid. More than one during a rotation:
   * a delivery signed with any of them is accepted.
   */
  secrets: readonly string[];
  /** How far the `webhook-timestamp` may be from `now`, in either direction. Default 300 s. */
  toleranceSeconds?: number;
  /** The receiver's clock, in milliseconds since the epoch. Default `Date.now()`. */
  now?: number;
}

/** Why a delivery was refused. None of them says anything about the secrets. */
export type WebhookRejection =
  | 'missing_headers'
  | 'invalid_timestamp'
  | 'timestamp_outside_tolerance'
  | 'no_matching_signature'
  | 'no_usable_secret';

/** The outcome of {@link verifyWebhook}: a verified delivery's id and timestamp, or the reason it was refused. */
export type WebhookVerification =
  { ok: true; id: string; timestamp: number } | { ok: false; reason: WebhookRejection; message: string };

/** What the headers of a delivery say, once their form and timestamp window are checked. */
export interface CheckedWebhookHeaders {
  id: string;
  timestampText: string;
  timestamp: number;
  /** The well-formed `v1` digests of `webhook-signature` (at least one). */
  signatures: readonly Buffer[];
}

/** The outcome of {@link checkWebhookHeaders}. */
export type WebhookHeaderCheck =
  ({ ok: true } & CheckedWebhookHeaders) | { ok: false; reason: WebhookRejection; message: string };

/**
 * Everything about a delivery that can be checked before its body is read: the three `webhook-*`
 * headers are present, the timestamp is whole seconds within `toleranceSeconds` of `now`, and the
 * signature header holds at least one well-formed `v1` digest. A delivery that fails here is refused
 * without a byte of its body read or hashed. Never throws.
 */
export function checkWebhookHeaders(
  headers: WebhookHeaders,
  options: { toleranceSeconds?: number; now?: number } = {},
): WebhookHeaderCheck {
  const id = headerValue(headers, 'webhook-id');
  const timestampText = headerValue(headers, 'webhook-timestamp');
  const signatureHeader = headerValue(headers, 'webhook-signature');
  if (id === undefined || timestampText === undefined || signatureHeader === undefined) {
    return reject(
      'missing_headers',
      'webhook-id, webhook-timestamp and webhook-signature headers are all required',
    );
  }

  if (!/^\d{1,12}$/.test(timestampText)) {
    return reject('invalid_timestamp', 'webhook-timestamp must be whole Unix seconds');
  }
  const timestamp = Number(timestampText);
  const toleranceSeconds = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return reject(
      'timestamp_outside_tolerance',
      `webhook-timestamp is more than ${toleranceSeconds} s away from the receiver's clock`,
    );
  }

  const signatures = parseSignatures(signatureHeader);
  if (signatures.length === 0) {
    return reject('no_matching_signature', 'webhook-signature holds no well-formed v1 signature');
  }
  return { ok: true, id, timestampText, timestamp, signatures };
}

/**
 * Verifies a Standard Webhooks delivery: HMAC-SHA256, keyed with the base64-decoded part of a
 * secret after `whsec_`, over `${webhook-id}.${webhook-timestamp}.${rawBody}`, compared in constant
 * time with every `v1,` signature of the `webhook-signature` header (space separated), under every
 * secret given; the timestamp must be within `toleranceSeconds` of `now`, in the past or the future,
 * which bounds how long a captured delivery can be replayed.
 *
 * Never throws, whatever the input: garbage headers or bodies are a `{ ok: false }` result. No
 * message mentions a secret or a computed signature.
 */
export function verifyWebhook(input: VerifyWebhookInput): WebhookVerification {
  const checked = checkWebhookHeaders(input.headers, {
    ...(input.toleranceSeconds === undefined ? {} : { toleranceSeconds: input.toleranceSeconds }),
    ...(input.now === undefined ? {} : { now: input.now }),
  });
  if (!checked.ok) return checked;
  return verifyWebhookSignature(checked, input.rawBody, input.secrets);
}

/** The signature check of {@link verifyWebhook}, over headers {@link checkWebhookHeaders} accepted. */
export function verifyWebhookSignature(
  checked: CheckedWebhookHeaders,
  rawBody: Buffer | string,
  secrets: readonly string[],
): WebhookVerification {
  const keys = secrets.map(decodeSecret).filter((key) => key !== undefined);
  if (keys.length === 0) {
    return reject('no_usable_secret', 'no valid webhook signing secret is configured');
  }
  const { id, timestampText, timestamp, signatures } = checked;
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  for (const key of keys) {
    const expected = createHmac('sha256', key).update(`${id}.${timestampText}.`).update(body).digest();
    // Every candidate is compared, even after a match, so the time taken does not tell which one matched.
    let matched = false;
    for (const candidate of signatures) {
      if (timingSafeEqual(expected, candidate)) matched = true;
    }
    if (matched) return { ok: true, id, timestamp };
  }
  return reject('no_matching_signature', 'no webhook-signature matches the body under any configured secret');
}

function reject(
  reason: WebhookRejection,
  message: string,
): { ok: false; reason: WebhookRejection; message: string } {
  return { ok: false, reason, message };
}

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  let value: string | readonly string[] | undefined;
  try {
    value = headers[name] ?? findCaseInsensitive(headers, name);
  } catch {
    return undefined;
  }
  // A repeated signature header is ambiguous; Standard Webhooks sends one, space separated.
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed.length > 0 ? trimmed : undefined;
}

function findCaseInsensitive(headers: WebhookHeaders, name: string): string | readonly string[] | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return value;
  }
  return undefined;
}

/** The decoded `v1` digests of the header; other versions and malformed entries are ignored. */
function parseSignatures(header: string): Buffer[] {
  const digests: Buffer[] = [];
  for (const entry of header.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const encoded = entry.slice(comma + 1);
    if (!BASE64.test(encoded)) continue;
    const digest = Buffer.from(encoded, 'base64');
    // timingSafeEqual throws on a length mismatch; a digest of the wrong length cannot match anyway.
    if (digest.length === DIGEST_BYTES) digests.push(digest);
  }
  return digests;
}

function decodeSecret(secret: string): Buffer | undefined {
  if (typeof secret !== 'string' || !secret.startsWith(SECRET_PREFIX)) return undefined;
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (encoded.length === 0 || !BASE64.test(encoded)) return undefined;
  return Buffer.from(encoded, 'base64');
}

/**
 * Whether `secret` is usable for {@link verifyWebhook}: `whsec_` followed by non-empty base64.
 * For configuration checks; says nothing about the secret's value.
 */
export function isWebhookSecret(secret: string): boolean {
  return decodeSecret(secret) !== undefined;
}
