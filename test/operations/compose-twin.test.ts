/**
 * compose.yaml's topology, proven without Docker by its scripted twin (scripts/compose-twin.ts):
 * the event log's Redis as compose starts it (a primary and a replica with AOF, three Sentinels,
 * real redis-server processes through deploy/kubernetes/redis-ha.sh), the emulator delivering
 * webhooks to one replica, two replicas sharing that Redis through its Sentinels, a graphql-ws
 * subscriber on the other replica receiving the event, and the Hive Gateway CLI over the composed
 * supergraph in front, serving graphql-ws as the official image does (the real graphql-ws client
 * subscribes through it). Also checks that compose.yaml and the twin agree.
 */
import { readFileSync } from 'node:fs';
import { createClient, type Client } from 'graphql-ws';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  readComposeFile,
  REDIS_SERVICES,
  startComposeTwin,
  TWIN_REDIS_VARIABLES,
  TWIN_SERVICES,
  type ComposeTwin,
} from '../../scripts/compose-twin.ts';
import { postGraphQL } from '../support/harness/federation.ts';
import { connectLive, type LiveClient } from '../support/harness/live-client.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { deltas, scrape, valueOf } from '../support/metrics.ts';
import { useProcesses } from '../support/processes.ts';
import { facadeReadsSentinels } from './sentinel-support.ts';

let twin: ComposeTwin;
const clients: LiveClient[] = [];
const wsClients: Client[] = [];
const processes = useProcesses();

