/**
 * The Hive Gateway CLI as the official image runs it (`hive-gateway supergraph <file>`, reading
 * deploy/gateway.config.ts from its working directory), as a child process in front of two facade
 * replicas sharing the run's Redis, over each transport it serves: graphql-ws (the real graphql-ws
 * client, with the token in `connectionParams` as a browser sends it, or on the upgrade request as a
 * server-side client may), server-sent events (the real graphql-sse client) and HTTP (fetch).
 *
 * The gateway routes `platform` to the first replica; only the second registers a webhook endpoint
 * at the emulator, so every event reaches a subscriber through Redis, from the replica that did not
 * receive it. The facade verifies the caller's token itself behind the gateway: another customer is
 * refused by the facade's scope with no upstream call, and a token that expires on an open socket
 * ends the subscription at the facade, and so at the gateway.
 */
import { createClient as createSseClient } from 'graphql-sse';
import { decodeJwt } from 'jose';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { WebSocket as NodeWebSocket } from 'ws';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, issuerSignedToken, tokenFor } from '../support/tokens.ts';

// Results are asserted with toMatchObject; a loose type keeps the tests readable.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

// The CLI comes through test/support/processes.ts, so this file runs in the `processes` project
// (vitest.config.ts): its timeouts are that project's, and each wait below is stretched by the
// machine's load, as the CLI's readiness is.
const processes = useProcesses();

let federation: FederationStack;
let gateway: RunningGatewayProcess;
/** The replica the gateway routes to, which receives no webhook. */
let routed: RunningFacade;
/** The replica the emulator delivers every webhook to. */
let receiving: RunningFacade;
/** The token subject of each subscription the routed replica started: whose token it verified. */
const subjectsSubscribedAtTheFacade: string[] = [];

beforeAll(async () => {
  federation = await startFederationStack({
    facades: 2,
    redis: true,
    // No leeway: a token ends when its `exp` says, at the gateway and at the facade alike.
    env: { AUTH_CLOCK_TOLERANCE_SECONDS: '0' },
    facadeEnv: (index): Record<string, string> => (index === 1 ? { WEBHOOK_REGISTER: 'true' } : {}),
  });
  [routed, receiving] = federation.stack.facades as [RunningFacade, RunningFacade];
  routed.app.lifecycle.on('subscriptionStarted', ({ subject }) =>
    subjectsSubscribedAtTheFacade.push(subject),
  );
  // compose.yaml's gateway environment: the issuer and audience, the key set at `<issuer>/jwks`.
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  gateway = await startHiveGatewayCli(processes, {
    supergraphSdl: federation.supergraphSdl,
    env: { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! },
  });
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

const ACME_EVENTS =
  'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { type account { id customer { displayName openSupportNoteCount } } } }';
const GLOBEX_EVENTS =
  'subscription { accountChanged(customerId: "cus_globex", accountId: "acc_globex_eth") { type } }';
const ACME_QUERY = '{ customer(id: "cus_acme") { displayName openSupportNoteCount } }';
const GLOBEX_QUERY = '{ customer(id: "cus_globex") { displayName } }';

/** What one subscription received, in order, and how it ended. */
type Subscription = {
  data: Json[];
  errors: Json[];
  /** Set once the subscription ended: by `complete`, or by an error. */
  ended?: 'complete' | 'error';
  stop(): void;
  done: Promise<void>;
};

function record(
  subscribe: (sink: { next(value: Json): void; error(error: unknown): void; complete(): void }) => () => void,
): Subscription {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const subscription: Subscription = { data: [], errors: [], stop: () => {}, done };
  subscription.stop = subscribe({
    next(value) {
      if (value.errors) subscription.errors.push(...value.errors);
      if (value.data) subscription.data.push(value.data);
    },
    error(error) {
      subscription.errors.push(...(Array.isArray(error) ? error : [error]));
      subscription.ended = 'error';
      finish();
    },
    complete() {
      subscription.ended ??= 'complete';
      finish();
    },
  });
  return subscription;
}

/**
 * A graphql-ws client at the gateway (never reconnecting): with `token` in `connectionParams`, as
 * browsers send it, or on the upgrade request's `Authorization` header (the `ws` package, as a
 * server-side client may send it).
 */
function connect(
  token: string | undefined,
  where: 'connectionParams' | 'upgrade' = 'connectionParams',
): WsClient {
  const authorization = token === undefined ? undefined : `Bearer ${token}`;
  return where === 'upgrade'
    ? connectWith({ upgradeAuthorization: authorization })
    : connectWith(authorization === undefined ? {} : { connectionParams: { Authorization: authorization } });
}

/** A graphql-ws client with these `connectionParams` and this `Authorization` on the upgrade request. */
function connectWith(options: {
  connectionParams?: Record<string, unknown>;
  upgradeAuthorization?: string | undefined;
}): WsClient {
  const { upgradeAuthorization } = options;
  const client = createWsClient({
    url: gateway.wsUrl,
    retryAttempts: 0,
    ...(options.connectionParams === undefined ? {} : { connectionParams: options.connectionParams }),
    webSocketImpl:
      upgradeAuthorization === undefined
        ? WebSocket
        : class extends NodeWebSocket {
            constructor(url: string, protocols: string | string[]) {
              super(url, protocols, { headers: { authorization: upgradeAuthorization! } });
            }
          },
  });
  clients.push(client);
  return client;
}

function subscribeOverWs(client: WsClient, query: string): Subscription {
  return record((sink) => client.subscribe({ query }, sink));
}

/** A subscription at the gateway over server-sent events (graphql-sse, one stream per operation). */
function subscribeOverSse(token: string, query: string): Subscription {
  const client = createSseClient({
    url: gateway.url,
    singleConnection: false,
    retryAttempts: 0,
    headers: { authorization: `Bearer ${token}` },
  });
  return record((sink) => {
    const stop = client.subscribe({ query }, sink);
    return () => {
      stop();
      client.dispose();
    };
  });
}

/** Tops `acc_acme_eth` up in the sandbox: the emulator sends its webhook to the receiving replica only. */
async function topUpAcme(): Promise<void> {
  const { status } = await federation.stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '1.00', currency: 'USDC' },
  });
  expect(status).toBe(200);
}

