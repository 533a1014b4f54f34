/**
 * What the live-query tests do at the emulator and count there: a top-up of an account (which the
 * emulator announces by its signed webhook), and the facade's upstream calls without those top-ups.
 */
import { expect } from 'vitest';
import type { Stack } from './stack.ts';

/** Tops up `accountId` by 3.00 USDC at the emulator, as the platform's own client would. */
export async function topUp(stack: Stack, accountId: string): Promise<void> {
  const response = await stack.emulator.rest('POST', `/v3/sandbox/accounts/${accountId}/topup`, {
    body: { amount: '3.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
}

/** Upstream calls since the last reset, without the test's own top-ups at the emulator. */
export async function facadeReads(stack: Stack): Promise<number> {
  const calls = await stack.upstreamCalls();
  const topUps = Object.entries(calls.byRoute)
    .filter(([route]) => route.includes('topup'))
    .reduce((sum, [, count]) => sum + count, 0);
  return calls.total - topUps;
}
