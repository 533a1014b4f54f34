/**
 * Contracts per audience (schema/contracts.json, src/graph/audiences.ts): a token whose contract
 * claim names `partner` is served the schema without what `@tag(name: "internal")` marks, over HTTP
 * and every live transport of `LIVE_TRANSPORTS` alike. What the contract hides is unknown to that
 * caller, exactly as if it did not exist: "Cannot query field", no suggestion naming it, nothing of
 * it in introspection or the SDL, and no upstream call. An `internal` token, and a token naming no
 * contract (no `CONTRACT_DEFAULT`), are served the whole schema; a token naming a contract not
 * served is refused, never served the whole schema.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import { LIVE_TRANSPORTS } from '../../src/edge/live-transports.ts';
import type { LiveTransport } from '../../src/edge/live.ts';
import { openMultipartStream, APOLLO_SUBSCRIPTION_ACCEPT } from '../support/harness/multipart-stream.ts';
import { openSseStream } from '../support/harness/sse-stream.ts';
import type { Stack } from '../support/harness/stack.ts';
import { useStack } from '../support/harness/stack.ts';
import { issuerSignedToken, tokenFor, type TestCallerName } from '../support/tokens.ts';

const FEES = '{ account(customerId: "cus_acme", id: "acc_acme_eth") { id fees { accountId } } }';
const ACCOUNT_TYPE = '{ __type(name: "Account") { fields { name } } }';
const HIDDEN_TYPE = '{ __type(name: "WebhookEndpoint") { name } }';
const TYPE_NAMES = '{ __schema { types { name } mutationType { fields { name } } } }';
const SDL = '{ _service { sdl } }';
const EVENTS = 'subscription { events(customerId: "cus_acme") { cursor } }';
const LIVE_FEES =
  'query @live { account(customerId: "cus_acme", id: "acc_acme_eth") { id fees { accountId } } }';

interface Answer {
  status: number;
  body: {
    data?: Record<string, unknown> | null;
    errors?: { message: string; extensions?: { code?: string } }[];
  };
}

async function post(stack: Stack, authorization: string, query: string): Promise<Answer> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      authorization,
    },
    body: JSON.stringify({ query }),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

const bearerOf = async (caller: TestCallerName) => `Bearer ${await tokenFor(caller)}`;

/** The first error `transport` answers `query` from `authorization` with, before anything runs. */
async function refusedOverLive(
  stack: Stack,
  transport: LiveTransport,
  authorization: string,
  query: string,
): Promise<{ message: string; code: string | undefined } | undefined> {
  const how = transport.rules.connects;
  let errors: { message: string; extensions?: { code?: string } }[];
  if (how.wire === 'websocket') {
    const received = stack.connect({ Authorization: authorization }).subscribe(query);
    await received.done;
    errors = (received.errors as unknown[]).flat() as typeof errors;
  } else {
    const stream = await openStream(stack, transport, authorization, query);
    stream.close();
    errors = (stream.body as Answer['body'] | undefined)?.errors ?? [];
  }
  const first = errors[0];
  return first === undefined ? undefined : { message: first.message, code: first.extensions?.code };
}

/** Subscribes to `query` over `transport` from `authorization`, waits until it listens, and ends it. */
async function startsOverLive(
  stack: Stack,
  transport: LiveTransport,
  authorization: string,
  query: string,
): Promise<void> {
  if (transport.rules.connects.wire === 'websocket') {
    const received = stack.connect({ Authorization: authorization }).subscribe(query);
    await stack.subscriptionsStarted(1);
    received.stop();
  } else {
    const stream = await openStream(stack, transport, authorization, query);
    await stack.subscriptionsStarted(1);
    stream.close();
  }
  await stack.subscriptionsCompleted(1);
}

function openStream(stack: Stack, transport: LiveTransport, authorization: string, query: string) {
  return transport.rules.connects.path === '/graphql/stream'
    ? openSseStream(stack.facadeUrl, query, { authorization })
    : openMultipartStream(stack.facadeUrl, query, { authorization, accept: APOLLO_SUBSCRIPTION_ACCEPT });
}

