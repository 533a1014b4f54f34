/**
 * A graphql-ws reader that stops reading, with a valid token: graphql-ws sends a result only once
 * the socket took the previous one, so its events wait in its bounded subscriber queue (the overflow
 * itself is in subscriptions-slow-readers.test.ts); a socket that takes no write for
 * LIVE_STALLED_WRITE_TIMEOUT_MS is cut, as an SSE stream is (subscriptions-sse-expiry-stalled.test.ts),
 * so it holds neither its socket nor its subscription slot. The reader is the `ws` client, its
 * socket paused, so the kernel's buffers fill as on a stalled network. The keep-alive pings, which
 * would cut it too once a pong is missed, are set far off: only the write deadline cuts it here.
 */
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { useStack } from '../support/harness/stack.ts';
import { liveGauges, STALLING_ENV, topUps, WIDE_SUBSCRIPTION } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken } from '../support/tokens.ts';

const stack = useStack({
  env: {
    ...STALLING_ENV,
    GRAPHQL_WS_MAX_PAYLOAD_BYTES: '262144',
    // A stalled-write deadline of two seconds; keep-alive pings five minutes apart.
    LIVE_STALLED_WRITE_TIMEOUT_MS: '2000',
    GRAPHQL_WS_KEEP_ALIVE_MS: '300000',
  },
});

/** Events made while the reader is stalled: far more than the sockets' buffers hold. */
const TOP_UPS = 40;

const webSocketGauges = () => liveGauges(stack, 'graphql-ws');

describe('graphql-ws sockets whose reader stopped reading, with a valid token', () => {
  test(
    'a socket that takes no write for LIVE_STALLED_WRITE_TIMEOUT_MS is cut, and its subscription ends',
    { timeout: 120_000 },
    async () => {
      const token = await issuerSignedToken({
        sub: 'stalled-websocket-reader',
        exp: Math.floor(Date.now() / 1000) + 3600,
      });
      const socket = new WebSocket(stack.graphqlUrl.replace(/^http/, 'ws'), 'graphql-transport-ws');
      await once(socket, 'open');
      const types: string[] = [];
      socket.on('message', (data: Buffer) =>
        types.push((JSON.parse(data.toString('utf8')) as { type: string }).type),
      );
      const closed = new Promise<number>((resolve) => socket.once('close', (code: number) => resolve(code)));
      socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }));
      await waitFor(() => types.includes('connection_ack'), 'the ack');
      socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: WIDE_SUBSCRIPTION } }));
      await stack.subscriptionsStarted(1);
      socket.pause();
      // Counted under its transport before the stall, so a cut seen below is this stream's.
      expect(await webSocketGauges()).toEqual({ connections: 1, subscriptions: 1 });
      try {
        await topUps(stack, TOP_UPS);
        let gauges = await webSocketGauges();
        await waitFor(
          () => gauges.connections === 0,
          'the stalled socket to be cut',
          20_000,
          async () => {
            gauges = await webSocketGauges();
          },
        );
        expect((await webSocketGauges()).subscriptions).toBe(0);
        await stack.subscriptionsCompleted(1);
        // Cut, not closed: no close frame could reach a reader that reads nothing.
        socket.resume();
        expect(await closed).toBe(1006);
        // It never got to the end of what was made for it: it was cut, not served.
        expect(types.filter((type) => type === 'next').length).toBeLessThan(TOP_UPS);
      } finally {
        socket.terminate();
      }
    },
  );
});
