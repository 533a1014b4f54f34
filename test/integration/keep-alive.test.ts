/**
 * A request sent on a kept-alive connection that the client's timers still call fresh is answered,
 * not reset, when the process it reaches, or the client's own, was busy meanwhile: the facade, the
 * emulator and the OpenID provider keep an idle connection 10 s past the `Keep-Alive: timeout=5`
 * they advertise (src/http/server-timeouts.ts). Here one synchronous stretch stands for a loaded
 * machine: it delays the client's idle timer, and, for the servers in this process, the server's
 * idle timer and its read of the request alike. With Node's own slack (1 s), a stretch of 7 s ends
 * in a reset: the server's expired timer runs before it reads the request, or the provider in the
 * other process has closed the connection before the client sends on it.
 */
import http from 'node:http';
import { describe, expect, inject, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack();

/** Longer than the advertised 5 s and Node's 1 s of slack, shorter than the servers' 10 s. */
const BUSY_MS = 7_000;

function busyFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // The event loop, and every timer in this process, waits.
  }
}

/** GET `url` through `agent`: its status, its Keep-Alive header, and whether a kept socket carried it. */
function get(
  url: string,
  agent: http.Agent,
): Promise<{ status: number; keepAlive: string; reusedSocket: boolean }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent }, (response) => {
      response.resume();
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          keepAlive: String(response.headers['keep-alive']),
          reusedSocket: request.reusedSocket,
        }),
      );
    });
    request.on('error', reject);
  });
}

describe('a kept-alive connection after a busy stretch', () => {
  test.each([
    ['the facade', () => `${stack.facadeUrl}/healthz`],
    ['the emulator', () => `${stack.emulator.url}/_emulator/health`],
    ['the OpenID provider', () => `${inject('issuer').issuer}/.well-known/openid-configuration`],
  ])('%s answers the request sent on it', async (_name, urlOf) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await get(urlOf(), agent);
      expect(first).toEqual({ status: 200, keepAlive: 'timeout=5', reusedSocket: false });
      busyFor(BUSY_MS);
      expect(await get(urlOf(), agent)).toEqual({ status: 200, keepAlive: 'timeout=5', reusedSocket: true });
    } finally {
      agent.destroy();
    }
  });
});
