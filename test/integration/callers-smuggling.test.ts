/**
 * Requests that try to slip past the caller check by being read differently by the check and by
 * Apollo Server: GET URLs Apollo parses otherwise than express, persisted queries named by hash
 * alone, and graphql-ws connections from an address that has failed to authenticate too often;
 * and a flood of the one route that reaches the upstream without a token, readiness. Real tokens,
 * real HTTP and WebSockets, and the emulator's request counter.
 */
import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { WebSocket as WsClient } from 'ws';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

const INTROSPECTION = '{ __schema { queryType { name } } }';

/** A GET of `/graphql` as a script would send it: any content type, and Apollo's CSRF header. */
function getGraphQL(url: string, search: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}?${search}`, {
    headers: { accept: '*/*', 'apollo-require-preflight': 'true', ...headers },
  });
}

describe('an anonymous GET', () => {
  const stack = useStack();

  test('cannot hide its operation behind 1000 other URL parameters', async () => {
    const padding = Array.from({ length: 1000 }, (_, index) => `p${index}=`).join('&');
    const response = await getGraphQL(
      stack.graphqlUrl,
      `${padding}&query=${encodeURIComponent(`${INTROSPECTION.slice(0, -1)} customer(id: "cus_acme") { id } }`)}`,
    );

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect(await response.json()).toEqual({
      errors: [
        {
          message: 'Authentication required: send a valid access token as "Authorization: Bearer <token>".',
          extensions: { code: 'UNAUTHENTICATED' },
        },
      ],
    });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('cannot run a persisted query a caller registered, by naming its hash alone', async () => {
    const sha256Hash = createHash('sha256').update(INTROSPECTION).digest('hex');
    const extensions = { persistedQuery: { version: 1, sha256Hash } };
    const registered = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('acme')) },
      body: JSON.stringify({ query: INTROSPECTION, extensions }),
    });
    expect(await registered.json()).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });

    const anonymous = await getGraphQL(
      stack.graphqlUrl,
      `extensions=${encodeURIComponent(JSON.stringify(extensions))}`,
    );
    const withToken = await getGraphQL(
      stack.graphqlUrl,
      `extensions=${encodeURIComponent(JSON.stringify(extensions))}`,
      await bearer('acme'),
    );

    expect(anonymous.status).toBe(401);
    expect(JSON.stringify(await anonymous.json())).not.toContain('__schema');
    expect(await withToken.json()).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });

  test('a browser still gets the Sandbox page, and a gateway still reads _service by GET', async () => {
    const page = await fetch(stack.graphqlUrl, { headers: { accept: 'text/html' } });
    const sdl = await getGraphQL(stack.graphqlUrl, `query=${encodeURIComponent('{ _service { sdl } }')}`);

    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(sdl.status).toBe(200);
    expect(JSON.stringify(await sdl.json())).toContain('type Customer');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

/** Opens graphql-ws with `payload` in `connection_init`: the upgrade's refusal status, the ack, or the close code. */
function connectGraphQLWs(
  url: string,
  payload: Record<string, unknown>,
): Promise<{ upgradeStatus: number } | { acknowledged: true } | { closeCode: number }> {
  return new Promise((resolve, reject) => {
    const socket = new WsClient(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    socket.once('unexpected-response', (_request, response) => {
      resolve({ upgradeStatus: response.statusCode ?? 0 });
      socket.terminate();
    });
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload })));
    socket.on('message', (data) => {
      if ((JSON.parse(String(data)) as { type?: string }).type !== 'connection_ack') return;
      resolve({ acknowledged: true });
      socket.close();
    });
    socket.once('close', (code) => resolve({ closeCode: code }));
    socket.once('error', (error) => {
      if (!('code' in error)) reject(error);
    });
  });
}

describe('an address over its failed-authentication budget', () => {
  const stack = useStack({ env: { RATE_LIMIT_FAILED_AUTH: '2', AUTH_ALLOW_CALLER_API_KEY: 'true' } });

  test('refuses its failing attempts over graphql-ws as over HTTP without an upstream call, and serves a good token', async () => {
    // A caller's own key, checked once with the upstream before the address's failures.
    expect((await stack.queryWithKey(SANDBOX_KEY, '{ __typename }')).status).toBe(200);
    await stack.resetUpstreamCalls();
    const bad = { authorization: 'Bearer not.a.token' };
    expect((await stack.query('{ __typename }', undefined, bad)).status).toBe(401);
    expect((await stack.query('{ __typename }', undefined, bad)).status).toBe(401);
    expect((await stack.query('{ __typename }', undefined, bad)).status).toBe(429);

    // A guessed platform key would cost a capability discovery each, and answer whether it is valid:
    // from an address over its budget it is refused unchecked.
    const guess = await connectGraphQLWs(stack.graphqlUrl, { 'X-API-Key': 'sk_sandbox_guess_1' });
    expect(guess).toEqual({ closeCode: 1013 });
    expect((await stack.upstreamCalls()).total).toBe(0);

    // A credential that verifies is never refused for the address's failures, over either transport.
    expect((await stack.queryAs('acme', '{ __typename }')).status).toBe(200);
    expect((await stack.queryWithKey(SANDBOX_KEY, '{ __typename }')).status).toBe(200);
    expect(await connectGraphQLWs(stack.graphqlUrl, await bearer('acme'))).toEqual({ acknowledged: true });
  });
});

describe('a flood of anonymous readiness probes', () => {
  // The probe's deadline above the upstream's slowness here, so every probe waits for the one call.
  const stack = useStack({ env: { READINESS_UPSTREAM_DEADLINE_MS: '5000' } });

  test('costs the upstream one call at a time, and every probe still gets the answer', async () => {
    // A slow upstream: every probe of the flood arrives while the first discovery is under way.
    await stack.setFaults({ latency: { fixedMs: 1_000, jitterMs: 0 } });
    const probes = await Promise.all(Array.from({ length: 20 }, () => fetch(`${stack.facadeUrl}/readyz`)));

    expect(probes.map((probe) => probe.status)).toEqual(Array.from({ length: 20 }, () => 200));
    expect(await probes[19]!.json()).toEqual({
      status: 'ready',
      upstream: { reachable: true, environment: 'sandbox' },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });
});