describe('a partner token is served the partner contract', () => {
  const stack = useStack();
  let partner: string;

  beforeAll(async () => {
    partner = await bearerOf('partner');
    // The facade key's environment is learnt by the first live connection: counted once, here.
    const warm = stack.connect({ Authorization: await bearerOf('internalTool') }).subscribe(EVENTS);
    await stack.subscriptionsStarted(1);
    warm.stop();
    await stack.subscriptionsCompleted(1);
  });

  test('a field the contract hides is unknown over HTTP, with no suggestion naming it and no upstream call', async () => {
    await stack.resetUpstreamCalls();
    const answer = await post(stack, partner, FEES);
    expect(answer.status).toBe(400);
    expect(answer.body.errors).toMatchObject([
      {
        message: 'Cannot query field "fees" on type "Account".',
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
      },
    ]);
    const misspelt = await post(
      stack,
      partner,
      '{ account(customerId: "cus_acme", id: "acc_acme_eth") { fee } }',
    );
    expect(misspelt.status).toBe(400);
    expect(JSON.stringify(misspelt.body)).not.toContain('fees');
    const root = await post(stack, partner, '{ webhookEndpoints { nodes { id } } }');
    expect(root.body.errors?.[0]?.message).toBe('Cannot query field "webhookEndpoints" on type "Query".');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('introspection and the SDL show nothing the contract hides', async () => {
    await stack.resetUpstreamCalls();
    const fields = await post(stack, partner, ACCOUNT_TYPE);
    const names = (fields.body.data?.['__type'] as { fields: { name: string }[] }).fields.map((f) => f.name);
    expect(names).toContain('balances');
    expect(names).not.toContain('fees');
    expect((await post(stack, partner, HIDDEN_TYPE)).body).toEqual({ data: { __type: null } });
    const schema = (await post(stack, partner, TYPE_NAMES)).body.data?.['__schema'] as {
      types: { name: string }[];
      mutationType: { fields: { name: string }[] };
    };
    const types = schema.types.map((type) => type.name);
    expect(types).toContain('Account');
    for (const hidden of ['WebhookEndpoint', 'AccountFees', 'PlatformEvent', 'CreateCustomerInput']) {
      expect(types).not.toContain(hidden);
    }
    const mutations = schema.mutationType.fields.map((field) => field.name);
    expect(mutations).toContain('sandboxTopUp');
    expect(mutations).not.toContain('createCustomer');
    const sdl = ((await post(stack, partner, SDL)).body.data?.['_service'] as { sdl: string }).sdl;
    expect(sdl).toContain('type Account');
    expect(sdl).not.toMatch(/\bfees:|webhookEndpoints|type WebhookEndpoint|createCustomer/);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test.each(LIVE_TRANSPORTS.map((transport) => [transport.rules.name, transport] as const))(
    'over %s, a subscription and a live query the contract hides are unknown, with no upstream call',
    async (_name, transport) => {
      await stack.resetUpstreamCalls();
      expect(await refusedOverLive(stack, transport, partner, EVENTS)).toEqual({
        message: 'Cannot query field "events" on type "Subscription".',
        code: 'GRAPHQL_VALIDATION_FAILED',
      });
      expect(await refusedOverLive(stack, transport, partner, LIVE_FEES)).toEqual({
        message: 'Cannot query field "fees" on type "Account".',
        code: 'GRAPHQL_VALIDATION_FAILED',
      });
      expect((await stack.upstreamCalls()).total).toBe(0);
    },
  );

  test.each(LIVE_TRANSPORTS.map((transport) => [transport.rules.name, transport] as const))(
    'over %s, an internal token subscribes to what the partner contract hides',
    async (_name, transport) => {
      await startsOverLive(stack, transport, await bearerOf('internalTool'), EVENTS);
    },
  );

  test('an internal token, and a token naming no contract, are served the whole schema', async () => {
    for (const caller of ['internalTool', 'acme'] as const) {
      await stack.resetUpstreamCalls();
      const answer = await post(stack, await bearerOf(caller), FEES);
      expect(answer.body.errors).toBeUndefined();
      expect(answer.body.data).toMatchObject({ account: { id: 'acc_acme_eth' } });
      expect((await stack.upstreamCalls()).total).toBeGreaterThan(0);
      const fields = await post(stack, await bearerOf(caller), ACCOUNT_TYPE);
      expect(JSON.stringify(fields.body)).toContain('"fees"');
    }
  });

  test('a token naming a contract not served is refused, never served the whole schema', async () => {
    await stack.resetUpstreamCalls();
    const unknown = await post(stack, `Bearer ${await issuerSignedToken({ contract: 'everything' })}`, FEES);
    expect(unknown.status).toBe(403);
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // A claim that is not a name at all is refused with the token.
    const unreadable = await post(
      stack,
      `Bearer ${await issuerSignedToken({ contract: ['partner', 'internal'] })}`,
      FEES,
    );
    expect(unreadable.status).toBe(401);
    const live = stack.connect({
      Authorization: `Bearer ${await issuerSignedToken({ contract: 'everything' })}`,
    });
    expect((await live.closed).code).toBe(4403);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('CONTRACT_DEFAULT: a token naming no contract is served the default one', () => {
  const stack = useStack({ env: { CONTRACT_DEFAULT: 'partner' } });

  test('acme (no contract claim) meets the partner contract; an internal token still the whole schema', async () => {
    const acme = await post(stack, await bearerOf('acme'), FEES);
    expect(acme.body.errors?.[0]?.message).toBe('Cannot query field "fees" on type "Account".');
    const internal = await post(stack, await bearerOf('internalTool'), FEES);
    expect(internal.body.errors).toBeUndefined();
  });
});

describe('with the response cache and the answer cache on, no audience is served another’s answer', () => {
  const stack = useStack({ env: { CACHE_ENABLED: 'true' } });

  test('an answer held for an internal token is never an answer to the same caller under the partner contract', async () => {
    const internal = await bearerOf('internalTool');
    expect((await post(stack, internal, FEES)).body.errors).toBeUndefined();
    await stack.resetUpstreamCalls();
    // Served again from the caches: nothing is read upstream.
    expect((await post(stack, internal, FEES)).body.data).toMatchObject({ account: { id: 'acc_acme_eth' } });
    expect((await stack.upstreamCalls()).total).toBe(0);
    // The same subject and client, its token naming the partner contract: refused before any cache.
    const sameCallerAsPartner = `Bearer ${await issuerSignedToken({
      sub: 'test-internal-tool',
      client_id: 'test-internal-tool',
      contract: 'partner',
    })}`;
    const answer = await post(stack, sameCallerAsPartner, FEES);
    expect(answer.status).toBe(400);
    expect(answer.body.data).toBeUndefined();
    expect(answer.body.errors?.[0]?.message).toBe('Cannot query field "fees" on type "Account".');
    // What the contract shows is read through the same response cache, shaped by the partner's schema.
    const shown = await post(stack, sameCallerAsPartner, ACCOUNT_TYPE);
    expect(JSON.stringify(shown.body)).not.toContain('"fees"');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});
