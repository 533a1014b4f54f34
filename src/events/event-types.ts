/**
 * The types every step of the event pipeline shares (receiving, fan-out, delivery, tracing), kept
 * at the bottom of events/ so no step imports another for a type alone.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';

/** One upstream event, validated. `type` stays an open string: a new upstream kind must not break the route. */
export interface PlatformEvent {
  /** `evt_...`; the same on every redelivery, so it is the de-duplication key. */
  id: string;
  /** Event kind, e.g. `account.updated`. */
  type: string;
  /** RFC 3339 timestamp of the change. */
  occurredAt: string;
  environment: PlatformEnvironment;
  data: {
    /** The customer the resource belongs to; null for resources outside a customer. */
    customerId: string | null;
    /** E.g. `account`, `related_party`. */
    resourceType: string;
    resourceId: string;
    /** The record as a read returned it right after the change. */
    object: unknown;
  };
}

/**
 * How a delivery was answered: `accepted` (published), `duplicate` (published before), `forged`
 * (no valid signature), `stale` (signature timestamp outside the tolerance), `malformed` (bad body
 * or too large), `in_flight` (another delivery of it is being published), `unavailable` (not
 * published: shutting down or the event log failed), `too_slow` (the body did not arrive in time),
 * `busy` (no reading slot in time), `throttled` (its address was refused too often lately),
 * `dead_lettered` (signed, but never processable: parked in the dead-letter record).
 */
export type WebhookDeliveryOutcome =
  | 'accepted'
  | 'duplicate'
  | 'forged'
  | 'stale'
  | 'malformed'
  | 'in_flight'
  | 'unavailable'
  | 'too_slow'
  | 'busy'
  | 'throttled'
  | 'dead_lettered';
