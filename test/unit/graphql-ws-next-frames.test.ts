/**
 * graphql-ws's `next` messages written as whole frames by the facade (`graphql-ws-next-frames.ts`)
 * rather than by `ws`: a real `ws` client must read exactly the message graphql-ws would have sent,
 * whatever the payload's length (the three length encodings of RFC 6455) and its characters
 * (a length in bytes, not in UTF-16 units), on a socket the facade holds to its stalled-write
 * deadline (the straight frame write) and on one it does not (the `send` fallback).
 */
import type { AddressInfo } from 'node:net';
import { GraphQLError, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import { afterEach, expect, test } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { nextMessages } from '../../src/edge/graphql-ws-next-frames.ts';
import { cutWhenGone } from '../../src/edge/graphql-ws-socket.ts';

const servers: WebSocketServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    for (const client of server.clients) client.terminate();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A server socket and the client's received messages, over loopback. */
async function connected(
  held: boolean,
): Promise<{ server: WebSocket; received: string[]; arrived: () => Promise<void> }> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  servers.push(wss);
  await new Promise((resolve) => wss.once('listening', resolve));
  const serverSide = new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  const received: string[] = [];
  let wake: (() => void) | undefined;
  client.on('message', (data, isBinary) => {
    expect(isBinary).toBe(false);
    received.push(data.toString('utf8'));
    wake?.();
  });
  await new Promise((resolve) => client.once('open', resolve));
  const server = await serverSide;
  if (held) cutWhenGone(server, 5_000);
  return {
    server,
    received,
    arrived: () =>
      new Promise<void>((resolve) => {
        wake = resolve;
      }),
  };
}

/** As the facade's formatError does to what it must not show: the message replaced. */
const formatting = {
  formatError: (formatted: GraphQLFormattedError): GraphQLFormattedError => ({
    message: `masked: ${formatted.message}`,
  }),
};

for (const held of [true, false]) {
  test(`next frames of every length read as graphql-ws's messages (${held ? 'straight frame write' : 'send fallback'})`, async () => {
    const { server, received, arrived } = await connected(held);
    const write = nextMessages(formatting)(server, 'op-"1"');
    // 125 bytes and under, up to 65,535, and beyond: each length encoding, and multi-byte text.
    const results: ExecutionResult[] = [
      { data: { a: 1 } },
      { data: { text: 'x'.repeat(200) } },
      { data: { text: 'é€😀'.repeat(30_000) } },
      { data: null, errors: [new GraphQLError('a problem')] },
    ];
    for (const result of results) {
      const next = arrived();
      const written = write(result);
      expect(written === true || written instanceof Promise).toBe(true);
      await written;
      await next;
    }
    const expected = results.map((result) =>
      result.errors === undefined ? result : { data: null, errors: [{ message: 'masked: a problem' }] },
    );
    expect(received.map((message) => JSON.parse(message) as unknown)).toEqual(
      expected.map((payload) => ({ id: 'op-"1"', type: 'next', payload })),
    );
    // The bytes graphql-ws writes: its message object serialised, keys in its order.
    expect(received[0]).toBe(JSON.stringify({ id: 'op-"1"', type: 'next', payload: results[0] }));
  });
}
