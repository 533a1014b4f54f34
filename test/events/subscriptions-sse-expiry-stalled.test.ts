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
import { useStack } from '../support/harness/stack.ts';
import { liveGauges, STALLING_ENV, topUps, WIDE_SUBSCRIPTION } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken } from '../support/tokens.ts';

// Only the token's expiry cuts a stalled stream here: the stalled-write deadline is set far off.
const stack = useStack({ env: { ...STALLING_ENV, LIVE_STALLED_WRITE_TIMEOUT_MS: '600000' } });
// A stalled-write deadline of two seconds.
const stalledStack = useStack({ env: { ...STALLING_ENV, LIVE_STALLED_WRITE_TIMEOUT_MS: '2000' } });

/** Events made while the reader is stalled: far more than the sockets' buffers hold. */
const TOP_UPS = 40;
/** How long the token lives: long enough for the top-ups to be made while it is valid. */
const TOKEN_SECONDS = 25;

const sseGauges = (of = stack) => liveGauges(of, 'sse');

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
      request.end(JSON.stringify({ query: WIDE_SUBSCRIPTION }));
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      expect(response.statusCode).toBe(200);
      response.pause();
      const closed = new Promise<void>((resolve) => response.socket.once('close', () => resolve()));
      await stack.subscriptionsStarted(1);

      await topUps(stack, TOP_UPS);
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
      request.end(JSON.stringify({ query: WIDE_SUBSCRIPTION }));
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      expect(response.statusCode).toBe(200);
      response.pause();
      await stalledStack.subscriptionsStarted(1);
      try {
        await topUps(stalledStack, TOP_UPS);
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
