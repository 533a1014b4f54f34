/**
 * A graphql-ws connection that carries two credentials: one in the upgrade request's
 * `Authorization` header, another in `connection_init`. The facade verifies and acts on the one in
 * `connection_init` (as the gateway's configuration, deploy/gateway.config.ts, does too), never a
 * mix of both: an operator's token on the upgrade lends a customer's connection nothing, and a
 * `connection_init` credential that is bad is refused, not replaced by the header's good one.
 */
import { describe, expect, test } from 'vitest';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

const stack = useStack();

interface Opened {
  messages: { type: string; id?: string; payload?: unknown }[];
  closed: Promise<number>;
  send(message: unknown): void;
  close(): void;
}

/** A socket upgraded with `authorization`, then initialised with `payload`. */
async function open(authorization: string, payload: Record<string, unknown>): Promise<Opened> {
  const socket = new WebSocket(stack.facade.wsUrl, {
    protocols: 'graphql-transport-ws',
    headers: { authorization },
  } as unknown as string[]);
  const messages: Opened['messages'] = [];
  socket.addEventListener('message', (event) => messages.push(JSON.parse(String(event.data)) as never));
  const closed = new Promise<number>((resolve) =>
    socket.addEventListener('close', (event) => resolve(event.code)),
  );
  await new Promise((resolve) => socket.addEventListener('open', resolve));
  socket.send(JSON.stringify({ type: 'connection_init', payload }));
  return {
    messages,
    closed,
    send: (message) => socket.send(JSON.stringify(message)),
    close: () => socket.close(),
  };
}

describe('two credentials on one graphql-ws connection', () => {
  test('an operator’s token on the upgrade and a customer’s in connection_init: the connection is the customer’s', async () => {
    await stack.resetUpstreamCalls();
    const socket = await open(`Bearer ${await tokenFor('operator')}`, {
      Authorization: `Bearer ${await tokenFor('acme')}`,
    });
    await waitFor(() => socket.messages.some((message) => message.type === 'connection_ack'), 'the ack');
    socket.send({
      id: 'other',
      type: 'subscribe',
      payload: { query: 'subscription { accountChanged(customerId: "cus_globex") { accountId } }' },
    });
    await waitFor(
      () => socket.messages.some((message) => message.id === 'other' && message.type !== 'next'),
      'the other customer’s subscription to end',
    );
    const answered = JSON.stringify(socket.messages.filter((message) => message.id === 'other'));
    expect(answered).toContain('NOT_FOUND');
    expect(answered).not.toContain('acc_globex');
    // No read of the other customer: at most the facade key's environment, learnt once.
    const { byRoute } = await stack.upstreamCalls();
    expect(
      Object.keys(byRoute).filter((route) => route !== 'GET /v3/capabilities' && byRoute[route]! > 0),
    ).toEqual([]);
    socket.close();
    await socket.closed;
  });

  test.each([
    [
      'an expired token',
      async () =>
        `Bearer ${await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) - 600, iat: Math.floor(Date.now() / 1000) - 900 })}`,
    ],
    ['a value that is not a string', async () => 42],
    ['a token that is not a JWT', async () => 'Bearer not.a.token'],
  ])(
    '%s in connection_init with a valid token on the upgrade: 4401, the header not used instead',
    async (_name, init) => {
      const socket = await open(`Bearer ${await tokenFor('operator')}`, { Authorization: await init() });
      expect(await socket.closed).toBe(4401);
      expect(socket.messages.some((message) => message.type === 'connection_ack')).toBe(false);
    },
  );
});
