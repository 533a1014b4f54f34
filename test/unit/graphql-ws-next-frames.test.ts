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
import { waitFor } from '../support/harness/wait.ts';

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

/** The server side's writes reaching its TCP socket: `_write` calls (one buffer) and `_writev` calls (several). */
function countSocketWrites(server: WebSocket): { single: number; vectored: number } {
  const connection = (server as unknown as { _socket: Record<string, (...args: unknown[]) => unknown> })
    ._socket;
  const counts = { single: 0, vectored: 0 };
  const write = connection._write!.bind(connection);
  const writev = connection._writev!.bind(connection);
  connection._write = (...args: unknown[]) => {
    counts.single += 1;
    return write(...args);
  };
  connection._writev = (...args: unknown[]) => {
    counts.vectored += 1;
    return writev(...args);
  };
  return counts;
}

test("one turn's frames to a connection's several subscriptions reach its socket in one write, in order", async () => {
  const { server, received } = await connected(true);
  const writers = nextMessages(formatting);
  const subscriptions = ['a', 'b', 'c', 'd', 'e'].map((id) => writers(server, id));
  const counts = countSocketWrites(server);
  const result: ExecutionResult = { data: { balance: '10.00' } };
  // One event's result to the five, back to back in one turn, as a slice of the delivery writes them.
  const written = subscriptions.map((write) => write(result));
  expect(written).toEqual([true, true, true, true, true]);
  await waitFor(() => received.length === 5, 'the five frames');
  expect(counts).toEqual({ single: 0, vectored: 1 });
  expect(received.map((message) => (JSON.parse(message) as { id: string }).id)).toEqual([
    'a',
    'b',
    'c',
    'd',
    'e',
  ]);
  // A turn with one frame writes it alone.
  const alone = subscriptions[0]!(result);
  expect(alone).toBe(true);
  await waitFor(() => received.length === 6, 'the frame written alone');
  expect(counts).toEqual({ single: 1, vectored: 1 });
});

test('a frame written behind a backlog, or beyond what the socket holds, waits for the socket to take it', async () => {
  const { server, received } = await connected(true);
  const writers = nextMessages(formatting);
  const large: ExecutionResult = { data: { text: 'x'.repeat(16 * 1024 * 1024) } };
  // Larger than the socket's high-water mark: not taken whole, so its stream waits for the callback.
  const first = writers(server, 'big')(large);
  expect(first).toBeInstanceOf(Promise);
  // Another subscription's frame in a later turn, while the socket still holds the first: it waits too.
  await new Promise((resolve) => setImmediate(resolve));
  expect(server.bufferedAmount).toBeGreaterThan(0);
  const second = writers(server, 'small')({ data: { a: 1 } });
  expect(second).toBeInstanceOf(Promise);
  await Promise.all([first, second]);
  await waitFor(() => received.length === 2, 'both frames');
  expect(received.map((message) => (JSON.parse(message) as { id: string }).id)).toEqual(['big', 'small']);
});
