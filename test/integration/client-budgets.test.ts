/**
 * Budgets per client (`RATE_LIMIT_BY_CLIENT`) end to end: two facade replicas sharing the run's
 * Redis, real tokens of two clients of the run's issuer (their `client_id` claims), the budgets
 * counted across both replicas, the IETF RateLimit header fields on accepted and refused answers,
 * and the same figures where graphql-ws refuses an operation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { mcpRequest, openRawSession } from '../support/harness/mcp-client.ts';
import { facadeTestEnv, startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';
import { bearer, issuerSignedToken, tokenFor } from '../support/tokens.ts';

const QUERY = '{ customer(id: "cus_acme") { id } }';

let emulator: RunningEmulator;
let replicas: RunningFacade[] = [];

beforeAll(async () => {
  emulator = await startEmulator();
  const env = {
    REDIS_URL: requireRedisUrl(),
    REDIS_KEY_PREFIX: uniqueRedisPrefix(),
    RATE_LIMIT_BY_CLIENT: 'test-batch-job=8, test-web-app=600, shared-app=40',
    RATE_LIMIT_REQUESTS: '5',
  };
  replicas = [await startFacade(emulator.url, { env }), await startFacade(emulator.url, { env })];
});

afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.close()));
  await emulator?.close();
});

/** Fields of a `"policy";k=v;k=v` Structured Field list member, by parameter. */
function fieldOf(value: string | null): { policy: string; params: Record<string, number> } {
  expect(value).toMatch(/^"[a-z-]+"(;[a-z]+=[0-9]+)+$/);
  const [policy = '', ...params] = (value ?? '').split(';');
  return {
    policy: JSON.parse(policy) as string,
    params: Object.fromEntries(params.map((param) => param.split('=')).map(([k, v]) => [k, Number(v)])),
  };
}

