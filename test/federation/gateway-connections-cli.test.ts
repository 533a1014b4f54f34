/**
 * The shipped Hive Gateway configuration (deploy/gateway.config.ts) and its connections to the
 * facade, with the `hive-gateway` CLI itself as a child process and a TCP proxy between it and the
 * facade (the supergraph routes `platform` through it) that can cut the connection of one request,
 * as a replica killed or a kept-alive connection closed under a request does.
 *
 * - A gateway with a client of its own sends its own gateway-role token in graphql-ws's
 *   `connection_init`: the facade carries all of a caller's subscriptions on that one socket, past
 *   `GRAPHQL_WS_MAX_SUBSCRIPTIONS`, so a gateway restart that moves them all there refuses none.
 *   Without a client of its own a gateway sends none, and the per-connection cap holds.
 * - A query whose connection is cut before any answer is sent once more and answered; a mutation
 *   is never retried by the gateway (its caller retries it, with its idempotency key): one attempt,
 *   nothing written.
 * - A gateway told to stop (SIGTERM) answers the request it is running before it closes the
 *   connection (the CLI's `gracefulShutdownTimeout`, 0 by default, closed it at once).
 */
import { randomUUID } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createClient as createWsClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, TEST_CLIENTS, tokenFor } from '../support/tokens.ts';

const processes = useProcesses();

const PER_CONNECTION = 2;

/** A TCP proxy to the facade that cuts the connection of the next request whose bytes hold `cutting`. */
interface CuttingProxy {
  server: Server;
  port: number;
  /** The next chunk from the gateway holding this text closes its connection, unforwarded. */
  cutting: string | undefined;
  /** The next chunk from the gateway holding this text is forwarded only after this many ms. */
  holding: { text: string; ms: number } | undefined;
  /** Chunks from the gateway that held each text, forwarded or cut. */
  seen(text: string): number;
}

async function startCuttingProxy(facadePort: number): Promise<CuttingProxy> {
  const chunks: string[] = [];
  const sockets = new Set<Socket>();
  const proxy: CuttingProxy = {
    server: createServer((client) => {
      const backend = connect(facadePort, '127.0.0.1');
      sockets.add(client).add(backend);
      const reset = (): void => {
        client.destroy();
        backend.destroy();
      };
      client.on('error', reset).on('close', () => sockets.delete(client));
      backend.on('error', reset).on('close', () => sockets.delete(backend));
      client.on('data', (chunk: Buffer) => {
        const text = chunk.toString('latin1');
        chunks.push(text);
        if (proxy.cutting !== undefined && text.includes(proxy.cutting)) {
          proxy.cutting = undefined;
          reset();
          return;
        }
        const held = proxy.holding;
        if (held !== undefined && text.includes(held.text)) {
          proxy.holding = undefined;
          setTimeout(() => backend.write(chunk), held.ms);
          return;
        }
        backend.write(chunk);
      });
      client.on('end', () => backend.end());
      backend.pipe(client);
    }),
    port: 0,
    cutting: undefined,
    holding: undefined,
    seen: (text) => chunks.filter((chunk) => chunk.includes(text)).length,
  };
  proxy.server.on('close', () => {
    for (const socket of sockets) socket.destroy();
  });
  await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
  proxy.port = (proxy.server.address() as AddressInfo).port;
  return proxy;
}

let federation: FederationStack;
let proxy: CuttingProxy;
/** With a client of its own (the gateway role), as deploy/kubernetes/gateway.yaml runs it. */
let withClient: RunningGatewayProcess;
/** Without one (compose.yaml's demo gateway). */
let withoutClient: RunningGatewayProcess;
/** The supergraph whose `platform` is reached through {@link proxy}. */
let proxiedSupergraphSdl: string;

beforeAll(async () => {
  federation = await startFederationStack({
    env: { GRAPHQL_WS_MAX_SUBSCRIPTIONS: String(PER_CONNECTION), RATE_LIMIT_ENABLED: 'false' },
  });
  const facadeUrl = federation.stack.graphqlUrl;
  proxy = await startCuttingProxy(Number(new URL(facadeUrl).port));
  const proxied = `http://127.0.0.1:${proxy.port}/graphql`;
  const supergraphSdl = federation.supergraphSdl.replaceAll(facadeUrl, proxied);
  expect(supergraphSdl).toContain(proxied);
  proxiedSupergraphSdl = supergraphSdl;
  // The run's issuer and audience; one gateway with its own client (the gateway role), one without.
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  const edge = { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! };
  const { clientId, clientSecret } = TEST_CLIENTS.gateway;
  [withClient, withoutClient] = await Promise.all([
    startHiveGatewayCli(processes, {
      supergraphSdl,
      env: { ...edge, GATEWAY_CLIENT_ID: clientId, GATEWAY_CLIENT_SECRET: clientSecret },
    }),
    startHiveGatewayCli(processes, { supergraphSdl, env: edge }),
  ]);
});

