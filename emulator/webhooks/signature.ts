/**
 * Standard Webhooks signatures: the `webhook-signature` header of a delivery and new signing
 * secrets.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** What {@link signWebhook} signs; the fields of one delivery attempt. */
export type WebhookSigningInput = {
  /** The endpoint's signing secret, `whsec_<base64>`. */
  secret: string;
  /** The `webhook-id` header: the event id. */
  id: string;
  /** The `webhook-timestamp` header: Unix seconds of the attempt. */
  timestamp: number;
  /** The exact request body bytes, as a string. */
  body: string;
};

/**
 * Signs a webhook the Standard Webhooks way: HMAC-SHA256, keyed with the
 * base64-decoded part of the secret after `whsec_`, over `${id}.${timestamp}.${body}`.
 *
 * @returns The `webhook-signature` header value, `v1,<base64 signature>`.
 * @throws TypeError when the secret is not `whsec_` followed by non-empty base64, or the
 *   timestamp is not a non-negative integer. The message never contains the secret.
 */
export function signWebhook({ secret, id, timestamp, body }: WebhookSigningInput): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError(
      `webhook timestamp must be a non-negative integer of Unix seconds, got ${String(timestamp)}`,
    );
  }
  const key = decodeWebhookSecret(secret);
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64');
  return `v1,${signature}`;
}

/** Generates a new signing secret: `whsec_` followed by the base64 of 32 random bytes. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

function decodeWebhookSecret(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : undefined;
  // Node's base64 decoder skips junk silently; checking first keeps a mangled
  // secret from signing with a different key than the receiver holds.
  if (encoded === undefined || encoded.length === 0 || !BASE64.test(encoded)) {
    throw new TypeError('webhook secret must be "whsec_" followed by base64 (the secret is not shown)');
  }
  return Buffer.from(encoded, 'base64');
}
