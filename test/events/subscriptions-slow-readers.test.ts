/**
 * Readers that stop reading, over every live transport: the facade writes a result only once the
 * socket took the previous one, and reads nothing ahead of it, so a stalled reader's events wait in
 * its bounded subscriber queue, whose overflow policy applies (docs/events.md): once the socket's
 * buffers and the queue are full it is handed `SUBSCRIPTION_OVERFLOW` and completed, while a
 * reader that keeps up gets every event. The readers are real clients whose reads are paused
 * (Node's HTTP client for SSE and multipart, the `ws` client for graphql-ws), so the kernel's buffers fill as
 * they would for a client on a stalled network. Memory is measured in bench/slow-readers.ts.
 */
import http from 'node:http';
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { parseExposition, valueOf } from '../support/metrics.ts';
import { useStack } from '../support/harness/stack.ts';
import { STALLING_ENV, topUps, WIDE_SUBSCRIPTION } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const QUEUE_LIMIT = 4;
/**
 * Events made while the readers are stalled: at about 300 KiB each, far more than the sockets'
 * buffers and the queue hold between them.
 */
const TOP_UPS = 60;

const stack = useStack({
  env: {
    ...STALLING_ENV,
    SUBSCRIPTION_QUEUE_LIMIT: String(QUEUE_LIMIT),
    GRAPHQL_WS_MAX_PAYLOAD_BYTES: '262144',
  },
});

interface Overflow {
  message: string;
  extensions: { code: string; limit: number; dropped: number; resumeAfter?: string };
}

