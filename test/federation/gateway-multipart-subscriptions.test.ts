/**
 * Apollo Client 4 wired the usual way, with nothing but `HttpLink`, subscribing through the
 * `hive-gateway` CLI with the shipped configuration (deploy/gateway.config.ts): Hive Gateway 2.15.1
 * alone answers such a request 406, and the configuration's plugin
 * (gateway-multipart-subscriptions.ts) serves Apollo's multipart protocol instead. Each event
 * arrives with a field of the support-notes subgraph, which only the gateway can add.
 *
 * The attacker's questions: no token (401 before any stream), another customer (the facade's
 * `NOT_FOUND`, no upstream call), a token that expires on the open stream (the facade's
 * `UNAUTHENTICATED` ends it, as Apollo's protocol's transport error), a hostile page's origin (no
 * ambient credential: a bearer token only), and a client asking for another multipart framing (a
 * clear 406 naming what works).
 */
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import type { RunningFacade } from '../support/harness/facade.ts';
import { type FederationStack, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useProcesses } from '../support/processes.ts';
import { bearer, issuerEnv, issuerSignedToken } from '../support/tokens.ts';

const processes = useProcesses();
let federation: FederationStack;
let facade: RunningFacade;
let gateway: RunningGatewayProcess;
/** The gateway's origin (its `/graphql` is where the multipart helper posts). */
let gatewayBase: string;

beforeAll(async () => {
  federation = await startFederationStack({
    env: { WEBHOOK_REGISTER: 'true', AUTH_CLOCK_TOLERANCE_SECONDS: '0' },
  });
  facade = federation.stack.facade;
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  gateway = await startHiveGatewayCli(processes, {
    supergraphSdl: federation.supergraphSdl,
    env: { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! },
  });
  gatewayBase = gateway.url.replace(/\/graphql$/, '');
});

afterAll(async () => {
  await gateway?.close();
  await federation?.close();
});

beforeEach(async () => {
  await federation.stack.resetUpstreamCalls();
});

const ACME_EVENTS = /* GraphQL */ `
  subscription AcmeEth {
    accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") {
      type
      account {
        id
        customer {
          displayName
          openSupportNoteCount
        }
      }
    }
  }
`;

type AccountChanged = {
  accountChanged: { type: string; account: { id: string; customer: { openSupportNoteCount: number } } };
};

const topUp = async () => {
  const response = await federation.stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '2.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};

/** Apollo Client 4 with one `HttpLink` to the gateway, nothing else. */
function apolloClient(authorization: string): ApolloClient {
  return new ApolloClient({
    link: new HttpLink({ uri: gateway.url, headers: { authorization } }),
    cache: new InMemoryCache(),
  });
}

/** What one Apollo Client subscription received. */
function subscribeWith(client: ApolloClient, query: string) {
  const seen = { results: [] as AccountChanged[], errors: [] as unknown[], completed: false };
  const subscription = client.subscribe<AccountChanged>({ query: gql(query) }).subscribe({
    next: (result) => {
      if (result.error !== undefined) seen.errors.push(result.error);
      else if (result.data) seen.results.push(result.data as AccountChanged);
    },
    error: (error: unknown) => seen.errors.push(error),
    complete: () => (seen.completed = true),
  });
  return { seen, stop: () => subscription.unsubscribe() };
}

const started = (): number => facade.lifecycle.count('subscriptionStarted');

describe("Apollo Client's HttpLink subscribing through Hive Gateway", () => {
  test('receives each event, with the support-notes field the gateway adds', async () => {
    const client = apolloClient((await bearer('acme')).authorization);
    const before = started();
    const { seen, stop } = subscribeWith(client, ACME_EVENTS);
    await facade.lifecycle.reached('subscriptionStarted', before + 1, 'the subscription at the facade');
    await topUp();
    await waitFor(() => seen.results.length === 1, 'the top-up through the gateway');
    expect(seen.errors).toEqual([]);
    expect(seen.results[0]!.accountChanged).toMatchObject({
      type: 'account.updated',
      account: { id: 'acc_acme_eth', customer: { openSupportNoteCount: expect.any(Number) } },
    });
    stop();
    client.stop();
  });

  test("answers in Apollo's framing: a heartbeat at once, payload-wrapped results", async () => {
    const before = started();
    const stream = await openMultipartStream<AccountChanged>(gatewayBase, ACME_EVENTS, await bearer('acme'));
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe(
      'multipart/mixed;boundary="graphql";subscriptionSpec="1.0"',
    );
    await waitFor(() => stream.parts.length >= 1, 'the first heartbeat');
    expect(stream.parts[0]).toEqual({});
    await facade.lifecycle.reached('subscriptionStarted', before + 1, 'the subscription at the facade');
    await topUp();
    await waitFor(() => stream.results().length === 1, 'the top-up');
    expect(stream.results()[0]!.data!.accountChanged.type).toBe('account.updated');
    stream.close();
  });

  test('refuses another multipart framing for a subscription with a message that says what works, asking the facade nothing', async () => {
    const before = started();
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed', ...(await bearer('acme')) },
      body: JSON.stringify({ query: ACME_EVENTS }),
    });
    expect(response.status).toBe(406);
    const body = (await response.json()) as { errors: { message: string; extensions: { code: string } }[] };
    expect(body.errors[0]!.extensions.code).toBe('NOT_ACCEPTABLE');
    expect(body.errors[0]!.message).toContain('multipart/mixed;subscriptionSpec=1.0');
    expect(body.errors[0]!.message).toContain('text/event-stream');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(started()).toBe(before);
  });
});

describe("the attacker's questions over multipart at the gateway", () => {
  test('no token, from a hostile page or not: 401 before any stream, nothing started at the facade', async () => {
    const before = started();
    for (const headers of [{}, { origin: 'https://evil.example' }] as Record<string, string>[]) {
      const stream = await openMultipartStream(gatewayBase, ACME_EVENTS, headers);
      expect(stream.status).toBe(401);
      expect(stream.parts).toEqual([]);
    }
    expect(started()).toBe(before);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });

  test("another customer's events: the facade's NOT_FOUND ends it, with no upstream call", async () => {
    const client = apolloClient((await bearer('globex')).authorization);
    const { seen } = subscribeWith(client, ACME_EVENTS);
    await waitFor(() => seen.completed, 'the refusal');
    // The facade's refusal ends the stream as Apollo's protocol ends one (`payload: null`, errors).
    expect(JSON.stringify(seen.errors)).toContain('NOT_FOUND');
    expect(seen.results).toEqual([]);
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
    client.stop();
  });

  test('a token that expires on the open stream ends it with UNAUTHENTICATED, the closing delimiter after', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 3 });
    const before = started();
    const stream = await openMultipartStream(gatewayBase, ACME_EVENTS, { authorization: `Bearer ${token}` });
    expect(stream.status).toBe(200);
    await facade.lifecycle.reached('subscriptionStarted', before + 1, 'the subscription at the facade');
    await stream.ended;
    const last = stream.parts.at(-1)!;
    expect(last.payload).toBeNull();
    expect(last.errors?.[0]?.extensions.code).toBe('UNAUTHENTICATED');
    expect(stream.closed()).toBe(true);
  });
});
