/**
 * A multipart stream whose reader stopped reading, with a valid token: it takes no write for
 * LIVE_STALLED_WRITE_TIMEOUT_MS and is cut, as an SSE stream is (the writer is the one both share,
 * src/edge/streamed-response.ts), so it holds neither its socket nor its place among the caller's
 * running subscriptions until its token expires. The reader is Node's HTTP client, paused, so the
 * kernel's buffers fill as on a stalled network.
 */
import http from 'node:http';
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { APOLLO_SUBSCRIPTION_ACCEPT } from '../support/harness/multipart-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { liveGauges, STALLING_ENV, topUps, WIDE_SUBSCRIPTION } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken } from '../support/tokens.ts';

const stack = useStack({ env: { ...STALLING_ENV, LIVE_STALLED_WRITE_TIMEOUT_MS: '2000' } });

/** Events made while the reader is stalled: far more than the sockets' buffers hold. */
const TOP_UPS = 40;

const multipartGauges = () => liveGauges(stack, 'multipart');

describe('multipart streams whose reader stopped reading, with a valid token', () => {
  test(
    'a stream that takes no write for LIVE_STALLED_WRITE_TIMEOUT_MS is cut, and its subscription ends',
    { timeout: 120_000 },
    async () => {
      const token = await issuerSignedToken({
        sub: 'stalled-multipart-reader',
        exp: Math.floor(Date.now() / 1000) + 3600,
      });
      const request = http.request(stack.graphqlUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: APOLLO_SUBSCRIPTION_ACCEPT,
          authorization: `Bearer ${token}`,
        },
      });
      request.end(JSON.stringify({ query: WIDE_SUBSCRIPTION }));
      const [response] = (await once(request, 'response')) as [http.IncomingMessage];
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^multipart\/mixed/);
      response.pause();
      await stack.subscriptionsStarted(1);
      // Counted under its transport before the stall, so a cut seen below is this stream's.
      expect(await multipartGauges()).toEqual({ connections: 1, subscriptions: 1 });
      try {
        await topUps(stack, TOP_UPS);
        let gauges = await multipartGauges();
        await waitFor(
          () => gauges.connections === 0,
          'the stalled multipart stream to be cut',
          20_000,
          async () => {
            gauges = await multipartGauges();
          },
        );
        expect((await multipartGauges()).subscriptions).toBe(0);
      } finally {
        response.destroy();
        await stack.subscriptionsCompleted(1);
      }
    },
  );
});