describe('budgets per client, across two replicas sharing Redis', () => {
  test('the ninth operation of an 8-a-minute client is refused on either replica while a 600-a-minute client goes on', async () => {
    const batch = await bearer('batchJob');
    const web = await bearer('webApp');
    const remaining: number[] = [];
    const webRemaining: number[] = [];
    for (let i = 0; i < 8; i += 1) {
      // Alternating replicas: only a count shared through Redis refuses the ninth.
      const replica = replicas[i % 2]!;
      const accepted = await replica.query(QUERY, undefined, batch);
      expect(accepted.status).toBe(200);
      expect(accepted.body.data).toEqual({ customer: { id: 'cus_acme' } });
      expect(fieldOf(accepted.headers.get('ratelimit-policy'))).toEqual({
        policy: 'per-client',
        params: { q: 8, w: 60 },
      });
      const state = fieldOf(accepted.headers.get('ratelimit'));
      expect(state.policy).toBe('per-client');
      expect(state.params['t']).toBeGreaterThanOrEqual(1);
      expect(state.params['t']).toBeLessThanOrEqual(60);
      remaining.push(state.params['r'] ?? -1);

      const other = await replicas[(i + 1) % 2]!.query(QUERY, undefined, web);
      expect(other.status).toBe(200);
      expect(fieldOf(other.headers.get('ratelimit-policy')).params).toEqual({ q: 600, w: 60 });
      webRemaining.push(fieldOf(other.headers.get('ratelimit')).params['r'] ?? -1);
    }
    expect(remaining).toEqual([7, 6, 5, 4, 3, 2, 1, 0]);
    expect(webRemaining).toEqual([599, 598, 597, 596, 595, 594, 593, 592]);

    const upstreamBefore = (await emulator.upstreamCalls()).total;
    for (const replica of replicas) {
      const refused = await replica.query(QUERY, undefined, batch);
      expect(refused.status).toBe(429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(fieldOf(refused.headers.get('ratelimit-policy')).params).toEqual({ q: 8, w: 60 });
      const state = fieldOf(refused.headers.get('ratelimit'));
      expect(state.params['r']).toBe(0);
      expect(state.params['t']).toBe(retryAfter);
      expect(refused.body.errors?.[0]?.extensions).toEqual({
        code: 'RATE_LIMITED',
        retryAfterSeconds: retryAfter,
        rateLimit: {
          policy: 'per-client',
          quota: 8,
          windowSeconds: 60,
          remaining: 0,
          resetSeconds: retryAfter,
        },
      });
    }
    // A refused operation reaches no upstream.
    expect((await emulator.upstreamCalls()).total).toBe(upstreamBefore);

    // The other client is not charged for the first one's refusals, on either replica.
    for (const replica of replicas) {
      const other = await replica.query(QUERY, undefined, web);
      expect(other.status).toBe(200);
      expect(other.body.data).toEqual({ customer: { id: 'cus_acme' } });
    }
  });

  test('every token of a named client spends from its one budget; other callers keep RATE_LIMIT_REQUESTS per subject', async () => {
    // Two tokens of one client with different subjects (an `azp` only, as some issuers write it):
    // each spends its share (half of 600) of the one budget, and is told of its share alone.
    const first = await issuerSignedToken({ sub: 'user-1', client_id: undefined, azp: 'test-web-app' });
    const second = await issuerSignedToken({ sub: 'user-2', client_id: undefined, azp: 'test-web-app' });
    const a = await replicas[0]!.query(QUERY, undefined, { authorization: `Bearer ${first}` });
    const b = await replicas[1]!.query(QUERY, undefined, { authorization: `Bearer ${second}` });
    expect(fieldOf(a.headers.get('ratelimit-policy'))).toEqual({
      policy: 'per-client-share',
      params: { q: 300, w: 60 },
    });
    expect(fieldOf(a.headers.get('ratelimit')).params['r']).toBe(299);
    expect(fieldOf(b.headers.get('ratelimit')).params['r']).toBe(299);

    // A client no entry names: its own subject's budget of RATE_LIMIT_REQUESTS (5).
    const acme = await bearer('acme');
    const states: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      const answer = await replicas[i % 2]!.query(QUERY, undefined, acme);
      expect(answer.status).toBe(200);
      expect(fieldOf(answer.headers.get('ratelimit-policy'))).toEqual({
        policy: 'per-caller',
        params: { q: 5, w: 60 },
      });
      states.push(fieldOf(answer.headers.get('ratelimit')).params['r'] ?? -1);
    }
    expect(states).toEqual([4, 3, 2, 1, 0]);
    expect((await replicas[0]!.query(QUERY, undefined, acme)).status).toBe(429);
  });

  test('a client_id claim a caller cannot sign is no way into another client’s budget', async () => {
    // A token signed by another key naming the big client: refused as a credential, not counted.
    const forged = await issuerSignedToken({ client_id: 'test-web-app' }, { kid: 'not-the-issuers-key' });
    const answer = await replicas[0]!.query(QUERY, undefined, { authorization: `Bearer ${forged}` });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('ratelimit')).toBeNull();
  });

  test('over graphql-ws, the refusal of a spent client budget carries the same figures', async () => {
    const token = await tokenFor('batchJob');
    const client = replicas[1]!.connect({ Authorization: `Bearer ${token}` });
    // The budget was spent over HTTP by the first test: the socket's operation is refused.
    const outcome = client.subscribe(QUERY);
    await outcome.done;
    const errors = (outcome.errors as unknown[]).flat() as { extensions?: Record<string, unknown> }[];
    expect(outcome.data).toEqual([]);
    expect(errors[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      rateLimit: { policy: 'per-client', quota: 8, windowSeconds: 60, remaining: 0 },
    });
  });

  test('over SSE, the refusal of a spent client budget is a 429 with the header fields', async () => {
    const response = await fetch(`${replicas[0]!.url}/graphql/stream`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(await bearer('batchJob')),
      },
      body: JSON.stringify({ query: 'subscription { customerChanged(customerId: "cus_acme") { eventId } }' }),
    });
    expect(response.status).toBe(429);
    expect(fieldOf(response.headers.get('ratelimit-policy'))).toEqual({
      policy: 'per-client',
      params: { q: 8, w: 60 },
    });
    expect(fieldOf(response.headers.get('ratelimit')).params['r']).toBe(0);
    const body = (await response.json()) as { errors: { extensions: Record<string, unknown> }[] };
    expect(body.errors[0]?.extensions['code']).toBe('RATE_LIMITED');
  });
});

