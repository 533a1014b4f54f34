/**
 * Callback subscriptions through the real Hive Gateway CLI: the shipped configuration with its
 * subscriptions to the facade over Apollo's HTTP callback protocol
 * (test/federation/gateway-variants/gateway.config.ts), in front of two facade replicas sharing the
 * run's Redis. The gateway routes `platform` to the first replica; only the second registers a
 * webhook endpoint at the emulator, so every event reaches the subscription through Redis, from the
 * replica that did not receive it, then through the gateway's callback endpoint to the client.
 *
 * Each event arrives once and in the log's order; another customer is refused by the facade's
 * scope with no upstream call; a token that expires ends the subscription at the facade, which
 * tells the gateway in its `complete`; and a gateway that goes away (stopped, then started again
 * on its port) holds nothing at the facade for longer than one heartbeat interval.
 */
import { resolve } from 'node:path';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type FederationStack, startFederationStack } from '../support/harness/federation.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { freePort, type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { liveGauges } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, issuerSignedToken, tokenFor } from '../support/tokens.ts';

// Results are asserted with toMatchObject; a loose type keeps the tests readable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const processes = useProcesses();

/** The gateway's configuration with callback subscriptions. */
const CALLBACK_GATEWAY_DIR = resolve(import.meta.dirname, 'gateway-variants');

/** The heartbeat interval the gateway asks for: the facade heartbeats every half of it. */
const HEARTBEAT_MS = 2_000;

let federation: FederationStack;
let gateway: RunningGatewayProcess;
let gatewayPort: number;
/** The replica the gateway routes to, which receives no webhook. */
let routed: RunningFacade;
/** The replica the emulator delivers every webhook to. */
let receiving: RunningFacade;

async function startGateway(): Promise<RunningGatewayProcess> {
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  return startHiveGatewayCli(processes, {
    supergraphSdl: federation.supergraphSdl,
    cwd: CALLBACK_GATEWAY_DIR,
    port: gatewayPort,
    env: {
      AUTH_ISSUER: AUTH_ISSUER!,
      AUTH_AUDIENCE: AUTH_AUDIENCE!,
      GATEWAY_CALLBACK_PUBLIC_URL: `http://127.0.0.1:${gatewayPort}/callback`,
      GATEWAY_CALLBACK_HEARTBEAT_MS: String(HEARTBEAT_MS),
    },
  });
}

beforeAll(async () => {
  gatewayPort = await freePort();
  federation = await startFederationStack({
    facades: 2,
    redis: true,
    env: {
      // No leeway: a token ends when its `exp` says.
      AUTH_CLOCK_TOLERANCE_SECONDS: '0',
      SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `http://127.0.0.1:${gatewayPort}/callback/`,
    },
    facadeEnv: (index): Record<string, string> => (index === 1 ? { WEBHOOK_REGISTER: 'true' } : {}),
  });
  [routed, receiving] = federation.stack.facades as [RunningFacade, RunningFacade];
  gateway = await startGateway();
});

afterAll(async () => {
  await Promise.all(clients.splice(0).map(async (client) => client.dispose()));
  await gateway?.close();
  await federation?.close();
});

beforeEach(async () => {
  await federation.stack.resetUpstreamCalls();
});

const clients: WsClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map(async (client) => client.dispose()));
});

const ACME_EVENTS = `subscription {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") {
    cursor type account { id customer { displayName openSupportNoteCount } }
  }
}`;
const GLOBEX_EVENTS = 'subscription { accountChanged(customerId: "cus_globex") { type } }';

/** What one subscription at the gateway received, and how it ended. */
interface Received {
  data: Json[];
  errors: Json[];
  ended?: 'complete' | 'error';
  done: Promise<void>;
}

/** A subscription at the gateway over graphql-ws, with `token` in `connectionParams` (as browsers send it). */
function subscribe(token: string, query: string): Received {
  const client = createWsClient({
    url: `ws://127.0.0.1:${gatewayPort}/graphql`,
    retryAttempts: 0,
    connectionParams: { Authorization: `Bearer ${token}` },
    webSocketImpl: WebSocket,
  });
  clients.push(client);
  let finish!: () => void;
  const received: Received = {
    data: [],
    errors: [],
    done: new Promise<void>((resolve) => (finish = resolve)),
  };
  client.subscribe(
    { query },
    {
      next(value: Json) {
        if (value.errors) received.errors.push(...value.errors);
        if (value.data) received.data.push(value.data);
      },
      error(error: unknown) {
        received.errors.push(...(Array.isArray(error) ? error : [error]));
        received.ended = 'error';
        finish();
      },
      complete() {
        received.ended ??= 'complete';
        finish();
      },
    },
  );
  return received;
}

