/**
 * Apollo Client 4's `BatchHttpLink` through the real Hive Gateway CLI: the shipped configuration
 * refuses a client's batch (400 `Batching is not supported.`); with its request batching on
 * (test/federation/gateway-variants/gateway.config.ts, `GATEWAY_BATCHING`) the gateway answers the
 * batch itself and sends each operation to the facade on its own, never the batch as one: what
 * reaches the facade is counted here (its operations, with the emulator's counts), and each
 * operation is still admitted by the facade as the caller's.
 */
import { resolve } from 'node:path';
import { ApolloClient, gql, InMemoryCache } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { type FederationStack, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, tokenFor } from '../support/tokens.ts';

const processes = useProcesses();

const QUERIES = [
  'query Name { customer(id: "cus_acme") { id displayName } }',
  'query Notes { customer(id: "cus_acme") { id openSupportNoteCount } }',
  'query Other { customer(id: "cus_globex") { id } }',
];

let federation: FederationStack;
let shipped: RunningGatewayProcess;
let batching: RunningGatewayProcess;
/** HTTP requests the facade received, and GraphQL operations it ran, since the last reset. */
let facadeRequests = 0;

beforeAll(async () => {
  federation = await startFederationStack({ env: { CACHE_ENABLED: 'false' } });
  federation.stack.facade.app.lifecycle.on('operationStarted', () => (facadeRequests += 1));
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  const env = { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! };
  [shipped, batching] = await Promise.all([
    startHiveGatewayCli(processes, { supergraphSdl: federation.supergraphSdl, env }),
    startHiveGatewayCli(processes, {
      supergraphSdl: federation.supergraphSdl,
      cwd: resolve(import.meta.dirname, 'gateway-variants'),
      env: { ...env, GATEWAY_BATCHING: '10' },
    }),
  ]);
});

afterAll(async () => {
  await Promise.all([shipped?.close(), batching?.close()]);
  await federation?.close();
});

beforeEach(async () => {
  facadeRequests = 0;
  await federation.stack.resetUpstreamCalls();
});

/** The three queries at once through `BatchHttpLink` to `url`, as acme: each answer, and the HTTP requests sent. */
async function batchOf(url: string) {
  let requests = 0;
  const link = new BatchHttpLink({
    uri: url,
    headers: { authorization: `Bearer ${await tokenFor('acme')}` },
    batchInterval: 20,
    fetch: (input, init) => {
      requests += 1;
      return fetch(input, init);
    },
  });
  const client = new ApolloClient({ link, cache: new InMemoryCache() });
  try {
    const answers = await Promise.all(
      QUERIES.map((query) => client.query({ query: gql(query), errorPolicy: 'all' })),
    );
    return { answers, requests };
  } finally {
    client.stop();
  }
}

describe('BatchHttpLink through Hive Gateway', () => {
  test('the shipped configuration refuses the batch: an error for each operation, nothing sent on', async () => {
    const { answers, requests } = await batchOf(shipped.url);
    expect(requests).toBe(1);
    for (const answer of answers) expect(answer.error).toBeDefined();
    expect(facadeRequests).toBe(0);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });

  test('with its batching on, the gateway answers each in order; the facade admits each as acme’s', async () => {
    const { answers, requests } = await batchOf(batching.url);
    expect(requests).toBe(1);
    expect(answers[0]!.data).toEqual({
      customer: { __typename: 'Customer', id: 'cus_acme', displayName: 'Acme Robotics Ltd' },
    });
    expect(answers[1]!.data).toEqual({
      customer: { __typename: 'Customer', id: 'cus_acme', openSupportNoteCount: 2 },
    });
    // Another customer's: refused by the facade's scope, as if sent alone.
    expect(answers[2]!.data).toEqual({ customer: null });
    expect(answers[2]!.error?.message).toBeDefined();
    // What reached the facade: each operation on its own, not the client's batch as one array, so
    // acme's two operations each read the customer (a forwarded batch would have read it once).
    expect(facadeRequests).toBe(3);
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 2 });
  });

  test('what the gateway itself answers: a batch without its batching on, one over its limit, ten thousand', async () => {
    const post = async (url: string, batch: unknown[]) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await tokenFor('acme')}` },
        body: JSON.stringify(batch),
      });
      const body = (await response.json()) as { errors?: { message: string }[] };
      return { status: response.status, messages: body.errors?.map((error) => error.message) };
    };
    const operations = (count: number) => Array.from({ length: count }, () => ({ query: QUERIES[0] }));
    expect(await post(shipped.url, operations(2))).toEqual({
      status: 400,
      messages: ['Batching is not supported.'],
    });
    for (const count of [11, 10_000]) {
      expect(await post(batching.url, operations(count))).toEqual({
        status: 413,
        messages: ['Batching is limited to 10 operations per request.'],
      });
    }
    expect(facadeRequests).toBe(0);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });
});
