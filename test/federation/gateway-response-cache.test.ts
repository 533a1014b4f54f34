/**
 * Hive Gateway's response cache with the shipped configuration (deploy/gateway.config.ts and
 * gateway-response-cache.ts), through the `hive-gateway` CLI itself: two gateway replicas sharing
 * the run's real Redis under a prefix of their own, in front of a facade that invalidates that
 * Redis for every event and write (`GATEWAY_CACHE_REDIS_URL`).
 *
 * - A repeated dashboard costs the facade nothing: no operation, no upstream call.
 * - Right after a webhook's acknowledgement, 100 reads through either replica are all fresh.
 * - A cached answer made for acme reaches nobody else: another customer, the same customer's other
 *   clients, another environment, an expired token, no token, another upstream key.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { dashboardQuery } from '../../bench/workloads.ts';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { connectRedis, requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { useProcesses } from '../support/processes.ts';
import { findFreePort } from '../../scripts/redis-server.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { bearer, issuerEnv, issuerSignedToken } from '../support/tokens.ts';

const processes = useProcesses();
const secret = generateWebhookSecret();
const prefix = uniqueRedisPrefix();

let federation: FederationStack;
let facade: RunningFacade;
let gateways: [RunningGatewayProcess, RunningGatewayProcess];
let redis: Redis;

beforeAll(async () => {
  federation = await startFederationStack({
    redis: true,
    env: {
      CACHE_ENABLED: 'true',
      WEBHOOK_SECRETS: secret,
      GATEWAY_CACHE_REDIS_URL: requireRedisUrl(),
      GATEWAY_CACHE_KEY_PREFIX: prefix,
    },
  });
  facade = federation.stack.facade;
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  const env = {
    AUTH_ISSUER: AUTH_ISSUER!,
    AUTH_AUDIENCE: AUTH_AUDIENCE!,
    GATEWAY_CACHE_REDIS_URL: requireRedisUrl(),
    GATEWAY_CACHE_KEY_PREFIX: prefix,
  };
  gateways = (await Promise.all([
    startHiveGatewayCli(processes, { supergraphSdl: federation.supergraphSdl, env }),
    startHiveGatewayCli(processes, { supergraphSdl: federation.supergraphSdl, env }),
  ])) as [RunningGatewayProcess, RunningGatewayProcess];
  redis = connectRedis();
});

afterAll(async () => {
  redis?.disconnect();
  await Promise.all((gateways ?? []).map((gateway) => gateway?.close()));
  await federation?.close();
});

beforeEach(async () => {
  await federation.stack.resetUpstreamCalls();
});

/** The benchmark's customer dashboard (bench/workloads.ts), as bench:gateway-cache reads it. */
const DASHBOARD = dashboardQuery;

/** Operations the facade started so far. */
const facadeOperations = (): number => facade.lifecycle.count('operationStarted');

describe('a repeated dashboard through the gateways', () => {
  test('reaches the facade once, then never again, through either replica', async () => {
    const acme = await bearer('acme');
    const first = await postGraphQL(gateways[0].url, DASHBOARD, { id: 'cus_acme' }, acme);
    expect(first.status).toBe(200);
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data).toMatchObject({ customer: { id: 'cus_acme' } });
    // No tag reaches the client: they are the gateway's business.
    expect(first.body).not.toHaveProperty('extensions');
    const operationsBefore = facadeOperations();
    await federation.stack.resetUpstreamCalls();
    for (let round = 0; round < 10; round += 1) {
      const again = await postGraphQL(gateways[round % 2]!.url, DASHBOARD, { id: 'cus_acme' }, acme);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
    }
    expect(facadeOperations() - operationsBefore).toBe(0);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });
});

/** Acme's ETH account's available USDC in a dashboard answer. */
function usdcOf(body: { data?: Record<string, unknown> | null }): number {
  type Dashboard = {
    customer: { accounts: { nodes: { id: string; balances: { currency: string; available: string }[] }[] } };
  };
  const account = (body.data as Dashboard).customer.accounts.nodes.find((node) => node.id === 'acc_acme_eth');
  return Number(account?.balances.find((balance) => balance.currency === 'USDC')?.available ?? 0);
}

describe('a change at the platform', () => {
  test('is in the next read through either replica once its webhook is acknowledged: 0 stale in 100', async () => {
    const acme = await bearer('acme');
    const read = (index: number) =>
      postGraphQL(gateways[index % 2]!.url, DASHBOARD, { id: 'cus_acme' }, acme);
    const before = usdcOf((await read(0)).body);
    expect(usdcOf((await read(1)).body)).toBe(before);
    const topUp = await federation.stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '5.00', currency: 'USDC' },
    });
    expect(topUp.status).toBe(200);
    // The platform changed; until it says so, both replicas answer what they keep, at no cost.
    await federation.stack.resetUpstreamCalls();
    expect(usdcOf((await read(0)).body)).toBe(before);
    expect(usdcOf((await read(1)).body)).toBe(before);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);

    const acknowledged = await postSignedEvent(facade.webhookUrl, secret, acmeAccountUpdated());
    expect(acknowledged.status).toBe(200);
    const answers = [];
    for (let index = 0; index < 100; index += 1) answers.push(usdcOf((await read(index)).body));
    expect(answers.filter((usdc) => usdc !== before + 5)).toEqual([]);
    // Read once after the event (what it made stale alone), then kept again.
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts': 1,
    });
    const invalidations = (await facade.app.metrics.gatewayInvalidations.get()).values;
    expect(invalidations).toContainEqual({ labels: { gateway: 'hive', outcome: 'done' }, value: 1 });
  });
});

