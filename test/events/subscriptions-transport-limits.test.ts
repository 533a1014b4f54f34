/**
 * graphql-ws under abuse: oversized messages, too many operations on one connection, a connection
 * that never initialises, and the documents HTTP refuses. Each is refused the way the protocol
 * says, before any upstream call, and the connection (or the facade) keeps serving.
 */
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { fragmentFanOut, nestedSelections } from '../support/hostile-documents.ts';
import { tokenFor } from '../support/tokens.ts';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack({
  env: {
    GRAPHQL_WS_MAX_PAYLOAD_BYTES: '4096',
    GRAPHQL_WS_MAX_SUBSCRIPTIONS: '3',
    GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS: '300',
  },
});

async function upstreamTotal(): Promise<number> {
  const counts = (await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json()) as {
    total: number;
  };
  return counts.total;
}

/** A raw graphql-transport-ws socket, acknowledged (unless `init` is false). */
async function openRawSocket(init = true): Promise<{
  socket: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
}> {
  const socket = new WebSocket(stack.facade.wsUrl, 'graphql-transport-ws');
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    socket.addEventListener('close', (event) => resolve({ code: event.code, reason: event.reason }));
  });
  await once(socket as unknown as EventTarget, 'open');
  if (init) {
    const acknowledged = new Promise<void>((resolve) => {
      socket.addEventListener('message', function onMessage(event) {
        if ((JSON.parse(String(event.data)) as { type: string }).type === 'connection_ack') {
          socket.removeEventListener('message', onMessage);
          resolve();
        }
      });
    });
    socket.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { Authorization: `Bearer ${await tokenFor('operator')}` },
      }),
    );
    await acknowledged;
  }
  return { socket, closed };
}

describe('graphql-ws transport limits', () => {
  test('a message over the size limit closes the connection with 1009, before anything runs', async () => {
    const { socket, closed } = await openRawSocket();
    const before = await upstreamTotal();

    socket.send(
      JSON.stringify({
        id: '1',
        type: 'subscribe',
        payload: {
          query: `subscription { accountChanged(customerId: "cus_acme") { account { id } } } #${'x'.repeat(5000)}`,
        },
      }),
    );

    expect((await closed).code).toBe(1009);
    expect(await upstreamTotal()).toBe(before);
  });

  test('a connection that never sends connection_init is closed with 4408', async () => {
    const { closed } = await openRawSocket(false);

    expect(await closed).toEqual({ code: 4408, reason: 'Connection initialisation timeout' });
  });

  test('one operation more than a connection may run is refused; the others keep running', async () => {
    const live = stack.connect();
    const query = 'subscription { accountChanged(customerId: "cus_acme") { account { id } } }';
    const running = [live.subscribe(query), live.subscribe(query), live.subscribe(query)];
    await stack.subscriptionsStarted(3);

    const refused = live.subscribe(query);
    await refused.done;

    expect(refused.errors.flat()).toEqual([
      expect.objectContaining({
        message:
          'This connection already runs 3 operations, the most one connection may run. Complete one first, or open another connection.',
        extensions: { code: 'TOO_MANY_SUBSCRIPTIONS', maxSubscriptions: 3 },
      }),
    ]);
    expect(running.map((subscription) => subscription.completed)).toEqual([false, false, false]);

    // Completing one makes room for another on the same connection.
    running[0]!.stop();
    const another = live.subscribe(query);
    await stack.subscriptionsStarted(1);
    expect(another.errors).toEqual([]);
    for (const subscription of [...running.slice(1), another]) subscription.stop();
  });
});

describe('graphql-ws refuses what HTTP refuses', () => {
  test('a fan-out of 20 fragment levels is refused by its cost, with no upstream call', async () => {
    const live = stack.connect();
    const before = await upstreamTotal();
    const fragments = fragmentFanOut(20).split('\n').slice(1).join('\n');
    const received = live.subscribe(
      `subscription FanOut { accountChanged(customerId: "cus_acme") { account { customer { ...F0 } } } }\n${fragments}`,
    );
    await received.done;

    expect(received.errors.flat()[0]).toMatchObject({
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', cost: 2 ** 20 * 2 + 3, maxCost: 5000 },
    });
    // The connection's own key check is the only call.
    expect((await upstreamTotal()) - before).toBeLessThanOrEqual(1);
  });

  test('a document over the token limit is GRAPHQL_PARSE_FAILED', async () => {
    const live = stack.connect();
    const received = live.subscribe(`subscription ${nestedSelections(600)}`);
    await received.done;

    expect(received.errors.flat()).toEqual([
      expect.objectContaining({
        message: 'Syntax Error: Document contains more that 1000 tokens. Parsing aborted.',
        extensions: { code: 'GRAPHQL_PARSE_FAILED' },
      }),
    ]);
  });

  test('a lone surrogate in a variable is BAD_USER_INPUT', async () => {
    const live = stack.connect();
    const received = live.subscribe(
      'subscription ($id: ID!) { accountChanged(customerId: $id) { account { id } } }',
      { id: '\udfffcus' },
    );
    await received.done;

    expect(received.errors.flat()).toEqual([
      expect.objectContaining({
        message: 'Variable "$id" holds a lone UTF-16 surrogate; strings must be well-formed Unicode.',
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
  });

  test('an empty ID literal is BAD_USER_INPUT, as over HTTP, every time it is sent', async () => {
    const live = stack.connect();
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const received = live.subscribe('subscription { accountChanged(customerId: "") { account { id } } }');
      await received.done;
      expect(received.errors.flat()).toEqual([
        expect.objectContaining({
          message: 'An ID in argument "customerId" is empty; no id is empty.',
          extensions: { code: 'BAD_USER_INPUT' },
        }),
      ]);
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