/** The support-notes count of cus_acme, read through the gateway as the operator. */
async function acmeNoteCount(): Promise<number> {
  const { body } = await postGraphQL(gateway.url, '{ customer(id: "cus_acme") { openSupportNoteCount } }');
  return (body.data as { customer: { openSupportNoteCount: number } }).customer.openSupportNoteCount;
}

/** Resolves once the routed replica has started `total` subscriptions since it started. */
async function subscriptionsStartedAtTheFacade(total: number): Promise<void> {
  await waitFor(
    () => routed.lifecycle.count('subscriptionStarted') >= total,
    `${total} subscription(s) started at the routed replica`,
    loadScaledMs(20_000),
  );
}

/** Whether the gateway logged anything that reads as a crash. */
function gatewayCrashes(): string[] {
  return gateway.lines().filter((line) => /TypeError|Cannot read properties|Unexpected error/.test(line));
}

describe('without a valid token', () => {
  test('HTTP: 401 Unauthenticated at the gateway, nothing upstream', async () => {
    const { status, body } = await postGraphQL(gateway.url, ACME_QUERY, undefined, { authorization: '' });
    expect({ status, body }).toEqual({ status: 401, body: { errors: [{ message: 'Unauthenticated' }] } });
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test('SSE: 401 at the gateway, no stream, nothing upstream', async () => {
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: ACME_EVENTS }),
    });
    expect(response.status).toBe(401);
    await response.body?.cancel();
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test('graphql-ws: the subscription and a query are refused with Unauthenticated; the gateway does not crash', async () => {
    const client = connect(undefined);
    const subscription = subscribeOverWs(client, ACME_EVENTS);
    const query = subscribeOverWs(client, ACME_QUERY);
    await Promise.all([subscription.done, query.done]);
    for (const refused of [subscription, query]) {
      expect(refused.data).toEqual([]);
      expect(refused.errors).toEqual([expect.objectContaining({ message: 'Unauthenticated' })]);
    }
    expect(routed.lifecycle.count('subscriptionStarted')).toBe(0);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
    expect(gatewayCrashes()).toEqual([]);
  });

  test('graphql-ws: a token the issuer never signed is refused the same way', async () => {
    const forged = await issuerSignedToken({}, { kid: 'not-a-key-of-the-issuer' });
    const refused = subscribeOverWs(connect(forged), ACME_EVENTS);
    await refused.done;
    expect(refused.errors).toEqual([expect.objectContaining({ message: 'Unauthenticated' })]);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test.each([
    ['a token that is not a string', 42],
    ['a value that is not a bearer token', 'Basic YWNtZTpzZWNyZXQ='],
  ])(
    'graphql-ws: %s in connectionParams is refused, even with a valid token on the upgrade request',
    async (_name, value) => {
      const client = connectWith({
        connectionParams: { Authorization: value },
        upgradeAuthorization: `Bearer ${await tokenFor('acme')}`,
      });
      const refused = subscribeOverWs(client, ACME_EVENTS);
      await refused.done;
      expect(refused.data).toEqual([]);
      expect(refused.errors).toEqual([
        expect.objectContaining({ message: 'Invalid authentication token provided' }),
      ]);
      expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
    },
  );
});

describe("acme's token (a customer-scoped caller)", () => {
  test('HTTP: a query across both subgraphs', async () => {
    const { status, body } = await postGraphQL(gateway.url, ACME_QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
    });
    expect({ status, body }).toEqual({
      status: 200,
      body: { data: { customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: 2 } } },
    });
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });
  });

  test('graphql-ws: a query over the socket, with the token in connectionParams', async () => {
    const answered = subscribeOverWs(connect(await tokenFor('acme')), ACME_QUERY);
    await answered.done;
    expect(answered).toMatchObject({
      ended: 'complete',
      errors: [],
      data: [{ customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: 2 } }],
    });
  });

  test.each([
    ['graphql-ws, token in connectionParams', 'connectionParams'],
    ['graphql-ws, token on the upgrade request', 'upgrade'],
    ['SSE', 'sse'],
  ] as const)(
    '%s: an event the other replica received, with a field of the support-notes subgraph',
    async (_name, transport) => {
      const token = await tokenFor('acme');
      const startedBefore = routed.lifecycle.count('subscriptionStarted');
      const publishedBefore = receiving.lifecycle.count('webhookEventPublished');
      const subscription =
        transport === 'sse'
          ? subscribeOverSse(token, ACME_EVENTS)
          : subscribeOverWs(connect(token, transport), ACME_EVENTS);
      try {
        // The gateway has subscribed at the routed replica with acme's token, which it verified.
        await subscriptionsStartedAtTheFacade(startedBefore + 1);
        // It verified acme's own token, which the gateway passed on over its own socket.
        expect(subjectsSubscribedAtTheFacade.at(-1)).toBe(decodeJwt(token).sub);
        await topUpAcme();
        await waitFor(
          () => subscription.data.length >= 1,
          'the event through the gateway',
          loadScaledMs(15_000),
        );

        // The webhook went to the receiving replica alone; the routed one published nothing.
        expect(receiving.lifecycle.count('webhookEventPublished')).toBeGreaterThan(publishedBefore);
        expect(routed.lifecycle.count('webhookEventPublished')).toBe(0);
        expect(subscription.errors).toEqual([]);
        expect(subscription.data[0]).toEqual({
          accountChanged: {
            type: expect.stringMatching(/^account\./),
            account: {
              id: 'acc_acme_eth',
              customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: await acmeNoteCount() },
            },
          },
        });
      } finally {
        subscription.stop();
      }
      expect(gatewayCrashes()).toEqual([]);
    },
  );
});