/** The demo operator's token from the twin's own OpenID provider, as compose.yaml's header says. */
async function operatorToken(): Promise<string> {
  const response = await fetch(`${twin.urls['dev-issuer']}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from('demo-operator:demo-operator-secret').toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  return ((await response.json()) as { access_token: string }).access_token;
}

beforeAll(async () => {
  // The twin picks free ports before its processes bind them, as compose names them up front; on a
  // busy machine another test can take one in between. That start is retried once, nothing else.
  for (let attempt = 1; ; attempt += 1) {
    try {
      twin = await startComposeTwin({
        spawn: processes.spawn,
        readyWithinMs: loadScaledMs(30_000),
      });
      return;
    } catch (error) {
      if (attempt >= 2 || !String(error).includes('EADDRINUSE')) throw error;
    }
  }
});

afterAll(async () => {
  await Promise.all(clients.map((client) => client.dispose()));
  await Promise.all(wsClients.map(async (client) => client.dispose()));
  await twin?.close();
});

describe('compose.yaml and its twin', () => {
  it('declares exactly the services the twin mirrors', () => {
    expect(Object.keys(readComposeFile().services).sort()).toEqual([...TWIN_SERVICES].sort());
  });

  it('starts every process with the environment compose.yaml gives it, and only that', () => {
    const compose = readComposeFile();
    for (const service of TWIN_SERVICES) {
      const declared = Object.keys(compose.services[service]!.environment ?? {});
      // A Redis member keeps its data in the twin's directory and listens on loopback.
      const extra = (REDIS_SERVICES as readonly string[]).includes(service) ? [...TWIN_REDIS_VARIABLES] : [];
      expect(Object.keys(twin.environments[service]!).sort(), service).toEqual(
        [...declared, ...extra].sort(),
      );
    }
    // Both replicas trust the twin's own OpenID provider.
    expect(twin.environments['facade-a']!.AUTH_ISSUER).toBe(twin.urls['dev-issuer']);
    expect(twin.environments['dev-issuer']!.DEV_ISSUER_URL).toBe(twin.urls['dev-issuer']);
    // Both replicas ask the twin's three Sentinels; only facade-a registers for webhooks.
    const sentinels = ['sentinel-1', 'sentinel-2', 'sentinel-3'].map((name) =>
      twin.urls[name]!.replace('redis://', ''),
    );
    expect(twin.environments['facade-a']!.REDIS_SENTINELS).toBe(sentinels.join(','));
    expect(twin.environments['facade-b']!.REDIS_SENTINELS).toBe(sentinels.join(','));
    expect(twin.environments['facade-a']!.WEBHOOK_REGISTER).toBe('true');
    expect(twin.environments['facade-b']!.WEBHOOK_REGISTER).toBe('false');
    expect(twin.environments['facade-a']!.WEBHOOK_PUBLIC_URL).toBe(
      `${twin.urls['facade-a']}/webhooks/platform`,
    );
    // The upstream key from the compose secret's file (the twin's copy), as the container reads it.
    expect(twin.environments['facade-a']!.UPSTREAM_API_KEY_FILE).toBe(twin.secrets['upstream-api-key']);
    expect(readFileSync(twin.secrets['upstream-api-key']!, 'utf8')).toBe('sk_sandbox_emulator\n');
  });

  it('runs the event log’s Redis as compose does: the first server primary, its replica synchronised, three Sentinels watching it', async () => {
    const ask = async (service: string, ...command: [string, ...string[]]): Promise<unknown> => {
      const client = new Redis(twin.urls[service]!, { lazyConnect: true, maxRetriesPerRequest: 0 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        return await client.call(...command);
      } finally {
        client.disconnect();
      }
    };
    const primary = twin.urls['redis-1']!.replace('redis://', '');
    expect(((await ask('redis-1', 'ROLE')) as string[])[0]).toBe('master');
    let replicaRole: unknown[] = [];
    await waitFor(
      () => replicaRole[0] === 'slave' && replicaRole[3] === 'connected',
      'redis-2 to replicate redis-1',
      loadScaledMs(15_000),
      async () => {
        replicaRole = (await ask('redis-2', 'ROLE')) as unknown[];
      },
    );
    expect(`${String(replicaRole[1])}:${String(replicaRole[2])}`).toBe(primary);
    for (const sentinel of ['sentinel-1', 'sentinel-2', 'sentinel-3']) {
      const [host, port] = (await ask(
        sentinel,
        'SENTINEL',
        'get-master-addr-by-name',
        'platform',
      )) as string[];
      expect(`${host}:${port}`, sentinel).toBe(primary);
    }
    expect(((await ask('redis-1', 'CONFIG', 'GET', 'appendfsync')) as string[])[1]).toBe('everysec');
  });
});

describe("compose.yaml's gateway", () => {
  it('is a pinned release of the official image, not a moving tag', () => {
    expect(readComposeFile().services.gateway!.image).toMatch(
      /^ghcr\.io\/graphql-hive\/gateway:\d+\.\d+\.\d+$/,
    );
  });

  it("trusts the twin's OpenID provider, as compose's gateway trusts the dev-issuer service", () => {
    expect(twin.environments.gateway).toMatchObject({
      AUTH_ISSUER: twin.urls['dev-issuer'],
      AUTH_AUDIENCE: 'platform-graphql-facade',
    });
  });

  it('serves graphql-ws as the CLI does: a subscription through it receives a change made through it', async () => {
    const token = await operatorToken();
    const client = createClient({
      url: `${twin.gatewayUrl.replace(/^http/, 'ws')}`,
      webSocketImpl: WebSocket,
      connectionParams: { Authorization: `Bearer ${token}` },
      retryAttempts: 0,
    });
    wsClients.push(client);
    const received: unknown[] = [];
    let failure: unknown;
    client.subscribe(
      {
        query:
          'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { type account { id } } }',
      },
      {
        next: (value) => received.push(value),
        error: (error) => (failure = error),
        complete: () => undefined,
      },
    );
    // The gateway subscribes at the facade (compose's `platform`, facade-a) over graphql-ws; facade-a's
    // metrics say when that subscription runs.
    let subscriptions = 0;
    await waitFor(
      () => subscriptions >= 1 || failure !== undefined,
      'the subscription to start on facade-a through the gateway',
      loadScaledMs(15_000),
      async () => {
        subscriptions = valueOf(
          await scrape(`${twin.urls['facade-a-metrics']}/metrics`),
          'facade_graphql_ws_subscriptions',
        );
      },
    );
    expect(failure).toBeUndefined();
    const topUp = await postGraphQL(
      twin.gatewayUrl,
      `mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", amount: "2.00", currency: "USDC", idempotencyKey: "twin-ws-top-up" }) { replayed } }`,
      undefined,
      { authorization: `Bearer ${token}` },
    );
    expect(topUp.body).toEqual({ data: { sandboxTopUp: { replayed: false } } });
    await waitFor(
      () => received.length >= 1 || failure !== undefined,
      'the event through the gateway',
      loadScaledMs(20_000),
    );
    expect(failure).toBeUndefined();
    expect(received[0]).toEqual({
      data: {
        accountChanged: { type: expect.stringMatching(/^account\./), account: { id: 'acc_acme_eth' } },
      },
    });
  });

  it('refuses a request without a token at the edge', async () => {
    const result = await postGraphQL(
      twin.gatewayUrl,
      '{ customer(id: "cus_acme") { displayName } }',
      undefined,
      {
        authorization: '',
      },
    );
    expect(result).toEqual({ status: 401, body: { errors: [{ message: 'Unauthenticated' }] } });
  });
});

