/**
 * The emulator's business side assembled: the store for both environments, the shared context,
 * and one handler per operationId of the contract, each from its group's module.
 */
import type { EmulatorLogger, RouteHandlers } from '../http/types.ts';
import { createStore } from '../store/store.ts';
import type { DataSet } from '../store/store.ts';
import type { Environment } from '../store/records.ts';
import type { WebhookEventEnvelope, WebhookTarget } from '../webhooks/types.ts';
import { accountFeeHandlers } from './account-fees.ts';
import { accountHandlers } from './accounts.ts';
import { capabilityHandlers } from './capabilities.ts';
import { createDomainContext } from './context.ts';
import { customerHandlers } from './customers.ts';
import { documentHandlers } from './documents.ts';
import { institutionHandlers } from './institutions.ts';
import { quoteHandlers } from './quotes.ts';
import { recipientHandlers } from './recipients.ts';
import { relatedPartyHandlers } from './related-parties.ts';
import { ruleHandlers } from './rules.ts';
import { sandboxHandlers } from './sandbox.ts';
import { taskHandlers } from './tasks.ts';
import { transferHandlers } from './transfers.ts';
import { activeEndpointsFor, webhookEndpointHandlers } from './webhook-endpoints.ts';

/** Options of {@link createDomain}. */
export type DomainOptions = {
  /** The starting data: the documented demo data, or empty environments. */
  data: DataSet;
  /** Delay before a pending transfer completes. Default 50 ms. */
  transferSettleMs?: number;
  /**
   * Receives every event, synchronously, right after the change it describes. Throwing from it
   * does not undo or fail the change; the error goes to `logger.error`.
   */
  publishEvent: (event: WebhookEventEnvelope) => void;
  /** Drives every timestamp. Default: the system clock. Timestamps never go backwards either way. */
  clock?: () => Date;
  /** Where errors of background work (settlements, event publishing) are reported. Default: the console. */
  logger?: Pick<EmulatorLogger, 'error'>;
};

/** The business side of the emulator: state, rules and one handler per operationId. */
export type Domain = {
  handlers: RouteHandlers;
  /** Replaces both environments with fresh `data`; pending settlements of the old data are dropped. */
  reset(data: DataSet): void;
  /** The webhook targets of `environment` subscribed to `eventType` (active endpoints only). */
  activeEndpointsFor(environment: Environment, eventType: string): WebhookTarget[];
  /** Cancels pending settlements so the process can exit. Idempotent. */
  close(): void;
};

const DEFAULT_TRANSFER_SETTLE_MS = 50;

/**
 * Creates the emulator's domain: an in-memory store per environment loaded with `data`, and the
 * handlers that implement every rule of the spec and of `docs/upstream-assumptions.md` over it.
 *
 * @throws RangeError when `transferSettleMs` is negative or not a number.
 */
export function createDomain(options: DomainOptions): Domain {
  const transferSettleMs = options.transferSettleMs ?? DEFAULT_TRANSFER_SETTLE_MS;
  if (!Number.isFinite(transferSettleMs) || transferSettleMs < 0) {
    throw new RangeError(
      `transferSettleMs must be a number of milliseconds, at least 0; got ${transferSettleMs}`,
    );
  }
  const clock = options.clock ?? (() => new Date());
  const logger = options.logger ?? {
    error: (message: string, fields?: Record<string, unknown>) => console.error(message, fields),
  };
  const store = createStore({ data: options.data, clock });
  const { context, cancelScheduled } = createDomainContext({
    store,
    clock,
    transferSettleMs,
    publishEvent: options.publishEvent,
    onBackgroundError: (error) =>
      logger.error('Emulator background work failed', {
        error: error instanceof Error ? error.message : String(error),
      }),
  });

  const handlers: RouteHandlers = {
    ...customerHandlers(context),
    ...relatedPartyHandlers(context),
    ...accountHandlers(context),
    ...accountFeeHandlers(context),
    ...capabilityHandlers(context),
    ...documentHandlers(context),
    ...recipientHandlers(context),
    ...taskHandlers(context),
    ...quoteHandlers(context),
    ...transferHandlers(context),
    ...ruleHandlers(context),
    ...institutionHandlers(context),
    ...webhookEndpointHandlers(context),
    ...sandboxHandlers(context),
  };

  return {
    handlers,
    reset(data) {
      cancelScheduled();
      store.load(data);
    },
    activeEndpointsFor: (environment, eventType) => activeEndpointsFor(context, environment, eventType),
    close: cancelScheduled,
  };
}

export type { DataSet };