/** Sends acme's dashboard through a replica with `headers`; the answer and the facade's operations it cost. */
async function dashboardAs(headers: Record<string, string>, replica = 0) {
  const before = facadeOperations();
  const { status, body } = await postGraphQL(gateways[replica]!.url, DASHBOARD, { id: 'cus_acme' }, headers);
  return { status, body, facadeOperations: facadeOperations() - before };
}

/** A token of the run's issuer scoped to acme, with `claims` over the crafted defaults and an id of its own. */
async function craftedToken(claims: Record<string, unknown> = {}): Promise<{ authorization: string }> {
  return { authorization: `Bearer ${await issuerSignedToken({ jti: randomUUID(), ...claims })}` };
}

describe("acme's cached dashboard", () => {
  beforeEach(async () => {
    // Cached for acme, through the first replica; the second shares it.
    await dashboardAs(await bearer('acme'));
    expect((await dashboardAs(await bearer('acme'), 1)).facadeOperations).toBe(0);
    await federation.stack.resetUpstreamCalls();
  });

  test('is never served to another customer: the same query and variables reach the facade, which refuses', async () => {
    const globex = await dashboardAs(await bearer('globex'));
    expect(globex.facadeOperations).toBe(1);
    expect(globex.body.data).toEqual({ customer: null });
    expect(globex.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    // Refused by the facade's scope, before any upstream call; and never kept.
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
    expect((await dashboardAs(await bearer('globex'), 1)).facadeOperations).toBe(1);
  });

  test("is never served to acme's other clients, nor to an operator: each is keyed apart", async () => {
    for (const caller of ['webApp', 'batchJob', 'operator'] as const) {
      const answer = await dashboardAs(await bearer(caller));
      expect({ caller, facadeOperations: answer.facadeOperations }).toEqual({ caller, facadeOperations: 1 });
      expect(answer.body.data).toMatchObject({ customer: { id: 'cus_acme' } });
    }
  });

  test('is keyed by the environment a token names: a sandbox answer never reaches a live token', async () => {
    const sandbox = await dashboardAs(await craftedToken({ environment: 'sandbox' }));
    expect(sandbox.facadeOperations).toBe(1);
    const live = await dashboardAs(await craftedToken({ environment: 'live' }), 1);
    expect(live.facadeOperations).toBe(1);
    // The same caller with a renewed token (another id, issued later) finds its own answer.
    const renewed = await dashboardAs(
      await craftedToken({ environment: 'sandbox', iat: Math.floor(Date.now() / 1000) + 1 }),
    );
    expect(renewed.facadeOperations).toBe(0);
    expect(renewed.body).toEqual(sandbox.body);
  });

  test('is never served without a valid token: none, forged, expired, or one that expired since it was kept', async () => {
    const shortLived = await craftedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const kept = await dashboardAs(shortLived);
    expect(kept.status).toBe(200);
    expect((await dashboardAs(shortLived, 1)).facadeOperations).toBe(0);
    const past = Math.floor(Date.now() / 1000) - 60;
    const refusals = [
      { authorization: '' },
      { authorization: `Bearer ${await issuerSignedToken({}, { kid: 'not-a-key-of-the-issuer' })}` },
      await craftedToken({ iat: past - 300, exp: past }),
    ];
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    refusals.push(shortLived);
    for (const headers of refusals) {
      const answer = await dashboardAs(headers);
      expect({
        status: answer.status,
        data: answer.body.data ?? null,
        facadeOperations: answer.facadeOperations,
      }).toEqual({
        status: 401,
        data: null,
        facadeOperations: 0,
      });
    }
  });

  test('is never served to acme with another upstream key', async () => {
    const withKey = await dashboardAs({ ...(await bearer('acme')), 'x-api-key': 'sk_sandbox_someone_else' });
    expect(withKey.facadeOperations).toBe(1);
  });
});

/** `answer`, or a failure once `ms` have passed without it. */
async function answeredWithin<T>(answer: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('with the cache’s Redis out of reach', () => {
  test('a gateway answers every query through the facade, as if it kept nothing', async () => {
    const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
    // A port nothing listens on: the cache's connection retries while every command waits for it.
    const gone = await startHiveGatewayCli(processes, {
      supergraphSdl: federation.supergraphSdl,
      env: {
        AUTH_ISSUER: AUTH_ISSUER!,
        AUTH_AUDIENCE: AUTH_AUDIENCE!,
        GATEWAY_CACHE_REDIS_URL: `redis://127.0.0.1:${await findFreePort()}`,
        GATEWAY_CACHE_KEY_PREFIX: prefix,
      },
    });
    try {
      const acme = await bearer('acme');
      const operationsBefore = facadeOperations();
      for (let round = 0; round < 3; round += 1) {
        // A client that waits no longer than it would for the facade itself: without the cache's
        // deadline each query waited out the connection's retries (about a minute here).
        const answer = await answeredWithin(
          postGraphQL(gone.url, DASHBOARD, { id: 'cus_acme' }, acme),
          loadScaledMs(5_000),
        );
        expect(answer.status).toBe(200);
        expect(answer.body.errors).toBeUndefined();
        expect(answer.body.data).toMatchObject({ customer: { id: 'cus_acme' } });
      }
      // Nothing kept, nothing served from a cache: each reached the facade.
      expect(facadeOperations() - operationsBefore).toBe(3);
    } finally {
      await gone.close();
    }
  });
});
