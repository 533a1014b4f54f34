/**
 * The emulator's own record of what it sent and what it holds, the ground truth of the report:
 *
 * - every webhook delivery attempt (`GET /_emulator/webhook-deliveries`, which keeps the last 1,000
 *   attempts: read every second and accumulated here, so none is missed at the game day's rates);
 * - the ledger of the account the load tops up, read with a key of its own: the facade's top-ups
 *   are whole units and the platform's own are millionths, so one balance tells how many of each
 *   were applied.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeliveryAttempt } from '../../emulator/webhooks/types.ts';
import type { Environment } from './topology.ts';

/** An event the emulator sent to one of the facade's endpoints, across its attempts. */
export interface SentEvent {
  eventId: string;
  environment: Environment;
  type: string;
  /** The first attempt (wall clock): when the platform sent it. */
  sentAt: number;
  attempts: number;
  /** `delivered` (a 2xx), `gave_up`, or `retrying` (the last attempt failed, another is due). */
  state: 'delivered' | 'gave_up' | 'retrying';
  /** When an attempt was answered 2xx. */
  deliveredAt?: number;
  /** Each attempt's answer: its status, or its error. */
  answers: string[];
}

export interface EmulatorRecord {
  /** Every event sent to the facade's endpoints so far. */
  events(): Map<string, SentEvent>;
  /** Reads the deliveries once more now. */
  refresh(): Promise<void>;
  stop(): void;
}

/** Polls the deliveries of the endpoints in `endpoints` (`id -> environment`) every second. */
export function recordDeliveries(
  emulatorUrl: string,
  endpoints: Record<string, Environment>,
): EmulatorRecord {
  const seen = new Set<string>();
  const events = new Map<string, SentEvent>();
  const polling = { stopped: false };
  const refresh = async (): Promise<void> => {
    const response = await fetch(`${emulatorUrl}/_emulator/webhook-deliveries`);
    const { data } = (await response.json()) as { data: DeliveryAttempt[] };
    for (const attempt of data) {
      const environment = endpoints[attempt.endpointId];
      const key = `${attempt.endpointId} ${attempt.eventId} ${attempt.attempt}`;
      if (environment === undefined || seen.has(key)) continue;
      seen.add(key);
      const at = Date.parse(attempt.at);
      const event = events.get(attempt.eventId) ?? {
        eventId: attempt.eventId,
        environment,
        type: attempt.eventType,
        sentAt: at,
        attempts: 0,
        state: 'retrying',
        answers: [],
      };
      event.sentAt = Math.min(event.sentAt, at);
      event.attempts = Math.max(event.attempts, attempt.attempt);
      event.answers[attempt.attempt - 1] = String(attempt.status ?? attempt.error ?? '?');
      if (attempt.outcome === 'delivered') {
        event.state = 'delivered';
        event.deliveredAt = at;
      } else if (attempt.outcome === 'gave_up' && event.state !== 'delivered') event.state = 'gave_up';
      events.set(attempt.eventId, event);
    }
  };
  void (async () => {
    while (!polling.stopped) {
      await refresh().catch(() => undefined);
      await sleep(1_000);
    }
  })();
  return { events: () => events, refresh, stop: () => (polling.stopped = true) };
}

/** An amount as millionths of a unit (the contract's six decimals), exactly. */
export function toMicros(amount: string): bigint {
  const [units = '0', decimals = ''] = amount.split('.');
  return BigInt(units) * 1_000_000n + BigInt(decimals.padEnd(6, '0').slice(0, 6) || '0');
}

/** The account's available USDC at the emulator, in millionths. */
export async function ledgerMicros(
  emulatorUrl: string,
  apiKey: string,
  customerId: string,
  accountId: string,
): Promise<bigint> {
  const response = await fetch(`${emulatorUrl}/v3/customers/${customerId}/accounts/${accountId}`, {
    headers: { 'x-api-key': apiKey },
  });
  if (response.status !== 200) throw new Error(`the emulator answered ${response.status} for the ledger`);
  const body = (await response.json()) as { data: { balances: { currency: string; available: string }[] } };
  const usdc = body.data.balances.find((balance) => balance.currency === 'USDC');
  if (usdc === undefined) throw new Error('the account holds no USDC');
  return toMicros(usdc.available);
}
