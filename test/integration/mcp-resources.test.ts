/**
 * The MCP endpoint's resources kept live by the platform's webhooks, with the SDK's own client over
 * Streamable HTTP: the emulator sends its signed webhooks to the facade's registered endpoint and
 * counts every upstream call. A customer's accounts are listed and read under the caller's scope;
 * a subscription hears `notifications/resources/updated` after a top-up at the platform (the same
 * invalidation table as the response cache); another customer's resource is refused with no
 * upstream call; the subscription's token expiring ends the session (its id answers 404), as a
 * graphql-ws socket is closed at expiry. (The door's order for a read and a subscription is pinned in
 * edge-admission-order.test.ts.)
 */
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, test } from 'vitest';
import { connectMcp, mcpRequest, type McpTestClient } from '../support/harness/mcp-client.ts';
import { startStack, useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';

const ACCOUNTS = 'platform://customers/cus_acme/accounts';

const stack = useStack({
  env: { WEBHOOK_REGISTER: 'true', CACHE_ENABLED: 'true', AUTH_CLOCK_TOLERANCE_SECONDS: '1' },
});

const clients: McpTestClient[] = [];
afterAll(async () => {
  for (const client of clients) await client.close();
});
const connectWith = async (token: string): Promise<McpTestClient> => {
  const client = await connectMcp(stack.facadeUrl, token);
  clients.push(client);
  return client;
};

interface Accounts {
  id: string;
  accounts: { nodes: { id: string; balances: { currency: string; available: string }[] }[] };
}

/** The account's available USDC in a read of the accounts resource. */
const availableOf = (accounts: Accounts, accountId: string) =>
  Number(
    accounts.accounts.nodes
      .find((node) => node.id === accountId)
      ?.balances.find((balance) => balance.currency === 'USDC')?.available ?? '0',
  );

const readAccounts = async (client: McpTestClient): Promise<Accounts> => {
  const { contents } = await client.client.readResource({ uri: ACCOUNTS });
  expect(contents[0]).toMatchObject({ uri: ACCOUNTS, mimeType: 'application/json' });
  return JSON.parse((contents[0] as { text: string }).text) as Accounts;
};

const topUp = async (accountId: string) => {
  const response = await stack.emulator.rest('POST', `/v3/sandbox/accounts/${accountId}/topup`, {
    body: { amount: '3.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};

describe('resources: a customer’s accounts, kept current by the platform’s webhooks', () => {
  test('the caller’s customers are listed, and their accounts read under its scope', async () => {
    const client = await connectWith(await tokenFor('acme'));
    const { resources } = await client.client.listResources();
    expect(resources.map((resource) => resource.uri)).toEqual(['platform://customers/cus_acme', ACCOUNTS]);
    const { resourceTemplates } = await client.client.listResourceTemplates();
    expect(resourceTemplates.map((template) => template.uriTemplate)).toEqual([
      'platform://customers/{customerId}',
      'platform://customers/{customerId}/accounts',
    ]);
    await stack.resetUpstreamCalls();
    const accounts = await readAccounts(client);
    expect(accounts.id).toBe('cus_acme');
    expect(availableOf(accounts, 'acc_acme_eth')).toBeGreaterThan(0);
    // The customer and its accounts, read together.
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts': 1,
    });
  });

  test('a subscription hears the top-up the platform announces, and a read then shows it', async () => {
    const client = await connectWith(await tokenFor('acme'));
    const before = availableOf(await readAccounts(client), 'acc_acme_eth');
    await client.client.subscribeResource({ uri: ACCOUNTS });
    await topUp('acc_acme_eth');
    await waitFor(() => client.resourceUpdates().length === 1, 'notifications/resources/updated');
    expect(client.resourceUpdates()).toEqual([ACCOUNTS]);
    expect(availableOf(await readAccounts(client), 'acc_acme_eth')).toBeCloseTo(before + 3, 6);
    // Another customer's change is no news to this one; nor is this one's, once unsubscribed.
    const globexEvent = stack.facade.lifecycle.next(
      'webhookEventPublished',
      (event) => event.customerId === 'cus_globex',
    );
    await topUp('acc_globex_eth');
    await globexEvent;
    await client.client.unsubscribeResource({ uri: ACCOUNTS });
    const acmeEvent = stack.facade.lifecycle.next(
      'webhookEventPublished',
      (event) => event.customerId === 'cus_acme',
    );
    await topUp('acc_acme_eth');
    await acmeEvent;
    // What a subscription would have sent, a live query's re-run, has had time to come.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(client.resourceUpdates()).toEqual([ACCOUNTS]);
  });

  test('another customer’s resource is refused as not found, with no upstream call', async () => {
    const client = await connectWith(await tokenFor('globex'));
    await stack.resetUpstreamCalls();
    const refused = async (run: () => Promise<unknown>) => {
      const error = await run().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(-32002);
    };
    await refused(() => client.client.readResource({ uri: ACCOUNTS }));
    await refused(() => client.client.subscribeResource({ uri: ACCOUNTS }));
    await refused(() =>
      client.client.readResource({ uri: 'platform://customers/cus_acme/../cus_acme/accounts' }),
    );
    await refused(() => client.client.readResource({ uri: 'platform://customers/cus%5Facme/accounts' }));
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('the subscribing token’s expiry ends the session: its id answers 404 from then on', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await issuerSignedToken({ exp: now + 3 });
    const client = await connectWith(token);
    const sessionId = client.sessionId!;
    await client.client.subscribeResource({ uri: ACCOUNTS });
    // The token's expiry with the clock tolerance (1 s), then the live side's end.
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    const fresh = await issuerSignedToken();
    const after = await mcpRequest(
      stack.facadeUrl,
      { jsonrpc: '2.0', id: 9, method: 'tools/list' },
      { authorization: `Bearer ${fresh}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    );
    expect(after.status).toBe(404);
    // The expired token itself is refused before any session is looked at.
    const expired = await mcpRequest(
      stack.facadeUrl,
      { jsonrpc: '2.0', id: 10, method: 'tools/list' },
      { authorization: `Bearer ${token}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    );
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toMatch(
      /^Bearer error="invalid_token", resource_metadata="http:\/\/[^"]+\/\.well-known\/oauth-protected-resource\/mcp"$/,
    );
  });
});

describe('a shutdown', () => {
  test('ends every session, its GET stream and its subscriptions, without waiting out the drain', async () => {
    const own = await startStack({
      env: { WEBHOOK_REGISTER: 'true', CACHE_ENABLED: 'true', SHUTDOWN_DRAIN_MS: '10000' },
    });
    const client = await connectMcp(own.facadeUrl, await tokenFor('acme'));
    let closed = false;
    client.transport.onclose = () => {
      closed = true;
    };
    try {
      await client.client.subscribeResource({ uri: ACCOUNTS });
      await own.facade.lifecycle.reached('subscriptionStarted', 1, 'the subscription listening');
    } finally {
      const started = Date.now();
      await own.close();
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    expect(own.facade.lifecycle.count('subscriptionCompleted')).toBe(1);
    await client.close();
    expect(closed).toBe(true);
  });
});

describe('subscribing to one resource several times at once', () => {
  test('leaves one watch, which the session’s end stops: the caller’s running operations are all given back', async () => {
    const own = await startStack({
      env: { WEBHOOK_REGISTER: 'true', CACHE_ENABLED: 'true', RATE_LIMIT_LIVE_OPERATIONS: '3' },
    });
    const token = await tokenFor('acme');
    const other = 'platform://customers/cus_acme';
    try {
      const first = await connectMcp(own.facadeUrl, token);
      await Promise.all([1, 2, 3].map(() => first.client.subscribeResource({ uri: ACCOUNTS })));
      await first.transport.terminateSession();
      await first.close();
      // Every watch of the ended session stopped: the caller's three running operations are free.
      // A watch left running by a subscribe overtaken by another would keep one, with nothing left
      // to stop it, and one of the three subscribes below (two sessions: one watch per resource and
      // session) would be refused until the token expired.
      const next = await connectMcp(own.facadeUrl, token);
      const another = await connectMcp(own.facadeUrl, token);
      try {
        const wanted = [
          { session: next, uri: ACCOUNTS, key: 'next accounts' },
          { session: next, uri: other, key: 'next customer' },
          { session: another, uri: ACCOUNTS, key: 'another accounts' },
        ];
        const held = new Set<string>();
        await waitFor(
          () => held.size === wanted.length,
          'every watch of the ended session given back',
          undefined,
          async () => {
            for (const { session, uri, key } of wanted) {
              if (held.has(key)) continue;
              await session.client.subscribeResource({ uri }).then(
                () => held.add(key),
                () => undefined,
              );
            }
          },
        );
        expect([...held].sort()).toEqual(wanted.map(({ key }) => key).sort());
      } finally {
        await next.close();
        await another.close();
      }
    } finally {
      await own.close();
    }
  });
});