afterAll(async () => {
  await Promise.all([withClient?.close(), withoutClient?.close()]);
  await new Promise<void>((resolve) => (proxy ? proxy.server.close(() => resolve()) : resolve()));
  await federation?.close();
});

beforeEach(() => {
  proxy.cutting = undefined;
  proxy.holding = undefined;
});

describe("a caller's subscriptions through one gateway", () => {
  const SUBSCRIPTION = 'subscription { accountChanged(customerId: "cus_acme") { eventId } }';

  /**
   * Opens subscriptions of one caller at `gateway` over graphql-ws, one at a time, each once the
   * one before runs at the facade, until `count` run or one is refused; the errors each got.
   */
  async function subscribeThrough(gateway: RunningGatewayProcess, count: number) {
    const token = await tokenFor('acme');
    const client: Client = createWsClient({
      url: gateway.wsUrl,
      webSocketImpl: WebSocket,
      connectionParams: { Authorization: `Bearer ${token}` },
      retryAttempts: 0,
    });
    const errors: unknown[][] = [];
    let started = 0;
    const stop = federation.stack.app.lifecycle.on('subscriptionStarted', () => (started += 1));
    for (let index = 0; index < count; index += 1) {
      const mine: unknown[] = [];
      errors.push(mine);
      client.subscribe(
        { query: SUBSCRIPTION },
        {
          next: (result) => mine.push(...(result.errors ?? [])),
          error: (error) => mine.push(error),
          complete: () => undefined,
        },
      );
      await waitFor(
        () => started > index || mine.length > 0,
        `subscription ${index + 1} to run or be refused`,
      );
      if (mine.length > 0) break;
    }
    stop();
    return { client, errors, started };
  }

  test('with its own token, every one runs on its one socket to the facade, past the per-connection cap', async () => {
    const { client, errors, started } = await subscribeThrough(withClient, PER_CONNECTION + 2);
    expect(started).toBe(PER_CONNECTION + 2);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(errors).toEqual([[], [], [], []]);
    await client.dispose();
    await federation.stack.subscriptionsCompleted(PER_CONNECTION + 2);
  });

  test('without a client of its own, the per-connection cap holds', async () => {
    const { client, errors, started } = await subscribeThrough(withoutClient, PER_CONNECTION + 1);
    expect(started).toBe(PER_CONNECTION);
    expect(errors.map((mine) => mine.length > 0)).toEqual([false, false, true]);
    await client.dispose();
  });
});

describe('a request whose connection to the facade is cut before any answer', () => {
  test('a query is sent once more, and answered', async () => {
    // An alias the gateway passes on to the facade, to know this request's bytes by.
    const marker = `m${randomUUID().replaceAll('-', '')}`;
    proxy.cutting = marker;
    const answer = await postGraphQL(
      withClient.url,
      `{ customer(id: "cus_acme") { ${marker}: displayName id } }`,
      undefined,
      { authorization: `Bearer ${await tokenFor('acme')}` },
    );
    expect(answer.body).toEqual({ data: { customer: { [marker]: 'Acme Robotics Ltd', id: 'cus_acme' } } });
    expect(proxy.cutting).toBeUndefined();
    expect(proxy.seen(marker)).toBe(2);
  });

  test('a mutation is not retried by the gateway: one attempt, nothing written', async () => {
    const idempotencyKey = randomUUID();
    proxy.cutting = idempotencyKey;
    await federation.stack.resetUpstreamCalls();
    const answer = await postGraphQL(
      withClient.url,
      'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { idempotencyKey } }',
      { input: { accountId: 'acc_globex_eth', amount: '1.00', currency: 'USDC', idempotencyKey } },
    );
    expect(answer.body.data?.sandboxTopUp ?? null).toBeNull();
    expect(answer.body.errors?.length).toBeGreaterThan(0);
    expect(proxy.seen(idempotencyKey)).toBe(1);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });
});

describe('a gateway told to stop (SIGTERM) while it runs a request', () => {
  test('answers it before it closes the connection', async () => {
    const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
    const stopping = await startHiveGatewayCli(processes, {
      supergraphSdl: proxiedSupergraphSdl,
      env: { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! },
    });
    const marker = `m${randomUUID().replaceAll('-', '')}`;
    // The facade's answer comes 1.5 s after the gateway sent the request on.
    proxy.holding = { text: marker, ms: 1_500 };
    const answer = postGraphQL(
      stopping.url,
      `{ customer(id: "cus_acme") { ${marker}: displayName } }`,
      undefined,
      {
        authorization: `Bearer ${await tokenFor('acme')}`,
      },
    );
    await waitFor(() => proxy.seen(marker) > 0, 'the gateway to send the request on');
    const exited = new Promise((resolve) => stopping.child.once('exit', resolve));
    stopping.child.kill('SIGTERM');
    expect((await answer).body).toEqual({ data: { customer: { [marker]: 'Acme Robotics Ltd' } } });
    await exited;
    await stopping.close();
  });
});
