/**
 * The edge defences on a running facade: CORS and WebSocket origins for browsers, rate limits per
 * caller and per address (shared by two replicas through the real Redis), and trusted documents.
 * Every refusal is checked to cost no upstream call.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { WebSocket as WsClient } from 'ws';
import type { RunningFacade } from '../support/harness/facade.ts';
import { type Stack, startStack, useStack } from '../support/harness/stack.ts';
import { bearer, tokenFor } from '../support/tokens.ts';

const APP_ORIGIN = 'https://app.example.com';
const CUSTOMER = '{ customer(id: "cus_acme") { id } }';

/** Opens a WebSocket with `headers` and resolves with the HTTP status of a refused upgrade, or 101. */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WsClient(url, 'graphql-transport-ws', { headers });
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once('error', (error) => {
      if (!('code' in error)) reject(error);
    });
  });
}

describe('browsers', () => {
  const stack = useStack({ env: { CORS_ORIGINS: APP_ORIGIN } });

  test('a preflight from an allowed origin is answered, without credentials', async () => {
    const response = await fetch(stack.graphqlUrl, {
      method: 'OPTIONS',
      headers: {
        origin: APP_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });

    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(response.headers.get('access-control-allow-headers')).toMatch(/authorization/);
    expect(response.headers.get('access-control-allow-credentials')).toBeNull();
  });

  test('a preflight from another origin is refused, and its request carries no CORS header', async () => {
    const preflight = await fetch(stack.graphqlUrl, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    const request = await stack.query(CUSTOMER, undefined, {
      origin: 'https://evil.example',
      ...(await bearer('acme')),
    });

    expect(preflight.status).toBe(403);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect(request.headers.get('access-control-allow-origin')).toBeNull();
  });

  test('a WebSocket from another origin is refused at the upgrade; same origin, allowed origin and no origin connect', async () => {
    const wsUrl = stack.graphqlUrl.replace(/^http/, 'ws');
    const own = new URL(stack.facadeUrl).host;

    expect(await upgradeStatus(wsUrl, { origin: 'https://evil.example' })).toBe(403);
    expect(await upgradeStatus(wsUrl, { origin: 'null' })).toBe(403);
    expect(await upgradeStatus(wsUrl, { origin: `http://${own}` })).toBe(101);
    expect(await upgradeStatus(wsUrl, { origin: APP_ORIGIN })).toBe(101);
    expect(await upgradeStatus(wsUrl, {})).toBe(101);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('rate limits', () => {
  const stack = useStack({ env: { RATE_LIMIT_REQUESTS: '3', RATE_LIMIT_FAILED_AUTH: '2' } });

  test('a caller over its budget is answered 429 with Retry-After, and the upstream is not called', async () => {
    for (let i = 0; i < 3; i += 1) expect((await stack.queryAs('acme', CUSTOMER)).status).toBe(200);
    await stack.resetUpstreamCalls();
    const refused = await stack.queryAs('acme', CUSTOMER);
    const other = await stack.queryAs('globex', '{ customer(id: "cus_globex") { id } }');

    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    // Another caller has its own budget.
    expect(other.status).toBe(200);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });
  });

  test('failed authentications have their own, stricter budget per address, which refuses only failing attempts', async () => {
    const bad = { authorization: 'Bearer not.a.token' };
    expect((await stack.query(CUSTOMER, undefined, bad)).status).toBe(401);
    expect((await stack.query(CUSTOMER, undefined, bad)).status).toBe(401);
    const third = await stack.query(CUSTOMER, undefined, bad);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).not.toBeNull();
    expect((await stack.upstreamCalls()).total).toBe(0);

    // A token that verifies is never refused for someone else's failures at the same address.
    const good = await stack.queryAs('operator', CUSTOMER);
    expect(good.status).toBe(200);
    expect(good.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });
});

describe('rate limits shared by two replicas through Redis', () => {
  let replicas: Stack;
  let first: RunningFacade;
  let second: RunningFacade;
  beforeAll(async () => {
    replicas = await startStack({ facades: 2, redis: true, env: { RATE_LIMIT_REQUESTS: '3' } });
    [first, second] = replicas.facades as [RunningFacade, RunningFacade];
  });
  afterAll(async () => {
    await replicas?.close();
  });

  test('a caller’s budget spent on one replica is spent on the other', async () => {
    expect((await first.queryAs('acme', CUSTOMER)).status).toBe(200);
    expect((await second.queryAs('acme', CUSTOMER)).status).toBe(200);
    expect((await first.queryAs('acme', CUSTOMER)).status).toBe(200);
    const refused = await second.queryAs('acme', CUSTOMER);

    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).not.toBeNull();
  });
});

describe('trusted documents', () => {
  const LISTED = 'query AcmeCustomer { customer(id: "cus_acme") { id displayName } }';
  let stack: Stack;
  beforeAll(async () => {
    const directory = await mkdtemp(join(tmpdir(), 'trusted-documents-'));
    const manifest = join(directory, 'persisted-query-manifest.json');
    await writeFile(
      manifest,
      JSON.stringify({
        format: 'apollo-persisted-query-manifest',
        version: 1,
        operations: [{ id: 'acme-customer-v1', name: 'AcmeCustomer', type: 'query', body: LISTED }],
      }),
    );
    stack = await startStack({ env: { TRUSTED_DOCUMENTS: manifest } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  test('a scoped caller runs a listed operation by its body or by its id', async () => {
    const byBody = await stack.queryAs('acme', LISTED);
    const byId = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('acme')) },
      body: JSON.stringify({ documentId: 'acme-customer-v1' }),
    });

    expect(byBody.body).toEqual({ data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } } });
    expect(await byId.json()).toEqual(byBody.body);
  });

  test('anything else is refused before parsing, with no upstream call; the operator keeps free-form documents', async () => {
    await stack.resetUpstreamCalls();
    const refused = await stack.queryAs('acme', CUSTOMER);
    expect(refused.status).toBe(400);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    expect((await stack.upstreamCalls()).total).toBe(0);

    const operator = await stack.query(CUSTOMER);
    expect(operator.body).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });

  test('over graphql-ws, an unlisted text the operator runs is still refused for a scoped caller', async () => {
    // The operator's subscription leaves the text parsed and kept (the subscribe guard's memo):
    // what a caller may run is still decided for each caller, before the memo is looked at.
    const query = 'subscription { accountChanged(customerId: "cus_acme") { accountId } }';
    const operator = stack.connect().subscribe(query);
    await stack.subscriptionsStarted(1);
    const acme = stack.connect({ Authorization: `Bearer ${await tokenFor('acme')}` }).subscribe(query);
    await acme.done;
    expect(acme.errors).toEqual([
      [expect.objectContaining({ extensions: { code: 'PERSISTED_QUERY_NOT_IN_LIST' } })],
    ]);
    expect(operator.errors).toEqual([]);
    operator.stop();
    await stack.subscriptionsCompleted(1);
  });

  test('over graphql-ws, an unlisted subscription is refused for a scoped caller', async () => {
    const { createClient } = await import('graphql-ws');
    const client = createClient({
      url: stack.graphqlUrl.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { Authorization: `Bearer ${await tokenFor('acme')}` },
    });
    try {
      const errors: unknown[] = [];
      await new Promise<void>((resolve) => {
        client.subscribe(
          { query: 'subscription { accountChanged(customerId: "cus_acme") { accountId } }' },
          { next: () => {}, error: (error) => (errors.push(error), resolve()), complete: resolve },
        );
      });
      expect(errors).toEqual([
        [expect.objectContaining({ extensions: { code: 'PERSISTED_QUERY_NOT_IN_LIST' } })],
      ]);
    } finally {
      await client.dispose();
    }
  });
});
