/**
 * Sandbox and live in one deployment: one facade holding the emulator's sandbox key and its live
 * key (each environment has its own data: the live key sees one customer, the sandbox key three),
 * its callers bound to one environment by their token's `environment` claim, minted over HTTP by a
 * real dev issuer. Over HTTP, graphql-ws and SSE, and through the response cache and the event log
 * in real Redis, a caller sees only its environment, and resumes only with its environment's
 * cursors; the emulator's counts per key show which key every call was sent with.
 */
import { scrape as scrapeMetrics, seriesOf, type Scrape } from '../support/metrics.ts';
import { SignJWT, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { request as httpRequest } from 'node:http';
import { generateWebhookSecret, signWebhook } from '../../emulator/webhooks/signature.ts';
import { generateSigningKey } from '../../dev-issuer/index.ts';
import { revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import {
  callbackExtension,
  startCallbackReceiver,
  subscribeByCallback,
  UNKNOWN,
  type CallbackReceiver,
} from '../support/harness/callback-receiver.ts';
import { LIVE_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { postSignedEvent, upstreamEvent } from '../support/harness/events.ts';
import { connectLive } from '../support/harness/live-client.ts';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { liveGauges } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { devIssuerEnv, startDevIssuer, type DevIssuer } from '../support/issuer.ts';

const SANDBOX_SECRET = generateWebhookSecret();
const LIVE_SECRET = generateWebhookSecret();
const SANDBOX_CUSTOMERS = ['cus_acme', 'cus_ada', 'cus_globex'];
const LIVE_CUSTOMERS = ['cus_live_northwind'];
const CUSTOMERS = '{ customers(first: 100) { nodes { id } } }';
const STATUS = '{ apiStatus { keyValid environment callerEnvironment } }';
const EVENTS = 'subscription { events { eventId cursor customerId } }';

let issuer: DevIssuer;
let signingKey: JWK;
let stack: Stack;
/** A gateway's callback endpoint, which the facade may call (callback subscriptions). */
let gateway: CallbackReceiver;

/** A facade holding a key per environment, its callers' tokens from the run's issuer. */
const bothEnvironments = () => ({
  ...devIssuerEnv(issuer),
  UPSTREAM_API_KEY: '',
  UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY,
  UPSTREAM_API_KEY_LIVE: LIVE_KEY,
});

beforeAll(async () => {
  signingKey = await generateSigningKey();
  issuer = await startDevIssuer({
    signingKey,
    clients: [
      {
        clientId: 'sandbox-ops',
        clientSecret: 'sandbox-ops-secret',
        roles: ['operator'],
        environment: 'sandbox',
      },
      { clientId: 'live-ops', clientSecret: 'live-ops-secret', roles: ['operator'], environment: 'live' },
      { clientId: 'unbound-ops', clientSecret: 'unbound-ops-secret', roles: ['operator'] },
    ],
  });
  gateway = await startCallbackReceiver();
  stack = await startStack({
    redis: true,
    env: {
      ...bothEnvironments(),
      SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `${gateway.url}/callback/`,
      WEBHOOK_REGISTER: 'true',
      WEBHOOK_SECRETS_SANDBOX: SANDBOX_SECRET,
      WEBHOOK_SECRETS_LIVE: LIVE_SECRET,
      CACHE_ENABLED: 'true',
      RATE_LIMIT_BY_CLIENT: 'batch-job=3',
    },
  });
});

afterAll(async () => {
  await stack?.close();
  await gateway?.close();
  await issuer?.close();
});

beforeEach(async () => {
  await stack.resetUpstreamCalls();
});

const tokens = new Map<string, Promise<string>>();
/** A token of the dev issuer for `clientId`, by the client credentials grant over HTTP. */
function tokenOf(clientId: 'sandbox-ops' | 'live-ops' | 'unbound-ops'): Promise<string> {
  let token = tokens.get(clientId);
  if (token === undefined) {
    token = issuer.token(clientId);
    tokens.set(clientId, token);
  }
  return token;
}

/** A token the dev issuer's key signs for `client_id: batch-job` in `environment` (one client, both environments). */
async function batchJobToken(environment: 'sandbox' | 'live'): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: 'batch-job', roles: ['operator'], environment })
    .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid!, typ: 'at+jwt' })
    .setIssuer(issuer.issuer)
    .setAudience(issuer.audience)
    .setSubject('batch-job')
    .setIssuedAt(now)
    .setExpirationTime(now + 300)
    .sign(await importJWK(signingKey, 'RS256'));
}

/**
 * Upstream calls but the facade's own probe of its keys (`GET /v3/capabilities`, made in the
 * background after it starts, at a moment no test controls).
 */
async function callerCalls(): Promise<number> {
  const calls = await stack.upstreamCalls();
  return calls.total - (calls.byRoute['GET /v3/capabilities'] ?? 0);
}

/** A token the dev issuer's key signs, operator of every customer, with `claims` over its defaults. */
async function signedToken(claims: Record<string, unknown>): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: 'claim-probe', roles: ['operator'], ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid!, typ: 'at+jwt' })
    .setIssuer(issuer.issuer)
    .setAudience(issuer.audience)
    .setSubject('claim-probe')
    .setIssuedAt(now)
    .setExpirationTime(now + 300)
    .sign(await importJWK(signingKey, 'RS256'));
}

/** POSTs `event` signed with `secret` to `path` exactly as written (no client normalisation). */
function postRaw(path: string, secret: string, event: { id: string }): Promise<number> {
  const body = JSON.stringify(event);
  const timestamp = Math.floor(Date.now() / 1000);
  const url = new URL(stack.facadeUrl);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        headers: {
          'content-type': 'application/json',
          'webhook-id': event.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook({ secret, id: event.id, timestamp, body }),
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

async function post(token: string, query: string, variables?: Record<string, unknown>) {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ query, variables }),
  });
  return {
    status: response.status,
    body: (await response.json()) as {
      // Response bodies are asserted field by field; a loose type keeps the tests readable.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      data?: any;
      errors?: { message: string; extensions?: { code?: string } }[];
    },
  };
}

