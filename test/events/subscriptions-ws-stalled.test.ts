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
import { parseExposition, valueOf } from '../support/metrics.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken } from '../support/tokens.ts';

const stack = useStack({
  env: {
    WEBHOOK_REGISTER: 'true',
    SUBSCRIPTION_QUEUE_LIMIT: '4',
    // A wide selection, so that a few events fill the sockets' buffers (about 150 KiB each).
    QUERY_MAX_ALIASES: '10000',
    QUERY_MAX_TOKENS: '5000',
    QUERY_MAX_COST: '100000000',
    GRAPHQL_WS_MAX_PAYLOAD_BYTES: '262144',
    // A stalled-write deadline of two seconds; keep-alive pings five minutes apart.
    LIVE_STALLED_WRITE_TIMEOUT_MS: '2000',
    GRAPHQL_WS_KEEP_ALIVE_MS: '300000',
  },
});

const WIDE_LABELS = Array.from({ length: 200 }, (_, i) => `l${i}: label`).join(' ');
const WIDE_ACCOUNTS = Array.from({ length: 45 }, (_, i) => `a${i}: account { ...Wide }`).join(' ');
const WIDE = `subscription Wide {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId ${WIDE_ACCOUNTS} }
}
fragment Wide on Account { ${WIDE_LABELS} }`;

/** Events made while the reader is stalled: far more than the sockets' buffers hold. */
const TOP_UPS = 40;

const webSocketGauges = async () => {
  const samples = parseExposition(await stack.facade.app.metrics.registry.metrics());
  return {
    connections: valueOf(samples, 'facade_live_connections', { transport: 'graphql-ws' }),
    subscriptions: valueOf(samples, 'facade_live_subscriptions', { transport: 'graphql-ws' }),
  };
};

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
      socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: WIDE } }));
      await stack.subscriptionsStarted(1);
      socket.pause();
      try {
        for (let made = 0; made < TOP_UPS; made += 1) {
          const topUp = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
            body: { amount: '1.00', currency: 'USDC' },
          });
          expect(topUp.status).toBe(200);
        }
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
