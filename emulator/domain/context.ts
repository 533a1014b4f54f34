/**
 * What every domain handler shares: the store, the clock, the event announcer and the timers it
 * schedules (transfers that settle later), so that a reset or a close can cancel them all.
 */
import { newId } from '../store/ids.ts';
import type { Store } from '../store/store.ts';
import type { EnvironmentStore } from '../store/environment-store.ts';
import type { Environment } from '../store/records.ts';
import type { WebhookEventEnvelope } from '../webhooks/types.ts';

/** The event kinds of `docs/upstream-assumptions.md` ("Events and webhooks"). */
export type EventType =
  | 'customer.created'
  | 'customer.updated'
  | 'account.created'
  | 'account.updated'
  | 'capability.created'
  | 'capability.status_changed'
  | 'related_party.created'
  | 'related_party.archived'
  | 'document.archived'
  | 'rule.created'
  | 'rule.updated'
  | 'rule.archived'
  | 'transfer.created'
  | 'transfer.completed';

/** One state change worth an event: the resource as a read returns it after the change. */
export type Change = {
  customerId: string | null;
  resourceType: string;
  resourceId: string;
  object: unknown;
  occurredAt: string;
};

/** What every domain operation works with. One instance per emulator. */
export type DomainContext = {
  readonly store: Store;
  /** The records of one environment. */
  env(environment: Environment): EnvironmentStore;
  /** A fresh timestamp for a change; strictly later than every earlier one. */
  stamp(): string;
  /** The wall clock (for expiry checks that must not consume a timestamp). */
  clock(): Date;
  /** Announces a change to the environment's webhook endpoints. */
  emit(environment: Environment, type: EventType, change: Change): void;
  /** Runs `task` after `delayMs`, unless the domain is closed or reset first. */
  schedule(delayMs: number, task: () => void): void;
  /** Delay between a transfer's creation and its completion. */
  readonly transferSettleMs: number;
};

/** Options of {@link createDomainContext}. */
export type DomainContextOptions = {
  store: Store;
  clock: () => Date;
  transferSettleMs: number;
  publishEvent: (event: WebhookEventEnvelope) => void;
  /** Told about errors of event subscribers and background tasks, which must not escape. */
  onBackgroundError: (error: unknown) => void;
};

/** The context plus the means to cancel everything it scheduled. */
export type DomainRuntime = { context: DomainContext; cancelScheduled: () => void };

/** Builds the shared context of all domain handlers. */
export function createDomainContext(options: DomainContextOptions): DomainRuntime {
  const timers = new Set<NodeJS.Timeout>();
  const context: DomainContext = {
    store: options.store,
    env: (environment) => options.store.environment(environment),
    stamp: () => options.store.timestamps.next(),
    clock: options.clock,
    transferSettleMs: options.transferSettleMs,
    emit(environment, type, change) {
      const event: WebhookEventEnvelope = {
        id: newId('evt'),
        type,
        occurredAt: change.occurredAt,
        environment,
        data: {
          customerId: change.customerId,
          resourceType: change.resourceType,
          resourceId: change.resourceId,
          // A snapshot: later changes to the record must not alter an event already sent.
          object: structuredClone(change.object),
        },
      };
      // A failing subscriber must never undo or fail the change that has already happened.
      try {
        options.publishEvent(event);
      } catch (error) {
        options.onBackgroundError(error);
      }
    },
    schedule(delayMs, task) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        // Nobody awaits a background task: an error is reported, never thrown into the event loop.
        try {
          task();
        } catch (error) {
          options.onBackgroundError(error);
        }
      }, delayMs);
      // Pending settlements alone must not keep a process alive.
      timer.unref();
      timers.add(timer);
    },
  };
  return {
    context,
    cancelScheduled() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