describe('the topology', () => {
  it('answers a query across both subgraphs through the gateway', async () => {
    const result = await postGraphQL(
      twin.gatewayUrl,
      `{ customer(id: "cus_acme") { displayName openSupportNoteCount } }`,
      undefined,
      { authorization: `Bearer ${await operatorToken()}` },
    );
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      data: { customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: expect.any(Number) } },
    });
  });

  it('delivers a change made through the gateway to a subscriber of the other replica', async (context) => {
    if (!facadeReadsSentinels()) {
      // The replicas share the event log through the Sentinels: a facade that does not read
      // REDIS_SENTINELS shares nothing, and there is nothing to show here yet.
      process.stderr.write('compose-twin.test.ts: the facade does not read REDIS_SENTINELS yet; skipped.\n');
      context.skip();
    }
    const token = await operatorToken();
    const client = connectLive(`${twin.urls['facade-b']!.replace(/^http/, 'ws')}/graphql`, {
      Authorization: `Bearer ${token}`,
    });
    clients.push(client);
    const received = client.subscribe(`subscription {
      accountChanged(customerId: "cus_globex", accountId: "acc_globex_eth") { type account { id } }
    }`);
    const metricsB = `${twin.urls['facade-b-metrics']}/metrics`;
    const metricsA = `${twin.urls['facade-a-metrics']}/metrics`;
    // facade-b's own metrics say when the subscription is running (a child process: no lifecycle
    // hook to wait on).
    let subscriptions = 0;
    await waitFor(
      () => subscriptions === 1,
      'the subscription to start on facade-b',
      loadScaledMs(15_000),
      async () => {
        subscriptions = valueOf(await scrape(metricsB), 'facade_graphql_ws_subscriptions');
      },
    );
    const beforeA = await scrape(metricsA);
    const beforeB = await scrape(metricsB);

    const topUp = await postGraphQL(
      twin.gatewayUrl,
      `mutation { sandboxTopUp(input: { accountId: "acc_globex_eth", amount: "3.00", currency: "USDC", idempotencyKey: "twin-top-up" }) { replayed } }`,
      undefined,
      { 'x-request-id': 'twin-top-up-request', authorization: `Bearer ${token}` },
    );
    expect(topUp.body).toEqual({ data: { sandboxTopUp: { replayed: false } } });

    await waitFor(() => received.data.length >= 1, 'the event on facade-b', loadScaledMs(15_000));
    expect(received.data[0]).toEqual({
      accountChanged: { type: expect.stringMatching(/^account\./), account: { id: 'acc_globex_eth' } },
    });

    // The webhook reached facade-a only; facade-b delivered it to its subscriber. facade-a counts
    // the delivery once it has answered it, which may be after facade-b has already delivered.
    let afterA = await scrape(metricsA);
    await waitFor(
      () => Object.keys(deltas(beforeA, afterA, 'facade_webhook_deliveries_total')).length > 0,
      'facade-a to count the webhook',
      undefined,
      async () => {
        afterA = await scrape(metricsA);
      },
    );
    const afterB = await scrape(metricsB);
    expect(deltas(beforeA, afterA, 'facade_webhook_deliveries_total')).toMatchObject({
      '{outcome="accepted"}': expect.any(Number),
    });
    expect(deltas(beforeB, afterB, 'facade_webhook_deliveries_total')).toEqual({});
    expect(deltas(beforeB, afterB, 'facade_event_delivery_latency_seconds_count')).toEqual({ '{}': 1 });

    // The gateway sent the mutation to facade-a (compose's `platform` alias), which audited it.
    const audit = twin
      .lines('facade-a')
      .filter((line) => line.includes('"log":"audit"') && line.includes('twin-top-up-request'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      upstream: { method: 'POST', route: '/v3/sandbox/accounts/{accountId}/topup', status: 200 },
      resources: { accountId: 'acc_globex_eth' },
      idempotencyKey: 'twin-top-up',
      outcome: 'ok',
      replayed: false,
    });
  });
});