/** An SSE stream read by Node's HTTP client, paused from its first byte until `resume()`. */
async function stalledSseReader(authorization: string) {
  const request = http.request(`${stack.facadeUrl}/graphql/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization },
  });
  request.end(JSON.stringify({ query: WIDE_SUBSCRIPTION }));
  const [response] = (await once(request, 'response')) as [http.IncomingMessage];
  response.pause();
  let text = '';
  const ended = new Promise<void>((resolve) => {
    response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    response.once('end', resolve);
  });
  response.pause();
  return {
    status: response.statusCode,
    resume: () => response.resume(),
    ended,
    /** Every message received, as `{ event, id?, data }`. */
    messages: () =>
      text
        .split('\n\n')
        .filter((block) => block.includes('event: '))
        .map((block) => {
          const lines = block.split('\n');
          const field = (name: string) =>
            lines
              .find((line) => line.startsWith(`${name}:`))
              ?.slice(name.length + 1)
              .trim();
          const data = field('data');
          return {
            event: field('event'),
            id: field('id'),
            data: data === undefined || data === '' ? null : (JSON.parse(data) as Record<string, unknown>),
          };
        }),
  };
}

/** A multipart subscription read by Node's HTTP client, paused from its first byte until `resume()`. */
async function stalledMultipartReader(authorization: string) {
  const request = http.request(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json;q=0.9',
      authorization,
    },
  });
  request.end(JSON.stringify({ query: WIDE_SUBSCRIPTION }));
  const [response] = (await once(request, 'response')) as [http.IncomingMessage];
  response.pause();
  let text = '';
  const ended = new Promise<void>((resolve) => {
    response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    response.once('end', resolve);
  });
  response.pause();
  return {
    status: response.statusCode,
    resume: () => response.resume(),
    ended,
    closed: () => text.endsWith('\r\n--graphql--\r\n'),
    /** Every part's JSON body, heartbeats (`{}`) left out. */
    parts: () =>
      text
        .split('\r\n--graphql')
        .map((chunk) => chunk.slice(chunk.indexOf('\r\n\r\n') + 4))
        .filter((body) => body.startsWith('{') && body !== '{}')
        .map((body) => JSON.parse(body) as { payload: Record<string, unknown> | null; errors?: unknown[] }),
  };
}

/** A graphql-ws subscription over the `ws` client whose socket is paused once it subscribed. */
async function stalledWebSocketReader(authorization: string) {
  const socket = new WebSocket(stack.graphqlUrl.replace(/^http/, 'ws'), 'graphql-transport-ws');
  await once(socket, 'open');
  const messages: { type: string; payload?: Record<string, unknown> }[] = [];
  socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8')) as never));
  socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization } }));
  await waitFor(() => messages.some((message) => message.type === 'connection_ack'), 'the ack');
  socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: WIDE_SUBSCRIPTION } }));
  socket.pause();
  return {
    resume: () => socket.resume(),
    messages,
    close: () => socket.close(),
  };
}

/** The overflow notice a stalled reader gets after the events it had been handed. */
function expectOverflowAfter(nexts: readonly Record<string, unknown>[], topUps: number): Overflow {
  const delivered = nexts.filter((payload) => payload['data'] !== undefined && payload['data'] !== null);
  const last = nexts.at(-1) as { errors?: Overflow[] } | undefined;
  expect(last?.errors?.map((error) => error.extensions.code)).toEqual(['SUBSCRIPTION_OVERFLOW']);
  const overflow = last!.errors![0]!;
  expect(overflow.extensions.limit).toBe(QUEUE_LIMIT);
  expect(overflow.extensions.dropped).toBeGreaterThan(0);
  // Nothing was held for it beyond its queue and the sockets' buffers: what it was handed and what
  // was dropped are at most what happened, and it was not handed everything.
  expect(delivered.length).toBeGreaterThan(0);
  expect(delivered.length).toBeLessThan(topUps);
  expect(delivered.length + overflow.extensions.dropped).toBeLessThanOrEqual(topUps);
  return overflow;
}

describe('readers that stop reading', () => {
  test(
    'two stalled SSE readers are handed SUBSCRIPTION_OVERFLOW and completed; a reader that keeps up gets every event',
    { timeout: 120_000 },
    async () => {
      const authorization = `Bearer ${await tokenFor('operator')}`;
      const readers = [await stalledSseReader(authorization), await stalledSseReader(authorization)];
      expect(readers.map((reader) => reader.status)).toEqual([200, 200]);
      const fast = stack.connect().subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId }
      }`);
      await stack.subscriptionsStarted(3);

      const made = await topUps(stack, TOP_UPS);
      await waitFor(() => fast.data.length === made, 'the reader that keeps up to get every top-up');
      // The stalled streams are still open, their next results waiting on the sockets.
      const samples = parseExposition(await stack.facade.app.metrics.registry.metrics());
      expect(valueOf(samples, 'facade_live_connections', { transport: 'sse' })).toBe(2);
      expect(valueOf(samples, 'facade_live_subscriptions', { transport: 'sse' })).toBe(2);

      for (const reader of readers) reader.resume();
      await Promise.all(readers.map((reader) => reader.ended));
      for (const reader of readers) {
        const messages = reader.messages();
        expect(messages.at(-1)?.event).toBe('complete');
        const nexts = messages.filter((message) => message.event === 'next');
        expectOverflowAfter(
          nexts.map((message) => message.data!),
          made,
        );
        // Each result made from an event carries its cursor as the SSE id, though none selects it.
        const withData = nexts.filter((message) => message.data?.['data'] != null);
        for (const message of withData) expect(message.id).toMatch(/^\d+-\d+$/);
      }
      await stack.subscriptionsCompleted(2);
      expect(
        valueOf(
          parseExposition(await stack.facade.app.metrics.registry.metrics()),
          'facade_subscriber_queue_overflows_total',
        ),
      ).toBe(2);
      expect(fast.completed).toBe(false);
      fast.stop();
      await stack.subscriptionsCompleted(1);
    },
  );

  test(
    'a stalled multipart reader is handed SUBSCRIPTION_OVERFLOW in a final part and the stream is closed',
    { timeout: 120_000 },
    async () => {
      const authorization = `Bearer ${await tokenFor('operator')}`;
      const reader = await stalledMultipartReader(authorization);
      expect(reader.status).toBe(200);
      const fast = stack.connect().subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId }
      }`);
      await stack.subscriptionsStarted(2);

      const made = await topUps(stack, TOP_UPS);
      await waitFor(() => fast.data.length === made, 'the reader that keeps up to get every top-up');
      const samples = parseExposition(await stack.facade.app.metrics.registry.metrics());
      expect(valueOf(samples, 'facade_live_connections', { transport: 'multipart' })).toBe(1);
      expect(valueOf(samples, 'facade_live_subscriptions', { transport: 'multipart' })).toBe(1);

      reader.resume();
      await reader.ended;
      expect(reader.closed()).toBe(true);
      const parts = reader.parts();
      // The overflow ends the subscription: the protocol's final part, `payload: null` with the errors.
      expect(parts.at(-1)?.payload).toBeNull();
      expectOverflowAfter(
        parts.map((part) => part.payload ?? { errors: part.errors }),
        made,
      );
      // Each result made from an event carries its cursor beside it, though none selects it.
      for (const part of parts.slice(0, -1)) {
        expect((part.payload?.['extensions'] as { cursor?: string } | undefined)?.cursor).toMatch(
          /^\d+-\d+$/,
        );
      }
      await stack.subscriptionsCompleted(1);
      expect(fast.completed).toBe(false);
      fast.stop();
      await stack.subscriptionsCompleted(1);
    },
  );

  test(
    'a stalled graphql-ws reader is handed SUBSCRIPTION_OVERFLOW and completed',
    { timeout: 120_000 },
    async () => {
      const authorization = `Bearer ${await tokenFor('operator')}`;
      const reader = await stalledWebSocketReader(authorization);
      const fast = stack.connect().subscribe(`subscription {
        accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId }
      }`);
      await stack.subscriptionsStarted(2);

      const made = await topUps(stack, TOP_UPS);
      await waitFor(() => fast.data.length === made, 'the reader that keeps up to get every top-up');
      reader.resume();
      await waitFor(
        () => reader.messages.some((message) => message.type === 'complete'),
        'the stalled reader to be completed',
      );
      const nexts = reader.messages
        .filter((message) => message.type === 'next')
        .map((message) => message.payload!);
      expectOverflowAfter(nexts, made);
      await stack.subscriptionsCompleted(1);
      expect(fast.completed).toBe(false);
      fast.stop();
      reader.close();
    },
  );
});
