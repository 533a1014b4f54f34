/**
 * A token that expires on an SSE stream whose reader stopped reading: the facade cannot write the
 * UNAUTHENTICATED error into full buffers, so once the grace for it has passed the stream is cut,
 * not left open on an expired token holding its socket, its place among the caller's running
 * subscriptions and the results already written. The reader is Node's HTTP client, paused, so the
 * kernel's buffers fill as on a stalled network. While the token is still valid, a stream that
 * takes no write for LIVE_STALLED_WRITE_TIMEOUT_MS is cut too (the second describe).
 */
import http from 'node:http';
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { parseExposition, valueOf } from '../support/metrics.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken } from '../support/tokens.ts';

/** The stacks' settings: a queue that overflows after a few events, and a wide selection. */
const STALLING_ENV = {
  WEBHOOK_REGISTER: 'true',
  SUBSCRIPTION_QUEUE_LIMIT: '4',
  // A wide selection, so that a few events fill the sockets' buffers (about 150 KiB each).
  QUERY_MAX_ALIASES: '10000',
  QUERY_MAX_TOKENS: '5000',
  QUERY_MAX_COST: '100000000',
};
// Only the token's expiry cuts a stalled stream here: the stalled-write deadline is set far off.
const stack = useStack({ env: { ...STALLING_ENV, LIVE_STALLED_WRITE_TIMEOUT_MS: '600000' } });
// A stalled-write deadline of two seconds.
const stalledStack = useStack({ env: { ...STALLING_ENV, LIVE_STALLED_WRITE_TIMEOUT_MS: '2000' } });

const WIDE_LABELS = Array.from({ length: 200 }, (_, i) => `l${i}: label`).join(' ');
const WIDE_ACCOUNTS = Array.from({ length: 45 }, (_, i) => `a${i}: account { ...Wide }`).join(' ');
const WIDE = `subscription Wide {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId ${WIDE_ACCOUNTS} }
}
fragment Wide on Account { ${WIDE_LABELS} }`;

/** Events made while the reader is stalled: far more than the sockets' buffers hold. */
const TOP_UPS = 40;
/** How long the token lives: long enough for the top-ups to be made while it is valid. */
const TOKEN_SECONDS = 25;

const sseGauges = async (of = stack) => {
  const samples = parseExposition(await of.facade.app.metrics.registry.metrics());
  return {
    connections: valueOf(samples, 'facade_live_connections', { transport: 'sse' }),
    subscriptions: valueOf(samples, 'facade_live_subscriptions', { transport: 'sse' }),
  };
};

describe('SSE streams whose reader stopped reading, and their tokens', () => {
  test(
    'the stream is cut once the grace has passed, and its subscription ends',
    { timeout: 120_000 },
    async () => {
      const token = await issuerSignedToken({
        sub: 'stalled-reader',
        exp: Math.floor(Date.now() / 1000) + TOKEN_SECONDS,
      });
      const request = http.request(`${stack.facadeUrl}/graphql/stream`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          authorization: `Bearer ${token}`,
        },
      });
      request.end(JSON.stringify({ query: WIDE }));
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      expect(response.statusCode).toBe(200);
      response.pause();
      const closed = new Promise<void>((resolve) => response.socket.once('close', () => resolve()));
      await stack.subscriptionsStarted(1);

      for (let made = 0; made < TOP_UPS; made += 1) {
        const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
          body: { amount: '1.00', currency: 'USDC' },
        });
        expect(topUp.status).toBe(200);
      }
      // Still open while the token is valid: the reader is slow, not gone.
      expect(await sseGauges()).toEqual({ connections: 1, subscriptions: 1 });

      // After the expiry, the revocation's wait and the grace: cut, whatever it had not read.
      let gauges = await sseGauges();
      await waitFor(
        () => gauges.connections === 0,
        'the stalled stream to be cut after its token expired',
        TOKEN_SECONDS * 1000 + 15_000,
        async () => {
          gauges = await sseGauges();
        },
      );
      expect((await sseGauges()).subscriptions).toBe(0);
      await stack.subscriptionsCompleted(1);
      response.destroy();
      await closed;
    },
  );
});

describe('SSE streams whose reader stopped reading, with a valid token', () => {
  test(
    'a stream that takes no write for LIVE_STALLED_WRITE_TIMEOUT_MS is cut, and its subscription ends',
    { timeout: 120_000 },
    async () => {
      const token = await issuerSignedToken({
        sub: 'stalled-reader-for-an-hour',
        exp: Math.floor(Date.now() / 1000) + 3600,
      });
      const request = http.request(`${stalledStack.facadeUrl}/graphql/stream`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          authorization: `Bearer ${token}`,
        },
      });
      request.end(JSON.stringify({ query: WIDE }));
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      expect(response.statusCode).toBe(200);
      response.pause();
      await stalledStack.subscriptionsStarted(1);
      try {
        for (let made = 0; made < TOP_UPS; made += 1) {
          const topUp = await stalledStack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
            body: { amount: '1.00', currency: 'USDC' },
          });
          expect(topUp.status).toBe(200);
        }
        let gauges = await sseGauges(stalledStack);
        await waitFor(
          () => gauges.connections === 0,
          'the stalled stream to be cut',
          20_000,
          async () => {
            gauges = await sseGauges(stalledStack);
          },
        );
        expect((await sseGauges(stalledStack)).subscriptions).toBe(0);
      } finally {
        response.destroy();
        await stalledStack.subscriptionsCompleted(1);
      }
    },
  );
});
