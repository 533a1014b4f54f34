/**
 * A shutdown never closes a kept-alive connection under a request its client may be sending: the
 * race that made a gateway answer INTERNAL_SERVER_ERROR ("socket hang up" at the gateway) during a
 * rolling restart (docs/operations.md, "Shutdown"). With a real Node client keeping its connection
 * alive, as Hive Gateway's fetch does: a request sent on it after the shutdown began is answered,
 * on that same connection, with `Connection: close`; a connection its client leaves idle is closed
 * only once idle for `SHUTDOWN_IDLE_RELEASE_MS`; and `/readyz` answers 503 `draining` meanwhile.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

/** A POST of a query on `agent`; its status, `Connection` header and the socket it went on. */
async function post(
  url: string,
  agent: http.Agent,
  authorization: string,
): Promise<{ status: number; connection: string | undefined; socket: Socket }> {
  const body = JSON.stringify({ query: '{ __typename }' });
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          authorization,
        },
      },
      (response) => {
        response.resume();
        response.once('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            connection: response.headers.connection,
            socket: request.socket!,
          }),
        );
      },
    );
    request.once('error', reject);
    request.end(body);
  });
}

describe('a shutdown with a client keeping its connection alive', () => {
  const stack = useStack({ env: { SHUTDOWN_IDLE_RELEASE_MS: '3000' } });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  afterAll(() => agent.destroy());

  test('a request sent on it after the shutdown began is answered on it, closing it; /readyz says draining', async () => {
    const { authorization } = await bearer('acme');
    const first = await post(stack.graphqlUrl, agent, authorization);
    expect(first.status).toBe(200);
    expect(first.connection).toBe('keep-alive');

    const closing = stack.app.close();
    // Past the live transports' drain, where the server used to close every idle connection.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const readiness = await fetch(`${stack.facadeUrl}/readyz`);
    expect(readiness.status).toBe(503);
    expect(await readiness.json()).toEqual({ status: 'draining' });
    expect(readiness.headers.get('connection')).toBe('close');

    const second = await post(stack.graphqlUrl, agent, authorization);
    expect(second.status).toBe(200);
    expect(second.connection).toBe('close');
    // The same connection: the client reused it, and it was there to be reused.
    expect(second.socket).toBe(first.socket);
    await closing;
  });
});

describe('a shutdown with a client that leaves its connection idle', () => {
  const stack = useStack({ env: { SHUTDOWN_IDLE_RELEASE_MS: '1500' } });
  // Keeps an idle connection for a minute, past the server's advertised time: only the server ends it.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1, timeout: 60_000 });
  afterAll(() => agent.destroy());

  test('closes it once idle for SHUTDOWN_IDLE_RELEASE_MS, then the drain ends', async () => {
    const { authorization } = await bearer('acme');
    const { status, socket } = await post(stack.graphqlUrl, agent, authorization);
    expect(status).toBe(200);
    // The server's hint would make this client drop it after 4 s: it is told nothing here.
    socket.setTimeout(0);
    const idleSince = performance.now();
    const ended = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));

    const closing = stack.app.close();
    const closedAt = await ended;
    expect(closedAt - idleSince).toBeGreaterThanOrEqual(1_400);
    await closing;
    expect(performance.now() - idleSince).toBeLessThan(10_000);
  });
});