async function topUpAcme(): Promise<void> {
  const { status } = await federation.stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '1.00', currency: 'USDC' },
  });
  expect(status).toBe(200);
}

const started = (total: number) =>
  waitFor(
    () => routed.lifecycle.count('subscriptionStarted') >= total,
    `${total} subscription(s) started at the routed replica`,
    loadScaledMs(20_000),
  );
const completed = (total: number, timeoutMs = loadScaledMs(20_000)) =>
  waitFor(
    () => routed.lifecycle.count('subscriptionCompleted') >= total,
    `${total} subscription(s) completed at the routed replica`,
    timeoutMs,
  );
const callbackGauges = () => liveGauges(federation.stack, 'callback');

describe('callback subscriptions through the Hive Gateway CLI', () => {
  test('events the other replica received arrive once each, in the log’s order, with the other subgraph’s field', async () => {
    const before = routed.lifecycle.count('subscriptionStarted');
    const subscription = subscribe(await tokenFor('acme'), ACME_EVENTS);
    await started(before + 1);
    // The gateway subscribed over the callback protocol: no socket of its own at the facade.
    expect(await callbackGauges()).toEqual({ connections: 1, subscriptions: 1 });
    expect(await liveGauges(federation.stack, 'graphql-ws')).toEqual({ connections: 0, subscriptions: 0 });

    for (let made = 0; made < 3; made += 1) await topUpAcme();
    await waitFor(
      () => subscription.data.length >= 3,
      'three events through the gateway',
      loadScaledMs(15_000),
    );
    // Nothing more arrives: each once.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(subscription.errors).toEqual([]);
    expect(subscription.data).toHaveLength(3);
    const cursors = subscription.data.map((data) => data.accountChanged.cursor as string);
    expect(new Set(cursors).size).toBe(3);
    expect([...cursors].sort(byLogOrder)).toEqual(cursors);
    expect(subscription.data[0].accountChanged).toMatchObject({
      type: expect.stringMatching(/^account\./),
      account: {
        id: 'acc_acme_eth',
        customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: 2 },
      },
    });
    // The webhook went to the other replica alone.
    expect(routed.lifecycle.count('webhookEventPublished')).toBe(0);
    expect(receiving.lifecycle.count('webhookEventPublished')).toBeGreaterThanOrEqual(3);
  });

  test('another customer is refused by the facade’s scope: an error at the client, no upstream call', async () => {
    const subscription = subscribe(await tokenFor('acme'), GLOBEX_EVENTS);
    await subscription.done;
    expect(subscription.data).toEqual([]);
    expect(subscription.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
    expect(await callbackGauges()).toEqual({
      connections: expect.any(Number),
      subscriptions: expect.any(Number),
    });
  });

  test('a token that expires ends the subscription at the facade, and the client hears UNAUTHENTICATED', async () => {
    const token = await issuerSignedToken({
      sub: 'expiring-callback-user',
      exp: Math.floor(Date.now() / 1000) + 4,
    });
    const startedBefore = routed.lifecycle.count('subscriptionStarted');
    const completedBefore = routed.lifecycle.count('subscriptionCompleted');
    const subscription = subscribe(token, ACME_EVENTS);
    await started(startedBefore + 1);
    await completed(completedBefore + 1);
    await subscription.done;
    expect(subscription.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'UNAUTHENTICATED' }) }),
    ]);
  });

  test('a gateway that goes away holds the facade’s side for no longer than one heartbeat interval', async () => {
    const startedBefore = routed.lifecycle.count('subscriptionStarted');
    const completedBefore = routed.lifecycle.count('subscriptionCompleted');
    subscribe(await tokenFor('acme'), ACME_EVENTS);
    await started(startedBefore + 1);
    const running = (await callbackGauges()).subscriptions;
    expect(running).toBeGreaterThanOrEqual(1);

    const stoppedAt = Date.now();
    await gateway.close();
    const restarting = startGateway();
    // Unreachable, then a gateway on the same port that knows no such subscription: either way, ended.
    await completed(completedBefore + 1, HEARTBEAT_MS + loadScaledMs(1_000));
    const endedAfterMs = Date.now() - stoppedAt;
    expect(endedAfterMs).toBeLessThan(HEARTBEAT_MS + loadScaledMs(1_000));
    expect((await callbackGauges()).subscriptions).toBe(running - 1);
    gateway = await restarting;

    // The gateway started again serves new callback subscriptions.
    const again = subscribe(await tokenFor('acme'), ACME_EVENTS);
    await started(startedBefore + 2);
    await topUpAcme();
    await waitFor(
      () => again.data.length >= 1,
      'an event through the restarted gateway',
      loadScaledMs(15_000),
    );
  });
});

/** Orders two `<ms>-<seq>` cursors as the log does. */
function byLogOrder(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? Number(as - bs) : am < bm ? -1 : 1;
}