describe("another customer's id with acme's token", () => {
  test('HTTP: NOT_FOUND from the facade, no upstream call', async () => {
    const { status, body } = await postGraphQL(gateway.url, GLOBEX_QUERY, undefined, {
      authorization: `Bearer ${await tokenFor('acme')}`,
    });
    expect(status).toBe(200);
    expect(body.data).toEqual({ customer: null });
    expect(body.errors).toEqual([
      expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
    ]);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test.each([
    ['graphql-ws', 'ws'],
    ['SSE', 'sse'],
  ] as const)(
    '%s: the subscription is refused NOT_FOUND by the facade, no upstream call',
    async (_name, transport) => {
      const token = await tokenFor('acme');
      const refused =
        transport === 'sse'
          ? subscribeOverSse(token, GLOBEX_EVENTS)
          : subscribeOverWs(connect(token), GLOBEX_EVENTS);
      try {
        await waitFor(
          () => refused.errors.length >= 1,
          'the refusal through the gateway',
          loadScaledMs(15_000),
        );
        expect(refused.data).toEqual([]);
        expect(refused.errors).toEqual([
          expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) }),
        ]);
        expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
      } finally {
        refused.stop();
      }
    },
  );
});

describe('a token that expires on an open socket', () => {
  test('ends the subscription over graphql-ws and SSE; the expired token is then refused at the gateway', async () => {
    // Two callers, so each has a socket of its own from the gateway to the facade.
    // Long enough for both to start on a busy machine before it ends.
    const lifetimeSeconds = 20;
    const exp = Math.floor(Date.now() / 1000) + lifetimeSeconds;
    const [overWs, overSse] = await Promise.all(
      ['expiring-ws', 'expiring-sse'].map((sub) => issuerSignedToken({ sub, client_id: sub, exp })),
    );
    const startedBefore = routed.lifecycle.count('subscriptionStarted');
    const ws = subscribeOverWs(connect(overWs), ACME_EVENTS);
    const sse = subscribeOverSse(overSse!, ACME_EVENTS);
    try {
      await subscriptionsStartedAtTheFacade(startedBefore + 2);
      expect(subjectsSubscribedAtTheFacade.slice(-2).sort()).toEqual(['expiring-sse', 'expiring-ws']);
      await Promise.all([ws.done, sse.done]);
      expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000);
      // The facade ended it (the gateway checks a token once per operation), and the gateway
      // passed its error on and completed the operation.
      for (const ended of [ws, sse]) {
        expect(ended.ended).toBe('complete');
        expect(ended.errors).toEqual([
          expect.objectContaining({
            message: expect.stringMatching(/^The access token of this connection has expired/),
            path: ['accountChanged'],
            extensions: { code: 'UNAUTHENTICATED', serviceName: 'platform' },
          }),
        ]);
      }
    } finally {
      ws.stop();
      sse.stop();
    }
    const again = subscribeOverWs(connect(overWs), ACME_EVENTS);
    await again.done;
    expect(again.errors).toEqual([expect.objectContaining({ message: 'Unauthenticated' })]);
    expect(gatewayCrashes()).toEqual([]);
  });
});

describe('what the gateway logs', () => {
  test('no bearer token in any line', async () => {
    const tokens = await Promise.all([tokenFor('acme'), tokenFor('operator')]);
    for (const token of tokens) expect(gateway.lines().join('\n')).not.toContain(token);
  });
});
