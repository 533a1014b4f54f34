import type { PlatformEnvironment, PlatformEvent } from '../../../src/events/receiving/platform-event.ts';

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

/**
 * Resolves when `condition` holds, polling (running `refresh` before each check when given);
 * rejects with `message` after `timeoutMs`.
 */
export async function waitFor(
  condition: () => boolean,
  message: string,
  timeoutMs = 10_000,
  refresh?: () => Promise<void>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await refresh?.();
    if (condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${message}`);
    await new Promise((resolve) => setTimeout(resolve, refresh === undefined ? 10 : 50));
  }
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
