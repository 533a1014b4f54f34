/**
 * Upstream events for the tests: well-formed envelopes as the emulator would send them, and their
 * Standard Webhooks delivery, signed, to a facade's webhook route.
 */
import { expect } from 'vitest';
import { signWebhook } from '../../../emulator/webhooks/signature.ts';
import type { PlatformEvent } from '../../../src/events/event-types.ts';
import type { PlatformEnvironment } from '../../../src/platform-environment.ts';
import type { RunningEmulator } from './emulator.ts';

let sequence = 0;

/** A well-formed upstream event, as the emulator would send it. */
export function makeEvent(overrides: Partial<PlatformEvent> & { customerId?: string } = {}): PlatformEvent {
  sequence += 1;
  const { customerId = 'cus_1', ...rest } = overrides;
  return {
    id: `evt_test_${process.pid}_${sequence}`,
    type: 'account.updated',
    occurredAt: new Date(Date.UTC(2026, 0, 1, 0, 0, sequence % 60)).toISOString(),
    environment: 'sandbox' as PlatformEnvironment,
    data: { customerId, resourceType: 'account', resourceId: 'acc_1', object: { id: 'acc_1' } },
    ...rest,
  };
}

/** A fresh upstream-shaped event about a real resource, happening now. */
export function upstreamEvent(
  fields: Pick<PlatformEvent, 'type' | 'environment'> & {
    customerId: string | null;
    resourceType: string;
    resourceId: string;
    object?: unknown;
  },
): PlatformEvent {
  sequence += 1;
  return {
    id: `evt_test_${process.pid}_${Date.now()}_${sequence}`,
    type: fields.type,
    occurredAt: new Date().toISOString(),
    environment: fields.environment,
    data: {
      customerId: fields.customerId,
      resourceType: fields.resourceType,
      resourceId: fields.resourceId,
      object: fields.object ?? { id: fields.resourceId },
    },
  };
}

/** A Standard Webhooks delivery of `event`, signed with `secret`, posted to `url`; its status, body and `Retry-After`. */
export async function postSignedEvent(url: string, secret: string, event: object & { id: string }) {
  const body = JSON.stringify(event);
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ secret, id: event.id, timestamp, body }),
    },
    body,
  });
  const retryAfter = response.headers.get('retry-after');
  return {
    status: response.status,
    body: await response.json().catch(() => undefined),
    ...(retryAfter === null ? {} : { retryAfter }),
  };
}

/** `account.updated` of the demo customer acme's ETH account, in the sandbox, happening now. */
export function acmeAccountUpdated(): PlatformEvent {
  return upstreamEvent({
    type: 'account.updated',
    environment: 'sandbox',
    customerId: 'cus_acme',
    resourceType: 'account',
    resourceId: 'acc_acme_eth',
  });
}

/** `account.updated` of the demo customer ada's Polygon account, in the sandbox, happening now. */
export function adaPolygonAccountUpdated(): PlatformEvent {
  return upstreamEvent({
    type: 'account.updated',
    environment: 'sandbox',
    customerId: 'cus_ada',
    resourceType: 'account',
    resourceId: 'acc_ada_polygon',
  });
}

/** `capability.status_changed` of the demo customer globex's ACH capability, in the sandbox, now. */
export function globexCapabilityChanged(): PlatformEvent {
  return upstreamEvent({
    type: 'capability.status_changed',
    environment: 'sandbox',
    customerId: 'cus_globex',
    resourceType: 'capability',
    resourceId: 'cap_globex_ach',
  });
}

/**
 * Creates an officer named Test `lastName` for `customerId` at the emulator (which sends its
 * `related_party.created` webhook), and returns the new party's id.
 */
export async function createRelatedParty(
  emulator: RunningEmulator,
  customerId: string,
  lastName: string,
): Promise<string> {
  const created = await emulator.rest('POST', `/v3/customers/${customerId}/related-parties`, {
    body: {
      partyType: 'person',
      roles: ['officer'],
      title: 'Officer',
      person: { firstName: 'Test', lastName, residenceCountry: 'US' },
    },
  });
  expect(created.status).toBe(201);
  return created.body.data.id as string;
}
