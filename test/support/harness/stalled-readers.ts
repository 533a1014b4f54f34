/**
 * What the tests of readers that stop reading share (subscriptions-slow-readers and the stalled
 * tests of each live transport): a stack whose subscriber queue overflows after a few events, a
 * subscription wide enough that a few of its results fill a stalled reader's socket buffers, the
 * top-ups that make its events, and the live wing's gauges of one transport.
 */
import { expect } from 'vitest';
import { parseExposition, valueOf } from '../metrics.ts';
import type { Stack } from './stack.ts';

/** A queue that overflows after a few events, and limits that admit the wide selection below. */
export const STALLING_ENV = {
  WEBHOOK_REGISTER: 'true',
  SUBSCRIPTION_QUEUE_LIMIT: '4',
  // A wide selection, so that a few events fill the sockets' buffers (about 150 KiB each).
  QUERY_MAX_ALIASES: '10000',
  QUERY_MAX_TOKENS: '5000',
  QUERY_MAX_COST: '100000000',
} as const;

const WIDE_LABELS = Array.from({ length: 200 }, (_, i) => `l${i}: label`).join(' ');
const WIDE_ACCOUNTS = Array.from({ length: 45 }, (_, i) => `a${i}: account { ...Wide }`).join(' ');
/** One event of this subscription is about 150 KiB of JSON; it does not select `cursor`. */
export const WIDE_SUBSCRIPTION = `subscription Wide {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId ${WIDE_ACCOUNTS} }
}
fragment Wide on Account { ${WIDE_LABELS} }`;

/** Makes `count` top-ups of acme's ETH account, one after the other: one event each for every subscriber. */
export async function topUps(stack: Stack, count: number): Promise<number> {
  for (let made = 0; made < count; made += 1) {
    const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '1.00', currency: 'USDC' },
    });
    expect(response.status).toBe(200);
  }
  return count;
}

/** The live wing's open connections and running subscriptions of `transport`, read from its gauges. */
export async function liveGauges(
  stack: Stack,
  transport: 'graphql-ws' | 'sse' | 'multipart' | 'callback',
): Promise<{ connections: number; subscriptions: number }> {
  const samples = parseExposition(await stack.facade.app.metrics.registry.metrics());
  return {
    connections: valueOf(samples, 'facade_live_connections', { transport }),
    subscriptions: valueOf(samples, 'facade_live_subscriptions', { transport }),
  };
}
