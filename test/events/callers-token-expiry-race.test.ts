/**
 * A client that does not play along when its token expires: it ignores the server's close frame
 * and goes on sending `subscribe` messages. Nothing it sends after the expiry runs, nothing reaches
 * the upstream, and its socket is cut after the close grace instead of lingering.
 */
import { describe, expect, test } from 'vitest';
import { openRawWebSocket } from '../support/harness/raw-websocket.ts';
import { useStack } from '../support/harness/stack.ts';
import { issuerSignedToken } from '../support/tokens.ts';

const stack = useStack({ env: { AUTH_CLOCK_TOLERANCE_SECONDS: '1' } });

describe('a client that ignores the close frame of its expired token', () => {
  test('runs nothing more, makes no upstream call, and is cut after the grace', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const raw = await openRawWebSocket(stack.graphqlUrl.replace(/^http/, 'ws'));
    raw.send({ type: 'connection_init', payload: { Authorization: `Bearer ${token}` } });
    await raw.message((message) => (message as { type?: string }).type === 'connection_ack');

    // The expiry (exp and the clock tolerance) closes the connection; the client does not answer.
    expect(await raw.closeFrame).toBe(4401);
    await stack.resetUpstreamCalls();
    raw.send({
      id: 'top-up',
      type: 'subscribe',
      payload: {
        query:
          'mutation { sandboxTopUp(input: { accountId: "acc_acme_usd", amount: "1.00", idempotencyKey: "race-1" }) { __typename } }',
      },
    });
    raw.send({
      id: 'replay',
      type: 'subscribe',
      payload: {
        query:
          'subscription { accountChanged(customerId: "cus_acme", since: "2020-01-01T00:00:00Z") { accountId } }',
      },
    });

    await raw.gone;
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(raw.messages.filter((message) => (message as { type?: string }).type === 'next')).toEqual([]);
    expect(stack.logs().filter((line) => line.includes('"log":"audit"'))).toEqual([]);
  });
});