describe('tenants of one shared client, across two replicas, MCP included', () => {
  const asTenant = async (sub: string) => ({
    authorization: `Bearer ${await issuerSignedToken({ sub, client_id: 'shared-app' })}`,
  });
  const remainingOf = (headers: Headers) => fieldOf(headers.get('ratelimit')).params['r'];

  test('no tenant spends the whole pool, and none is told what another spent', async () => {
    const tenantA = await asTenant('tenant-a');
    const tenantB = await asTenant('tenant-b');
    // A spends its share of the pool of 40 (50%: 20), on both replicas, and is told of its share.
    const seen: (number | undefined)[] = [];
    for (let i = 0; i < 20; i += 1) {
      const answer = await replicas[i % 2]!.query(QUERY, undefined, tenantA);
      expect(answer.status).toBe(200);
      expect(fieldOf(answer.headers.get('ratelimit-policy'))).toEqual({
        policy: 'per-client-share',
        params: { q: 20, w: 60 },
      });
      seen.push(remainingOf(answer.headers));
    }
    expect(seen).toEqual([...Array(20).keys()].map((spent) => 19 - spent));
    const upstreamBefore = (await emulator.upstreamCalls()).total;
    for (const replica of replicas) {
      const refused = await replica.query(QUERY, undefined, tenantA);
      expect(refused.status).toBe(429);
      expect(remainingOf(refused.headers)).toBe(0);
    }
    expect((await emulator.upstreamCalls()).total).toBe(upstreamBefore);

    // B is served, and its header counts its own operations only: nothing of A's 22.
    const first = await replicas[1]!.query(QUERY, undefined, tenantB);
    expect(first.status).toBe(200);
    expect(remainingOf(first.headers)).toBe(19);

    // Over MCP, on the other replica: the same share, the same header.
    const session = await openRawSession(replicas[0]!.url, tenantB.authorization.slice('Bearer '.length));
    const read = await mcpRequest(
      replicas[0]!.url,
      { jsonrpc: '2.0', id: 3, method: 'resources/read', params: { uri: 'platform://customers/cus_acme' } },
      session,
    );
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ result: { contents: [{ uri: 'platform://customers/cus_acme' }] } });
    expect(fieldOf(read.headers.get('ratelimit-policy')).params).toEqual({ q: 20, w: 60 });
    // Every POST to /mcp is an operation: `initialize`, `notifications/initialized`, the read.
    expect(remainingOf(read.headers)).toBe(16);
  });

  test('once the tenants together spent the pool, a tenant with share left waits, told only r=0', async () => {
    // The pool (40) holds B's 4 and A's 20 (A's refusals never reached it); B's new session 2 more.
    const session = await openRawSession(
      replicas[1]!.url,
      (await asTenant('tenant-b')).authorization.slice(7),
    );
    const tenantC = await asTenant('tenant-c');
    let accepted = 0;
    let refused: Awaited<ReturnType<RunningFacade['query']>> | undefined;
    while (refused === undefined && accepted < 20) {
      const answer = await replicas[accepted % 2]!.query(QUERY, undefined, tenantC);
      if (answer.status === 200) accepted += 1;
      else refused = answer;
    }
    // C stopped short of its share of 20: the pool was spent.
    expect(accepted).toBe(14);
    expect(refused?.status).toBe(429);
    const retryAfter = Number(refused?.headers.get('retry-after'));
    expect(fieldOf(refused!.headers.get('ratelimit'))).toEqual({
      policy: 'per-client-share',
      params: { r: 0, t: retryAfter },
    });
    expect(refused!.body.errors?.[0]?.extensions?.['rateLimit']).toEqual({
      policy: 'per-client-share',
      quota: 20,
      windowSeconds: 60,
      remaining: 0,
      resetSeconds: retryAfter,
    });
    // Over MCP too: B, with share left, is refused by the spent pool, told r=0 and nothing more.
    const read = await mcpRequest(
      replicas[1]!.url,
      { jsonrpc: '2.0', id: 3, method: 'resources/read', params: { uri: 'platform://customers/cus_acme' } },
      session,
    );
    expect(read.status).toBe(429);
    expect(remainingOf(read.headers)).toBe(0);
  });
});

describe('RATE_LIMIT_BY_CLIENT is validated', () => {
  test.each([
    ['batch-job=0', 'batch-job=0'],
    ['batch-job', 'batch-job'],
    ['=8', '=8'],
    ['batch-job=8,batch-job=9', 'a client may be named once'],
    ['batch job=8', 'batch job=8'],
    ['web-app=ten', 'web-app=ten'],
    ['web-app=100000000', 'web-app=100000000'],
  ])('%s is refused with one clear error', (value, named) => {
    const error = (() => {
      try {
        loadConfig({ ...facadeTestEnv('http://127.0.0.1:9'), RATE_LIMIT_BY_CLIENT: value });
        return undefined;
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain('RATE_LIMIT_BY_CLIENT');
    expect(message).toContain(named);
    expect(message.match(/RATE_LIMIT_BY_CLIENT/g)).toHaveLength(1);
  });

  test('a good value is read as budgets per client', () => {
    const config = loadConfig({
      ...facadeTestEnv('http://127.0.0.1:9'),
      RATE_LIMIT_BY_CLIENT: ' batch-job=8 ,web-app=600,',
    });
    expect([...(config.edge.rateLimits.byClient ?? [])]).toEqual([
      ['batch-job', 8],
      ['web-app', 600],
    ]);
  });
});