const idsOf = (data: { customers: { nodes: { id: string }[] } }) =>
  data.customers.nodes.map((node) => node.id).sort();

describe('one facade, sandbox and live callers', () => {
  test('over HTTP each caller sees its environment’s customers, read with its environment’s key', async () => {
    const sandbox = await post(await tokenOf('sandbox-ops'), CUSTOMERS);
    expect(sandbox.body.errors).toBeUndefined();
    expect(idsOf(sandbox.body.data)).toEqual(SANDBOX_CUSTOMERS);
    expect(await stack.emulator.upstreamCallsByKey()).toEqual({ 'sandbox-read-write': 1 });

    const live = await post(await tokenOf('live-ops'), CUSTOMERS);
    expect(live.body.errors).toBeUndefined();
    expect(idsOf(live.body.data)).toEqual(LIVE_CUSTOMERS);
    expect(await stack.emulator.upstreamCallsByKey()).toEqual({
      'sandbox-read-write': 1,
      'live-read-write': 1,
    });
  });

  test('upstream request metrics are labelled with the environment whose key was sent', async () => {
    await post(await tokenOf('live-ops'), STATUS);
    const metrics = await (await fetch(stack.metricsUrl)).text();
    const liveRequests = metrics
      .split('\n')
      .filter(
        (line) => line.startsWith('facade_upstream_requests_total{') && line.includes('environment="live"'),
      );
    expect(liveRequests.length).toBeGreaterThan(0);
    expect(metrics).toMatch(/facade_upstream_requests_total\{[^}]*environment="sandbox"/);
  });

  test('operation and webhook metrics are counted under each caller’s and each route’s environment', async () => {
    let scraped: Scrape = new Map();
    const scrape = async () => {
      scraped = await scrapeMetrics(stack.metricsUrl);
    };
    const count = (name: string, labels: Record<string, string>) =>
      Object.values(seriesOf(scraped, name, labels)).reduce((sum, value) => sum + value, 0);
    const operations = (operation: string, environment: string) =>
      count('graphql_operations_total', { operation_name: operation, outcome: 'ok', environment });
    const durations = (operation: string, environment: string) =>
      count('graphql_operation_duration_seconds_count', { operation_name: operation, environment });
    const accepted = (environment: string) =>
      count('facade_webhook_deliveries_total', { outcome: 'accepted', environment });

    await scrape();
    const before = {
      sandboxAccepted: accepted('sandbox'),
      liveAccepted: accepted('live'),
    };
    expect(operations('EnvironmentProbe', 'sandbox') + operations('EnvironmentProbe', 'live')).toBe(0);

    // Over HTTP: one operation in each environment, each counted under its own.
    const PROBE = 'query EnvironmentProbe { apiStatus { callerEnvironment } }';
    expect((await post(await tokenOf('sandbox-ops'), PROBE)).body.data).toEqual({
      apiStatus: { callerEnvironment: 'sandbox' },
    });
    expect((await post(await tokenOf('sandbox-ops'), PROBE)).status).toBe(200);
    expect((await post(await tokenOf('live-ops'), PROBE)).body.data).toEqual({
      apiStatus: { callerEnvironment: 'live' },
    });
    await scrape();
    expect(operations('EnvironmentProbe', 'sandbox')).toBe(2);
    expect(operations('EnvironmentProbe', 'live')).toBe(1);
    expect(durations('EnvironmentProbe', 'sandbox')).toBe(2);
    expect(durations('EnvironmentProbe', 'live')).toBe(1);
    // No series of the operation without its environment.
    expect(count('graphql_operations_total', { operation_name: 'EnvironmentProbe' })).toBe(3);

    // Over graphql-ws: a live subscription, listening once a live webhook reaches it.
    let liveSent = 0;
    const liveWs = connectLive(stack.facade.wsUrl, { Authorization: `Bearer ${await tokenOf('live-ops')}` });
    const watching = liveWs.subscribe('subscription EnvironmentWatch { events { eventId } }');
    try {
      // A new live event each poll until one arrives: the subscription listens from then on.
      const sentIds: string[] = [];
      await waitFor(
        () =>
          watching.data.some((data: { events: { eventId: string } }) =>
            sentIds.includes(data.events.eventId),
          ),
        'the live subscription to receive a live webhook',
        undefined,
        async () => {
          const liveEvent = upstreamEvent({
            type: 'account.updated',
            environment: 'live',
            customerId: 'cus_live_northwind',
            resourceType: 'account',
            resourceId: 'acc_live_northwind_eth',
          });
          const { status } = await postSignedEvent(
            `${stack.facadeUrl}/webhooks/platform/live`,
            LIVE_SECRET,
            liveEvent,
          );
          expect(status).toBe(200);
          sentIds.push(liveEvent.id);
        },
      );
      liveSent = sentIds.length;
      watching.stop();
      await waitFor(
        () => operations('EnvironmentWatch', 'live') === 1,
        'the live subscription to be counted under environment="live"',
        undefined,
        scrape,
      );
      expect(operations('EnvironmentWatch', 'sandbox')).toBe(0);
      expect(durations('EnvironmentWatch', 'live')).toBe(1);
    } finally {
      await liveWs.dispose();
    }

    // A webhook to each environment's route is counted under that environment.
    const sandboxEvent = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'account',
      resourceId: 'acc_acme_eth',
    });
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/sandbox`, SANDBOX_SECRET, sandboxEvent))
        .status,
    ).toBe(200);
    await scrape();
    expect(accepted('sandbox')).toBe(before.sandboxAccepted + 1);
    expect(accepted('live')).toBe(before.liveAccepted + liveSent);
    // Each series by its labels (`{environment="live",outcome="accepted"}`).
    const webhookSeries = Object.keys(seriesOf(scraped, 'facade_webhook_deliveries_total'));
    expect(webhookSeries.length).toBeGreaterThan(0);
    expect(webhookSeries.filter((labels) => !labels.includes('environment='))).toEqual([]);
  });

  test('apiStatus says which environment the caller is in', async () => {
    const sandbox = await post(await tokenOf('sandbox-ops'), STATUS);
    const live = await post(await tokenOf('live-ops'), STATUS);
    expect(sandbox.body.data.apiStatus).toEqual({
      keyValid: true,
      environment: 'sandbox',
      callerEnvironment: 'sandbox',
    });
    expect(live.body.data.apiStatus).toEqual({
      keyValid: true,
      environment: 'live',
      callerEnvironment: 'live',
    });
  });

  test('the response cache keeps each environment apart: one environment’s answer never serves, nor is dropped by, the other', async () => {
    // A page size no other test reads, so every answer below starts uncached.
    const CUSTOMERS = '{ customers(first: 99) { nodes { id } } }';
    const sandboxToken = await tokenOf('sandbox-ops');
    const liveToken = await tokenOf('live-ops');
    // Each fills its own environment's cache; the second read of each is a hit.
    for (const token of [sandboxToken, liveToken, sandboxToken, liveToken]) {
      expect((await post(token, CUSTOMERS)).body.errors).toBeUndefined();
    }
    expect(await stack.emulator.upstreamCallsByKey()).toEqual({
      'sandbox-read-write': 1,
      'live-read-write': 1,
    });
    // A live write drops live answers only: the sandbox list is still served from its cache.
    await stack.resetUpstreamCalls();
    const created = await stack.emulator.rest('POST', '/v3/customers/cus_live_northwind/related-parties', {
      key: LIVE_KEY,
      body: {
        partyType: 'person',
        roles: ['officer'],
        title: 'Officer',
        person: { firstName: 'Test', lastName: 'Cache', residenceCountry: 'US' },
      },
    });
    expect(created.status).toBe(201);
    await stack.resetUpstreamCalls();
    expect(idsOf((await post(sandboxToken, CUSTOMERS)).body.data)).toEqual(SANDBOX_CUSTOMERS);
    expect(idsOf((await post(liveToken, CUSTOMERS)).body.data)).toEqual(LIVE_CUSTOMERS);
    const byKey = await stack.emulator.upstreamCallsByKey();
    expect(byKey['sandbox-read-write'] ?? 0).toBe(0);
  });

  test('a token naming no environment is refused on every transport, before any upstream call', async () => {
    const token = await tokenOf('unbound-ops');
    const http = await post(token, CUSTOMERS);
    expect(http.status).toBe(403);
    expect(http.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(http.body.errors?.[0]?.message).toContain('names no upstream environment');

    const sse = await openSseStream(stack.facadeUrl, EVENTS, { authorization: `Bearer ${token}` });
    expect(sse.status).toBe(403);
    expect(sse.text).toContain('names no upstream environment');

    const ws = connectLive(stack.facade.wsUrl, { Authorization: `Bearer ${token}` });
    const received = ws.subscribe(EVENTS);
    const closed = await ws.closed;
    expect(closed.code).toBe(4403);
    expect(received.data).toEqual([]);
    await ws.dispose();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an environment claim that is not exactly "sandbox" or "live" binds nothing: refused on every transport, 0 upstream calls', async () => {
    for (const environment of [
      'LIVE',
      'Live',
      ' live',
      'production',
      ['live'],
      ['sandbox', 'live'],
      1,
      true,
      {},
    ]) {
      const token = await signedToken({ environment });
      const http = await post(token, CUSTOMERS);
      expect(http.status, JSON.stringify(environment)).toBe(403);
      expect(http.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect(http.body.errors?.[0]?.message).toContain('names no upstream environment');
      const multipart = await openMultipartStream(stack.facadeUrl, EVENTS, {
        authorization: `Bearer ${token}`,
      });
      expect(multipart.status, JSON.stringify(environment)).toBe(403);
    }
    expect(await callerCalls()).toBe(0);
  });

  test('webhook path tricks never reach an environment with another environment’s secret', async () => {
    const liveEvent = () =>
      upstreamEvent({
        type: 'account.updated',
        environment: 'live',
        customerId: 'cus_live_northwind',
        resourceType: 'account',
        resourceId: 'acc_live_northwind_eth',
      });
    const sandboxEvent = () =>
      upstreamEvent({
        type: 'account.updated',
        environment: 'sandbox',
        customerId: 'cus_acme',
        resourceType: 'account',
        resourceId: 'acc_acme_eth',
      });
    // Paths as a proxy might forward them, sent byte for byte (fetch would normalise `..`).
    const livePaths = [
      '/webhooks/platform/live/',
      '/webhooks/platform/LIVE',
      '/webhooks/platform/%6Cive',
      '/webhooks/platform/../platform/live',
      '/webhooks/platform/sandbox/../live',
      '//webhooks/platform/live',
      '/webhooks/platform/live%2F',
      '/webhooks/platform/',
    ];
    for (const path of livePaths) {
      // A live event signed with the sandbox secret: never accepted, wherever the path leads.
      const status = await postRaw(path, SANDBOX_SECRET, liveEvent());
      expect([400, 401, 404], path).toContain(status);
    }
    for (const path of [
      '/webhooks/platform/sandbox/',
      '/webhooks/platform/SANDBOX',
      '/webhooks/platform/live/../sandbox',
    ]) {
      // A sandbox event signed with the live secret at a path that leads to sandbox: refused.
      const status = await postRaw(path, LIVE_SECRET, sandboxEvent());
      expect([400, 401, 404], path).toContain(status);
    }
    // The control: the same raw request, signed with the route's own secret, is taken.
    expect(await postRaw('/webhooks/platform/live', LIVE_SECRET, liveEvent())).toBe(200);
    expect(await postRaw('/webhooks/platform/sandbox', SANDBOX_SECRET, sandboxEvent())).toBe(200);
    expect(await callerCalls()).toBe(0);
  });

  test('one live query document watched in both environments: each group re-runs in its own, and a sandbox write reaches no live watcher', async () => {
    const WATCHED = 'query @live { customers(first: 100) { nodes { id } } }';
    const sandboxWs = connectLive(stack.facade.wsUrl, {
      Authorization: `Bearer ${await tokenOf('sandbox-ops')}`,
    });
    const liveWs = connectLive(stack.facade.wsUrl, { Authorization: `Bearer ${await tokenOf('live-ops')}` });
    const inSandbox = sandboxWs.subscribe(WATCHED);
    const inLive = liveWs.subscribe(WATCHED);
    await waitFor(() => inSandbox.data.length === 1 && inLive.data.length === 1, 'both first answers');
    expect(idsOf(inLive.data[0] as never)).toEqual(LIVE_CUSTOMERS);
    expect(idsOf(inSandbox.data[0] as never)).toEqual(SANDBOX_CUSTOMERS);

    const created = await post(
      await tokenOf('sandbox-ops'),
      `mutation { createCustomer(input: { idempotencyKey: "env-live-${Date.now()}", type: "business", externalId: "env-live-${Date.now()}", displayName: "Sandbox only" }) { customer { id } } }`,
    );
    const newId = created.body.data.createCustomer.customer.id as string;
    await waitFor(
      () => JSON.stringify(inSandbox.data).includes(newId),
      'the sandbox list with the new customer',
    );
    expect(JSON.stringify(inLive.data)).not.toContain(newId);
    expect(inLive.data.map((data) => idsOf(data as never))).toEqual(inLive.data.map(() => LIVE_CUSTOMERS));
    inSandbox.stop();
    inLive.stop();
    await sandboxWs.dispose();
    await liveWs.dispose();
  });

  test('forged cursors (another case, two labels, an empty or trailing part) are refused to a live caller before anything listens', async () => {
    const liveAuth = { authorization: `Bearer ${await tokenOf('live-ops')}` };
    for (const cursor of [
      'LIVE~1-0',
      'live~sandbox~1-0',
      'live~',
      'live~~1-0',
      'live~1-0~',
      'sandbox~live~1-0',
    ]) {
      const stream = await openMultipartStream(stack.facadeUrl, EVENTS, {
        ...liveAuth,
        'last-event-id': cursor,
      });
      expect(stream.status, cursor).toBe(400);
      expect(stream.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
    }
    expect(await callerCalls()).toBe(0);
  });

  test('sandbox mutations refuse a live caller before any upstream call, and serve a sandbox one', async () => {
    const TOP_UP = 'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }';
    const refused = await post(await tokenOf('live-ops'), TOP_UP, {
      input: {
        accountId: 'acc_live_northwind_eth',
        amount: '1.00',
        currency: 'ETH',
        idempotencyKey: `live-${Date.now()}`,
      },
    });
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(refused.body.errors?.[0]?.message).toContain('live');
    expect((await stack.upstreamCalls()).total).toBe(0);

    const served = await post(await tokenOf('sandbox-ops'), TOP_UP, {
      input: {
        accountId: 'acc_ada_polygon',
        amount: '1.00',
        currency: 'USDC',
        idempotencyKey: `sandbox-${Date.now()}`,
      },
    });
    expect(served.body.errors, JSON.stringify(served.body.errors)).toBeUndefined();
    expect(await stack.emulator.upstreamCallsByKey()).toEqual({ 'sandbox-read-write': 1 });
  });

  test('rate-limit budgets are per environment: one client spending its sandbox budget leaves its live one whole', async () => {
    const sandbox = await batchJobToken('sandbox');
    const live = await batchJobToken('live');
    const first = await post(sandbox, STATUS);
    expect(
      first.status,
      stack
        .logs()
        .filter((line) => line.includes('"error"'))
        .slice(-3)
        .join('\n'),
    ).toBe(200);
    for (let spent = 1; spent < 3; spent += 1) expect((await post(sandbox, STATUS)).status).toBe(200);
    const refused = await post(sandbox, STATUS);
    expect(refused.status).toBe(429);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    for (let spent = 0; spent < 3; spent += 1) expect((await post(live, STATUS)).status).toBe(200);
    expect((await post(live, STATUS)).status).toBe(429);
  });

  test('a webhook of one environment reaches only that environment’s subscribers, over graphql-ws and SSE', async () => {
    const sandboxWs = connectLive(stack.facade.wsUrl, {
      Authorization: `Bearer ${await tokenOf('sandbox-ops')}`,
    });
    const liveWs = connectLive(stack.facade.wsUrl, { Authorization: `Bearer ${await tokenOf('live-ops')}` });
    const sandboxOnWs = sandboxWs.subscribe(EVENTS);
    const liveOnWs = liveWs.subscribe(EVENTS);
    const sandboxSse = await openSseStream<{ events: { eventId: string; customerId: string } }>(
      stack.facadeUrl,
      EVENTS,
      { authorization: `Bearer ${await tokenOf('sandbox-ops')}` },
    );
    const liveSse = await openSseStream<{ events: { eventId: string; customerId: string } }>(
      stack.facadeUrl,
      EVENTS,
      { authorization: `Bearer ${await tokenOf('live-ops')}` },
    );
    expect([sandboxSse.status, liveSse.status]).toEqual([200, 200]);
    await stack.subscriptionsStarted(4);

    // Real writes at the emulator, which delivers each environment's webhook to the endpoint that
    // environment's key registered (`/webhooks/platform/<environment>`).
    for (const [customerId, key] of [
      ['cus_live_northwind', LIVE_KEY],
      ['cus_acme', SANDBOX_KEY],
    ] as const) {
      const created = await stack.emulator.rest('POST', `/v3/customers/${customerId}/related-parties`, {
        key,
        body: {
          partyType: 'person',
          roles: ['officer'],
          title: 'Officer',
          person: { firstName: 'Test', lastName: 'Webhook', residenceCountry: 'US' },
        },
      });
      expect(created.status).toBe(201);
    }
    const sseData = (stream: typeof sandboxSse) =>
      stream.messages.flatMap((message) =>
        message.data?.data === undefined ? [] : [message.data.data.events],
      );
    await waitFor(
      () =>
        sandboxOnWs.data.length > 0 &&
        liveOnWs.data.length > 0 &&
        sseData(sandboxSse).length > 0 &&
        sseData(liveSse).length > 0,
      'each subscriber to hear its environment’s event',
    );
    // A marker in each environment, so anything crossing over would have arrived before it.
    const sandboxMarker = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'account',
      resourceId: 'acc_acme_eth',
    });
    const liveMarker = upstreamEvent({
      type: 'account.updated',
      environment: 'live',
      customerId: 'cus_live_northwind',
      resourceType: 'account',
      resourceId: 'acc_live_northwind_eth',
    });
    // Each route checks its own environment's secret, and takes its own environment's events only.
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/live`, SANDBOX_SECRET, liveMarker)).status,
    ).toBe(401);
    // A live event signed for the sandbox route is one that route can never process: parked (202).
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/sandbox`, SANDBOX_SECRET, liveMarker))
        .status,
    ).toBe(202);
    const parked = await fetch(`${new URL(stack.metricsUrl).origin}/dead-letters`);
    expect(((await parked.json()) as { deadLetters: unknown[] }).deadLetters).toContainEqual(
      expect.objectContaining({
        environment: 'sandbox',
        reason: 'other_environment',
        webhookId: liveMarker.id,
      }),
    );
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform`, SANDBOX_SECRET, sandboxMarker)).status,
    ).toBe(404);
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/sandbox`, SANDBOX_SECRET, sandboxMarker))
        .status,
    ).toBe(200);
    expect(
      (await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/live`, LIVE_SECRET, liveMarker)).status,
    ).toBe(200);
    const heard = (events: { eventId: string }[], id: string) => events.some((event) => event.eventId === id);
    await waitFor(
      () =>
        heard(
          sandboxOnWs.data.map((data) => data.events),
          sandboxMarker.id,
        ) &&
        heard(
          liveOnWs.data.map((data) => data.events),
          liveMarker.id,
        ) &&
        heard(sseData(sandboxSse), sandboxMarker.id) &&
        heard(sseData(liveSse), liveMarker.id),
      'the markers',
    );
    const customersOf = (events: { customerId: string }[]) => [
      ...new Set(events.map((event) => event.customerId)),
    ];
    expect(customersOf(sandboxOnWs.data.map((data) => data.events))).toEqual(['cus_acme']);
    expect(customersOf(sseData(sandboxSse))).toEqual(['cus_acme']);
    expect(customersOf(liveOnWs.data.map((data) => data.events))).toEqual(['cus_live_northwind']);
    expect(customersOf(sseData(liveSse))).toEqual(['cus_live_northwind']);

    // Every cursor names its environment: the payload's, and the SSE id beside it.
    const cursorsOf = (events: unknown[]) => events.map((event) => (event as { cursor: string }).cursor);
    const sandboxCursor = (sandboxOnWs.data[0].events as { cursor: string }).cursor;
    const liveCursor = (liveOnWs.data[0].events as { cursor: string }).cursor;
    expect(
      cursorsOf(sandboxOnWs.data.map((data) => data.events)).filter(
        (cursor) => !/^sandbox~\d+-\d+$/.test(cursor),
      ),
    ).toEqual([]);
    expect(
      cursorsOf(liveOnWs.data.map((data) => data.events)).filter((cursor) => !/^live~\d+-\d+$/.test(cursor)),
    ).toEqual([]);
    const idsOfSse = (stream: typeof sandboxSse) =>
      stream.messages.flatMap((message) => (message.id === undefined ? [] : [message.id]));
    expect(idsOfSse(sandboxSse)).toContain(sandboxCursor);
    expect(idsOfSse(liveSse)).toContain(liveCursor);
    expect(idsOfSse(liveSse).filter((id) => !id.startsWith('live~'))).toEqual([]);

    // A cursor of the other environment, or one naming none, is refused as a malformed one is, over
    // every transport, before anything listens or reads.
    await stack.resetUpstreamCalls();
    const RESUME = 'subscription ($after: String) { events(after: $after) { eventId cursor customerId } }';
    const liveAuth = { authorization: `Bearer ${await tokenOf('live-ops')}` };
    const foreign = [
      [sandboxCursor, 'belongs to the sandbox environment'],
      [sandboxCursor.slice('sandbox~'.length), 'names no environment'],
    ] as const;
    for (const [after, says] of foreign) {
      const onWs = liveWs.subscribe(RESUME, { after });
      await onWs.done;
      expect(onWs.data).toEqual([]);
      expect(onWs.errors).toMatchObject([{ extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' } }]);
      expect(JSON.stringify(onWs.errors)).toContain(says);

      const onSse = await openSseStream(stack.facadeUrl, EVENTS, { ...liveAuth, 'last-event-id': after });
      expect(onSse.status).toBe(400);
      expect(onSse.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
      expect(onSse.text).toContain(says);

      const onMultipart = await openMultipartStream(stack.facadeUrl, EVENTS, {
        ...liveAuth,
        'last-event-id': after,
      });
      expect(onMultipart.status).toBe(400);
      expect(onMultipart.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
      expect(JSON.stringify(onMultipart.body)).toContain(says);

      const afterOnMultipart = await openMultipartStream(stack.facadeUrl, RESUME, liveAuth, { after });
      await afterOnMultipart.ended;
      expect(afterOnMultipart.body).toMatchObject({
        errors: [{ extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' } }],
      });
      expect(JSON.stringify(afterOnMultipart.body)).toContain(says);
    }
    // And the other way round: a live cursor given to a sandbox caller.
    const liveOnSandbox = await openSseStream(stack.facadeUrl, EVENTS, {
      authorization: `Bearer ${await tokenOf('sandbox-ops')}`,
      'last-event-id': liveCursor,
    });
    expect(liveOnSandbox.status).toBe(400);
    expect(liveOnSandbox.text).toContain('belongs to the live environment');
    expect((await stack.upstreamCalls()).total).toBe(0);

    // A cursor of the caller's own environment resumes from its own log: the live events after it,
    // read back from the log (graphql-ws's `after`, SSE's Last-Event-ID), then the live ones.
    const resumed = liveWs.subscribe(RESUME, { after: liveCursor });
    const resumedSse = await openSseStream<{ events: { eventId: string; customerId: string } }>(
      stack.facadeUrl,
      EVENTS,
      { ...liveAuth, 'last-event-id': liveCursor },
    );
    expect(resumedSse.status).toBe(200);
    await waitFor(
      () =>
        heard(
          resumed.data.map((data) => data.events),
          liveMarker.id,
        ) && heard(sseData(resumedSse), liveMarker.id),
      'the resumed subscriptions to read the live log after the cursor',
    );
    const liveAfter = upstreamEvent({
      type: 'account.updated',
      environment: 'live',
      customerId: 'cus_live_northwind',
      resourceType: 'account',
      resourceId: 'acc_live_northwind_eth',
    });
    await postSignedEvent(`${stack.facadeUrl}/webhooks/platform/live`, LIVE_SECRET, liveAfter);
    await waitFor(
      () =>
        heard(
          resumed.data.map((data) => data.events),
          liveAfter.id,
        ) && heard(sseData(resumedSse), liveAfter.id),
      'the later live event',
    );
    const resumedEvents = resumed.data.map(
      (data) => data.events as { eventId: string; cursor: string; customerId: string },
    );
    expect(resumed.errors).toEqual([]);
    expect(resumedEvents.map((event) => event.eventId)).not.toContain(
      (liveOnWs.data[0].events as { eventId: string }).eventId,
    );
    expect(customersOf(resumedEvents)).toEqual(['cus_live_northwind']);
    expect(customersOf(sseData(resumedSse))).toEqual(['cus_live_northwind']);
    expect(cursorsOf(resumedEvents).filter((cursor) => !cursor.startsWith('live~'))).toEqual([]);
    const sandboxIds = new Set(sandboxOnWs.data.map((data) => (data.events as { eventId: string }).eventId));
    expect(resumedEvents.filter((event) => sandboxIds.has(event.eventId))).toEqual([]);
    resumedSse.close();
    for (const stream of [sandboxSse, liveSse]) stream.close();
    sandboxOnWs.stop();
    liveOnWs.stop();
    resumed.stop();
    await Promise.all([sandboxWs.dispose(), liveWs.dispose()]);
  });

  test('a batch keeps to its caller’s environment: each operation read with that key, a sandbox write refused to a live caller', async () => {
    const TOP_UP = 'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }';
    const batchOf = async (token: string, operations: unknown[]) => {
      const response = await fetch(stack.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify(operations),
      });
      expect(response.status).toBe(200);
      // Answers are asserted field by field; a loose type keeps the test readable.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      return (await response.json()) as any[];
    };
    const live = await batchOf(await tokenOf('live-ops'), [
      { query: CUSTOMERS },
      { query: STATUS },
      {
        query: TOP_UP,
        variables: {
          input: {
            accountId: 'acc_ada_polygon',
            amount: '1.00',
            currency: 'USDC',
            idempotencyKey: `b-${Date.now()}`,
          },
        },
      },
    ]);
    expect(idsOf(live[0].data)).toEqual(LIVE_CUSTOMERS);
    expect(live[1].data.apiStatus).toMatchObject({ environment: 'live', callerEnvironment: 'live' });
    expect(live[2].errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // Every call the batch made was sent with the live key; the refused write made none.
    expect(Object.keys(await stack.emulator.upstreamCallsByKey())).toEqual(['live-read-write']);

    const sandbox = await batchOf(await tokenOf('sandbox-ops'), [{ query: CUSTOMERS }, { query: STATUS }]);
    // The sandbox holds customers earlier tests created too; never the live one.
    expect(idsOf(sandbox[0].data)).toEqual(expect.arrayContaining(SANDBOX_CUSTOMERS));
    expect(idsOf(sandbox[0].data)).not.toContain(LIVE_CUSTOMERS[0]);
    expect(sandbox[1].data.apiStatus).toMatchObject({ callerEnvironment: 'sandbox' });
  });

  test('a callback subscription hears only its caller’s environment, each cursor naming it', async () => {
    gateway.received.length = 0;
    const subscriptions = {
      sandbox: callbackExtension(gateway.url),
      live: callbackExtension(gateway.url),
    };
    for (const environment of ['sandbox', 'live'] as const) {
      const answer = await subscribeByCallback(
        stack.graphqlUrl,
        { authorization: `Bearer ${await tokenOf(`${environment}-ops`)}` },
        EVENTS,
        subscriptions[environment],
      );
      expect(answer.status).toBe(200);
    }
    const heardBy = (environment: 'sandbox' | 'live') =>
      gateway.received
        .filter((request) => request.body.id === subscriptions[environment].subscriptionId)
        .filter((request) => request.body.action === 'next')
        .map((request) => ({
          ...(request.body.payload?.data as { events: { eventId: string; customerId: string } }).events,
          cursor: request.body.payload?.extensions?.cursor ?? '',
        }));
    const event = (environment: 'sandbox' | 'live') =>
      upstreamEvent({
        type: 'account.updated',
        environment,
        customerId: environment === 'live' ? 'cus_live_northwind' : 'cus_acme',
        resourceType: 'account',
        resourceId: environment === 'live' ? 'acc_live_northwind_eth' : 'acc_acme_eth',
      });
    // Two rounds of one event per environment: anything crossing over would arrive before the second.
    for (let round = 0; round < 2; round += 1) {
      const sent = { sandbox: event('sandbox'), live: event('live') };
      for (const [environment, secret] of [
        ['sandbox', SANDBOX_SECRET],
        ['live', LIVE_SECRET],
      ] as const) {
        const posted = await postSignedEvent(
          `${stack.facadeUrl}/webhooks/platform/${environment}`,
          secret,
          sent[environment],
        );
        expect(posted.status).toBe(200);
      }
      await waitFor(
        () =>
          heardBy('sandbox').some((heard) => heard.eventId === sent.sandbox.id) &&
          heardBy('live').some((heard) => heard.eventId === sent.live.id),
        'each callback subscription to hear its environment’s event',
      );
    }
    expect([...new Set(heardBy('sandbox').map((heard) => heard.customerId))]).toEqual(['cus_acme']);
    expect([...new Set(heardBy('live').map((heard) => heard.customerId))]).toEqual(['cus_live_northwind']);
    expect(heardBy('sandbox').filter((heard) => !/^sandbox~\d+-\d+$/.test(heard.cursor))).toEqual([]);
    expect(heardBy('live').filter((heard) => !/^live~\d+-\d+$/.test(heard.cursor))).toEqual([]);
    // The gateway forgets both: each ends at its next heartbeat or event.
    gateway.answerWith(UNKNOWN);
    for (const environment of ['sandbox', 'live'] as const) {
      await postSignedEvent(
        `${stack.facadeUrl}/webhooks/platform/${environment}`,
        environment === 'live' ? LIVE_SECRET : SANDBOX_SECRET,
        event(environment),
      );
    }
    let running = -1;
    await waitFor(
      () => running === 0,
      'both callback subscriptions to end',
      undefined,
      async () => void (running = (await liveGauges(stack, 'callback')).subscriptions),
    );
  });

  test('an expired cursor is answered in the caller’s environment’s form', async () => {
    const liveWs = connectLive(stack.facade.wsUrl, { Authorization: `Bearer ${await tokenOf('live-ops')}` });
    await stack.resetUpstreamCalls();
    // Ahead of the live log's head: not one of its positions.
    const ahead = 'live~99999999999999-0';
    const expired = liveWs.subscribe('subscription ($after: String) { events(after: $after) { eventId } }', {
      after: ahead,
    });
    await expired.done;
    expect(expired.data).toEqual([]);
    expect(expired.errors).toMatchObject([
      {
        extensions: {
          code: 'CURSOR_EXPIRED',
          cursor: ahead,
          oldestCursor: expect.stringMatching(/^live~\d+-\d+$/),
        },
      },
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
    await liveWs.dispose();
  });

  test('de-duplication is per environment: one event id in each environment is published in each', async () => {
    const sandboxEvent = upstreamEvent({
      type: 'account.updated',
      environment: 'sandbox',
      customerId: 'cus_acme',
      resourceType: 'account',
      resourceId: 'acc_acme_eth',
    });
    const liveEvent = {
      ...sandboxEvent,
      environment: 'live' as const,
      data: { ...sandboxEvent.data, customerId: 'cus_live_northwind', resourceId: 'acc_live_northwind_eth' },
    };
    const sandboxRoute = `${stack.facadeUrl}/webhooks/platform/sandbox`;
    const liveRoute = `${stack.facadeUrl}/webhooks/platform/live`;
    expect(await postSignedEvent(sandboxRoute, SANDBOX_SECRET, sandboxEvent)).toMatchObject({
      status: 200,
      body: { duplicate: false },
    });
    expect(await postSignedEvent(liveRoute, LIVE_SECRET, liveEvent)).toMatchObject({
      status: 200,
      body: { duplicate: false },
    });
    expect(await postSignedEvent(liveRoute, LIVE_SECRET, liveEvent)).toMatchObject({
      status: 200,
      body: { duplicate: true },
    });
  });

  test('the audit trail names each write’s environment', async () => {
    const TOP_UP = 'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }';
    await post(await tokenOf('sandbox-ops'), TOP_UP, {
      input: {
        accountId: 'acc_ada_polygon',
        amount: '2.00',
        currency: 'USDC',
        idempotencyKey: `audit-${Date.now()}`,
      },
    });
    const audit = stack
      .logs()
      .filter((line) => line.includes('"log":"audit"') && line.includes('sandbox-ops'))
      .map((line) => JSON.parse(line) as { actor: { subject: string; environment?: string } });
    expect(audit.at(-1)?.actor).toMatchObject({ subject: 'sandbox-ops', environment: 'sandbox' });
  });
});

describe('one environment by its own variable', () => {
  let sandboxOnly: Stack;

  beforeAll(async () => {
    sandboxOnly = await startStack({
      env: { ...devIssuerEnv(issuer), UPSTREAM_API_KEY: '', UPSTREAM_API_KEY_SANDBOX: SANDBOX_KEY },
    });
  });

  afterAll(async () => {
    await sandboxOnly?.close();
  });

  test('a token naming no environment is bound to the one configured; one naming the other is refused', async () => {
    const ask = async (token: string) => {
      const response = await fetch(sandboxOnly.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: STATUS }),
      });
      return {
        status: response.status,
        body: (await response.json()) as {
          data?: { apiStatus: unknown };
          errors?: { message: string; extensions?: { code?: string } }[];
        },
      };
    };
    await sandboxOnly.resetUpstreamCalls();
    const live = await ask(await tokenOf('live-ops'));
    expect(live.status).toBe(403);
    expect(live.body.errors?.[0]?.message).toContain('serves no live environment');
    expect((await sandboxOnly.upstreamCalls()).total).toBe(0);

    const unbound = await ask(await tokenOf('unbound-ops'));
    expect(unbound.body.data?.apiStatus).toEqual({
      keyValid: true,
      environment: 'sandbox',
      callerEnvironment: 'sandbox',
    });
    expect(await sandboxOnly.emulator.upstreamCallsByKey()).toEqual({ 'sandbox-read-write': 1 });
  });
});

describe('readiness of every environment', () => {
  let both: Stack;

  beforeAll(async () => {
    both = await startStack({
      env: {
        ...bothEnvironments(),
        // Every `/readyz` asks the upstream, and nothing else does in the background.
        READINESS_CACHE_MS: '0',
        RECONCILE_INTERVAL_SECONDS: '0',
      },
    });
  });

  afterAll(async () => {
    await both?.close();
  });

  const readiness = async (environment?: string) => {
    const query = environment === undefined ? '' : `?environment=${encodeURIComponent(environment)}`;
    const response = await fetch(`${both.facadeUrl}/readyz${query}`);
    const text = await response.text();
    for (const key of [SANDBOX_KEY, LIVE_KEY]) expect(text).not.toContain(key);
    return { status: response.status, body: JSON.parse(text) as unknown };
  };

  test('ready when each environment’s upstream takes its key, asked once with each; still ready, degraded, when live’s key is revoked, and the sandbox keeps serving', async () => {
    await both.resetUpstreamCalls();
    expect(await readiness()).toEqual({
      status: 200,
      body: {
        status: 'ready',
        environments: {
          sandbox: { reachable: true, environment: 'sandbox' },
          live: { reachable: true, environment: 'live' },
        },
      },
    });
    expect(await both.emulator.upstreamCallsByKey()).toEqual({
      'sandbox-read-write': 1,
      'live-read-write': 1,
    });
    expect((await both.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 2 });

    await revokeEmulatorKey(both.emulatorUrl, LIVE_KEY);
    await both.resetUpstreamCalls();
    // The key is the same on every replica: taking them out would cut off the sandbox for nothing.
    expect(await readiness()).toEqual({
      status: 200,
      body: {
        status: 'degraded',
        environments: {
          sandbox: { reachable: true, environment: 'sandbox' },
          // The upstream answered, refusing the key: reachable, as `apiStatus` means it.
          live: { reachable: true, reason: 'unauthorized' },
        },
      },
    });
    // Still one call with each key: the revoked one is asked, and refused, once.
    expect((await both.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 2 });
    expect(await readiness('live')).toEqual({
      status: 503,
      body: {
        status: 'unavailable',
        environment: 'live',
        upstream: { reachable: true, reason: 'unauthorized' },
      },
    });
    expect(await readiness('sandbox')).toEqual({
      status: 200,
      body: {
        status: 'ready',
        environment: 'sandbox',
        upstream: { reachable: true, environment: 'sandbox' },
      },
    });
    const sandboxCaller = await fetch(both.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${await tokenOf('sandbox-ops')}`,
      },
      body: JSON.stringify({ query: '{ customer(id: "cus_acme") { id } }' }),
    });
    expect(await sandboxCaller.json()).toEqual({ data: { customer: { id: 'cus_acme' } } });
  });

  test('stays ready, degraded, when no environment takes its key: the keys are every replica’s', async () => {
    await revokeEmulatorKey(both.emulatorUrl, SANDBOX_KEY);
    expect(await readiness()).toEqual({
      status: 200,
      body: {
        status: 'degraded',
        environments: {
          sandbox: { reachable: true, reason: 'unauthorized' },
          live: { reachable: true, reason: 'unauthorized' },
        },
      },
    });
    // A monitor's question for one environment says it cannot be served now.
    expect(await readiness('sandbox')).toEqual({
      status: 503,
      body: {
        status: 'unavailable',
        environment: 'sandbox',
        upstream: { reachable: true, reason: 'unauthorized' },
      },
    });
  });

  test('refuses an environment it holds no key for, before any upstream call', async () => {
    await both.resetUpstreamCalls();
    for (const asked of ['production', 'SANDBOX', '']) {
      expect(await readiness(asked)).toEqual({
        status: 404,
        body: { status: 'unknown_environment', environments: ['sandbox', 'live'] },
      });
    }
    const repeated = await fetch(`${both.facadeUrl}/readyz?environment=sandbox&environment=live`);
    expect(repeated.status).toBe(404);
    expect((await both.upstreamCalls()).total).toBe(0);
  });
});

describe('the reconciler of each environment', () => {
  let reconciling: Stack;

  beforeAll(async () => {
    reconciling = await startStack({
      env: {
        ...bothEnvironments(),
        // No endpoint registered: a change at the upstream brings no webhook, only the reconciler.
        // The secrets sign the test's own marker events.
        WEBHOOK_SECRETS_SANDBOX: SANDBOX_SECRET,
        WEBHOOK_SECRETS_LIVE: LIVE_SECRET,
        RECONCILE_INTERVAL_SECONDS: '1',
        RECONCILE_GRACE_SECONDS: '0',
      },
    });
  });

  afterAll(async () => {
    await reconciling?.close();
  });

  test(
    'a sandbox change with no webhook reaches sandbox subscribers through the reconciler, and no live one',
    { timeout: 30_000 },
    async () => {
      const ACME_ACCOUNT = `subscription {
      accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId type }
    }`;
      const sandboxWs = connectLive(reconciling.facade.wsUrl, {
        Authorization: `Bearer ${await tokenOf('sandbox-ops')}`,
      });
      const liveWs = connectLive(reconciling.facade.wsUrl, {
        Authorization: `Bearer ${await tokenOf('live-ops')}`,
      });
      try {
        const sandboxAccount = sandboxWs.subscribe(ACME_ACCOUNT);
        const liveEvents = liveWs.subscribe(EVENTS);
        const liveNorthwind = liveWs.subscribe(`subscription {
        accountChanged(customerId: "cus_live_northwind", accountId: "acc_live_northwind_eth") { eventId }
      }`);
        await reconciling.subscriptionsStarted(3);

        const topUp = await reconciling.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
          key: SANDBOX_KEY,
          body: { amount: '3.00', currency: 'USDC' },
        });
        expect(topUp.status).toBe(200);
        await waitFor(
          () => sandboxAccount.data.length > 0,
          'the sandbox change to reach the sandbox subscriber through the reconciler',
          20_000,
        );
        expect(sandboxAccount.errors).toEqual([]);
        expect(sandboxAccount.data[0].accountChanged).toMatchObject({
          eventId: expect.stringMatching(/^reconciled:account:acc_acme_eth:/),
          type: 'account.updated',
        });

        // A live marker after it: anything the sandbox change put in the live log would arrive first.
        const marker = upstreamEvent({
          type: 'account.updated',
          environment: 'live',
          customerId: 'cus_live_northwind',
          resourceType: 'account',
          resourceId: 'acc_live_northwind_eth',
        });
        expect(
          (await postSignedEvent(`${reconciling.facadeUrl}/webhooks/platform/live`, LIVE_SECRET, marker))
            .status,
        ).toBe(200);
        await waitFor(
          () =>
            liveEvents.data.some(
              (data: { events: { eventId: string } }) => data.events.eventId === marker.id,
            ),
          'the live marker on the live subscription',
        );
        expect(liveEvents.errors).toEqual([]);
        expect(liveEvents.data.map((data: { events: { eventId: string } }) => data.events.eventId)).toEqual([
          marker.id,
        ]);
        expect(
          liveNorthwind.data.map(
            (data: { accountChanged: { eventId: string } }) => data.accountChanged.eventId,
          ),
        ).toEqual([marker.id]);
      } finally {
        await sandboxWs.dispose();
        await liveWs.dispose();
      }
    },
  );
});
