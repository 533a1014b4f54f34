/**
 * `@defer` as a frontend sends it: Apollo Client 4 with only an `HttpLink` and its defer handler
 * (`Defer20220824Handler`), at the Hive Gateway CLI running the shipped deploy/gateway.config.ts
 * (`deferStream`) in front of the facade, with real tokens of the run's issuer.
 *
 * The customer's list is made slow at the emulator (a delay on the accounts route), and the order of
 * arrival is what is asserted: Apollo Client shows the customer's header before the facade has
 * answered the gateway's fetch of the list, then the list. The gateway fetches the deferred fragment with an
 * entity fetch of its own, which the facade answers from the customer's id: the emulator counts the
 * same calls as for the same query without `@defer`; several deferred lists are one follow-up fetch,
 * and a deferred field of the customer's record reads the record again (what the docs say it costs). The refusals go through the same path: no token
 * (401 at the gateway) and another customer's id (NOT_FOUND from the facade), with no upstream call;
 * a token that expires between the parts gets the first part, and UNAUTHENTICATED for the list,
 * which is not read.
 * The facade's own endpoint refuses `@defer` with an error naming the gateway, over HTTP and
 * graphql-ws, and answers the next operation as usual.
 */
import { ApolloClient, gql, HttpLink, InMemoryCache, type TypedDocumentNode } from '@apollo/client';
import { CombinedGraphQLErrors } from '@apollo/client/errors';
import { Defer20220824Handler } from '@apollo/client/incremental';
import { createClient as createWsClient } from 'graphql-ws';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { servedAtTheGatewayMessage } from '../../src/graph/incremental-delivery.ts';
import { type FederationStack, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGatewayProcess, startHiveGatewayCli } from '../support/harness/gateways.ts';
import { useProcesses } from '../support/processes.ts';
import { issuerEnv, issuerSignedToken, tokenFor } from '../support/tokens.ts';

// The CLI comes through test/support/processes.ts: this file runs in the `processes` project.
const processes = useProcesses();

let federation: FederationStack;
let gateway: RunningGatewayProcess;

beforeAll(async () => {
  // No leeway: a token ends when its `exp` says, at the gateway and at the facade alike.
  federation = await startFederationStack({ env: { AUTH_CLOCK_TOLERANCE_SECONDS: '0' } });
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  gateway = await startHiveGatewayCli(processes, {
    supergraphSdl: federation.supergraphSdl,
    env: { AUTH_ISSUER: AUTH_ISSUER!, AUTH_AUDIENCE: AUTH_AUDIENCE! },
  });
});

afterAll(async () => {
  await gateway?.close();
  await federation?.close();
});

beforeEach(async () => {
  await federation.stack.clearFaults();
  await federation.stack.resetUpstreamCalls();
});

/**
 * The accounts route answers this much later than the others: the slow list. It only has to be
 * longer than the gateway takes to pass the first part on, also on a busy machine.
 */
const SLOW_LIST_MS = 2_000;

async function makeTheListSlow(): Promise<void> {
  await federation.stack.setFaults({
    rules: [{ route: 'GET /v3/customers/{customerId}/accounts', kind: 'delay', delayMs: SLOW_LIST_MS }],
  });
}

type Dashboard = {
  customer: {
    __typename?: 'Customer';
    id: string;
    displayName: string | null;
    accounts?: { __typename?: 'AccountConnection'; nodes: { __typename?: 'Account'; id: string }[] } | null;
  } | null;
};

const DEFERRED_DASHBOARD: TypedDocumentNode<Dashboard, { id: string }> = gql`
  query DeferredDashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      ... @defer(label: "lists") {
        accounts(first: 5) {
          nodes {
            id
          }
        }
      }
    }
  }
`;

const WHOLE_DASHBOARD: TypedDocumentNode<Dashboard, { id: string }> = gql`
  query WholeDashboard($id: ID!) {
    customer(id: $id) {
      id
      displayName
      accounts(first: 5) {
        nodes {
          id
        }
      }
    }
  }
`;

const ACME_ACCOUNTS = ['acc_acme_eth', 'acc_acme_polygon', 'acc_acme_bank'];

/**
 * What happened, in order: the facade finishing a request of the gateway (just before writing its
 * answer), the client's HTTP response, and each of Apollo Client's results.
 */
type Arrival =
  | { kind: 'facade answered' }
  | { kind: 'response'; status: number }
  | { kind: 'result'; dataState: string; data: Dashboard | undefined };

/** fetch that notes the status of each response in `arrivals`. */
function recordingFetch(arrivals: Arrival[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    arrivals.push({ kind: 'response', status: response.status });
    return response;
  };
}

/** Apollo Client 4 at `uri` with only an HttpLink, the 2022-08-24 defer handler and `token`, if any. */
function apolloClient(uri: string, token: string | undefined, arrivals: Arrival[] = []): ApolloClient {
  return new ApolloClient({
    link: new HttpLink({
      uri,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      fetch: recordingFetch(arrivals),
    }),
    cache: new InMemoryCache(),
    incrementalHandler: new Defer20220824Handler(),
  });
}

/** Watches `query` until its result is complete (or fails), noting each result in `arrivals`. */
async function watchUntilComplete(
  client: ApolloClient,
  query: TypedDocumentNode<Dashboard, { id: string }>,
  arrivals: Arrival[],
): Promise<void> {
  const observable = client.watchQuery({ query, variables: { id: 'cus_acme' }, fetchPolicy: 'network-only' });
  await new Promise<void>((resolve, reject) => {
    const subscription = observable.subscribe({
      next(result) {
        if (result.error) {
          subscription.unsubscribe();
          reject(result.error);
          return;
        }
        if (result.dataState === 'empty') return;
        arrivals.push({ kind: 'result', dataState: result.dataState, data: result.data as Dashboard });
        if (result.dataState === 'complete') {
          subscription.unsubscribe();
          resolve();
        }
      },
      error: reject,
    });
  });
}

describe("acme's dashboard with its list deferred, through the gateway", () => {
  test('Apollo Client shows the customer before the facade has answered the slow list, then the list', async () => {
    await makeTheListSlow();
    const arrivals: Arrival[] = [];
    const stopListening = federation.stack.app.lifecycle.on('operationCompleted', () =>
      arrivals.push({ kind: 'facade answered' }),
    );
    const client = apolloClient(gateway.url, await tokenFor('acme'), arrivals);
    try {
      await watchUntilComplete(client, DEFERRED_DASHBOARD, arrivals);
    } finally {
      client.stop();
      stopListening();
    }

    // Order of arrival: the facade answered the gateway's first fetch (the customer), Apollo Client
    // showed the customer, and only then did the facade answer the gateway's fetch of the deferred
    // list (held back at the emulator), which Apollo Client then merged. A gateway that waited for
    // the list would have made one fetch, answered once, before the first result.
    const header = { customer: { __typename: 'Customer', id: 'cus_acme', displayName: 'Acme Robotics Ltd' } };
    expect(arrivals).toEqual([
      { kind: 'facade answered' },
      { kind: 'response', status: 200 },
      { kind: 'result', dataState: 'streaming', data: header },
      { kind: 'facade answered' },
      {
        kind: 'result',
        dataState: 'complete',
        data: {
          customer: {
            ...header.customer,
            accounts: {
              __typename: 'AccountConnection',
              nodes: ACME_ACCOUNTS.map((id) => ({ __typename: 'Account', id })),
            },
          },
        },
      },
    ]);
  });

  test('the emulator counts the same calls as for the same query without @defer', async () => {
    const token = await tokenFor('acme');
    const deferredClient = apolloClient(gateway.url, token);
    try {
      await watchUntilComplete(deferredClient, DEFERRED_DASHBOARD, []);
    } finally {
      deferredClient.stop();
    }
    const deferred = await federation.stack.upstreamCalls();

    await federation.stack.resetUpstreamCalls();
    const wholeClient = apolloClient(gateway.url, token);
    const whole = await wholeClient.query({ query: WHOLE_DASHBOARD, variables: { id: 'cus_acme' } });
    wholeClient.stop();
    expect(whole.data?.customer?.accounts?.nodes.map(({ id }) => id)).toEqual(ACME_ACCOUNTS);
    const undeferred = await federation.stack.upstreamCalls();

    expect(deferred).toEqual(undeferred);
    expect(deferred).toEqual({
      total: 2,
      byRoute: { 'GET /v3/customers/{customerId}': 1, 'GET /v3/customers/{customerId}/accounts': 1 },
    });
  });
});

/** Posts `query` to the gateway as acme (or with `token`), reads the whole multipart answer; counts the facade's requests. */
async function deferredAtTheGateway(
  query: string,
  token?: string,
): Promise<{ text: string; facadeRequests: number }> {
  let facadeRequests = 0;
  const stopListening = federation.stack.app.lifecycle.on('operationCompleted', () => (facadeRequests += 1));
  try {
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;deferSpec=20220824',
        authorization: `Bearer ${token ?? (await tokenFor('acme'))}`,
      },
      body: JSON.stringify({ query }),
    });
    expect(response.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    return { text: await response.text(), facadeRequests };
  } finally {
    stopListening();
  }
}

/** The JSON bodies of a `multipart/mixed` answer, in order. */
function partsOf(text: string): unknown[] {
  return text
    .split(/\r\n---/)
    .map((part) => part.slice(part.indexOf('\r\n\r\n') + 4).trim())
    .filter((body) => body.startsWith('{'))
    .map((body) => JSON.parse(body) as unknown);
}

describe('what deferring costs', () => {
  const LIST = 'accounts(first: 5) { nodes { id } }';

  test('three deferred fragments of lists: one follow-up fetch, the calls of the query without @defer', async () => {
    const { text, facadeRequests } = await deferredAtTheGateway(
      `{ customer(id: "cus_acme") { id ... @defer(label: "a") { ${LIST} } ... @defer(label: "b") { ${LIST} } ... @defer(label: "c") { ${LIST} } } }`,
    );
    expect(text.match(/"label":"[abc]"/g)?.sort()).toEqual(['"label":"a"', '"label":"b"', '"label":"c"']);
    expect(facadeRequests).toBe(2);
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 2,
      byRoute: { 'GET /v3/customers/{customerId}': 1, 'GET /v3/customers/{customerId}/accounts': 1 },
    });
  });

  test("a deferred field of the customer's record reads the record again in the follow-up fetch", async () => {
    const { text } = await deferredAtTheGateway(
      `{ customer(id: "cus_acme") { id ... @defer { displayName ${LIST} } } }`,
    );
    expect(text).toContain('"displayName":"Acme Robotics Ltd"');
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 2,
      'GET /v3/customers/{customerId}/accounts': 1,
    });
  });
});

describe('a token that expires between the parts', () => {
  test('the follow-up fetch is refused by the facade: the list is not read, the first part stands', async () => {
    const lifetimeSeconds = 5;
    const exp = Math.floor(Date.now() / 1000) + lifetimeSeconds;
    const token = await issuerSignedToken({ sub: 'expiring-defer', client_id: 'expiring-defer', exp });
    // The first fetch is admitted while the token holds, and answered once it has expired.
    await federation.stack.setFaults({
      rules: [
        { route: 'GET /v3/customers/{customerId}', kind: 'delay', delayMs: exp * 1000 - Date.now() + 1_500 },
      ],
    });
    const admitted: number[] = [];
    const stopListening = federation.stack.app.lifecycle.on('operationStarted', () =>
      admitted.push(Date.now()),
    );
    let answer: { text: string; facadeRequests: number };
    try {
      answer = await deferredAtTheGateway(
        '{ customer(id: "cus_acme") { id displayName ... @defer { accounts(first: 5) { nodes { id } } } } }',
        token,
      );
    } finally {
      stopListening();
    }
    // The first fetch was admitted before the token expired; the follow-up, after, was refused.
    expect(admitted).toHaveLength(1);
    expect(admitted[0]).toBeLessThan(exp * 1000);
    expect(answer.facadeRequests).toBe(1);
    expect(partsOf(answer.text)).toEqual([
      { data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } }, hasNext: true },
      {
        incremental: [
          {
            data: { accounts: null },
            path: ['customer'],
            errors: [
              expect.objectContaining({
                path: ['customer', 'accounts'],
                extensions: { code: 'UNAUTHENTICATED', serviceName: 'platform' },
              }),
            ],
          },
        ],
        hasNext: false,
      },
    ]);
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 1,
      byRoute: { 'GET /v3/customers/{customerId}': 1 },
    });
  });
});

describe('refused through the same path, with no upstream call', () => {
  test('no token: 401 Unauthenticated at the gateway', async () => {
    const arrivals: Arrival[] = [];
    const client = apolloClient(gateway.url, undefined, arrivals);
    const answer = client.query({ query: DEFERRED_DASHBOARD, variables: { id: 'cus_acme' } });
    await expect(answer).rejects.toBeInstanceOf(CombinedGraphQLErrors);
    await expect(answer).rejects.toMatchObject({ errors: [{ message: 'Unauthenticated' }] });
    client.stop();
    expect(arrivals[0]).toEqual({ kind: 'response', status: 401 });
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });
  });

  test("another customer's id with acme's token: NOT_FOUND from the facade, nothing deferred", async () => {
    await makeTheListSlow();
    const client = apolloClient(gateway.url, await tokenFor('acme'));
    const answer = await client.query({
      query: DEFERRED_DASHBOARD,
      variables: { id: 'cus_globex' },
      errorPolicy: 'all',
    });
    client.stop();
    expect(answer.data).toEqual({ customer: null });
    expect(answer.error).toBeInstanceOf(CombinedGraphQLErrors);
    expect((answer.error as CombinedGraphQLErrors).errors).toEqual([
      expect.objectContaining({
        path: ['customer'],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });
  });
});

describe("the facade's own endpoint", () => {
  test('HTTP: 400, the error names the gateway; no upstream call, and the next query is answered', async () => {
    const client = apolloClient(federation.stack.graphqlUrl, await tokenFor('acme'));
    const refused = client.query({ query: DEFERRED_DASHBOARD, variables: { id: 'cus_acme' } });
    await expect(refused).rejects.toBeInstanceOf(CombinedGraphQLErrors);
    await expect(refused).rejects.toMatchObject({
      errors: expect.arrayContaining([
        expect.objectContaining({
          message: servedAtTheGatewayMessage('defer'),
          extensions: expect.objectContaining({ code: 'GRAPHQL_VALIDATION_FAILED' }),
        }),
      ]),
    });
    const raw = await fetch(federation.stack.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        authorization: `Bearer ${await tokenFor('acme')}`,
      },
      body: JSON.stringify({ query: '{ customer(id: "cus_acme") { id ... @defer { displayName } } }' }),
    });
    expect(raw.status).toBe(400);
    const body = (await raw.json()) as { errors: { message: string }[] };
    expect(body.errors[0]?.message).toBe(servedAtTheGatewayMessage('defer'));
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });

    const answered = await client.query({ query: WHOLE_DASHBOARD, variables: { id: 'cus_acme' } });
    client.stop();
    expect(answered.data?.customer?.displayName).toBe('Acme Robotics Ltd');
  });

  test('graphql-ws: the operation is refused with the same message; no upstream call', async () => {
    const client = createWsClient({
      url: federation.stack.facade.wsUrl,
      retryAttempts: 0,
      connectionParams: { Authorization: `Bearer ${await tokenFor('acme')}` },
    });
    try {
      const errors = await new Promise<unknown[]>((resolve) => {
        const received: unknown[] = [];
        client.subscribe(
          { query: '{ customer(id: "cus_acme") { id ... @defer { displayName } } }' },
          {
            next: (value) => received.push(...(value.errors ?? [])),
            error: (error) => resolve([...received, ...(Array.isArray(error) ? error : [error])]),
            complete: () => resolve(received),
          },
        );
      });
      expect(errors[0]).toMatchObject({ message: servedAtTheGatewayMessage('defer') });
    } finally {
      await client.dispose();
    }
    // The connection's own key check (capability discovery at connection_init) aside, nothing.
    const { byRoute } = await federation.stack.upstreamCalls();
    expect(Object.keys(byRoute).filter((route) => route !== 'GET /v3/capabilities')).toEqual([]);
  });
});

/** The gateway's fetch of a deferred list: the customer's entity, asked for nothing but the list. */
const DEFERRED_LIST_FETCH = `query ($representations: [_Any!]!) {
  _entities(representations: $representations) {
    ... on Customer {
      accounts(first: 5) {
        nodes {
          id
        }
      }
    }
  }
}`;

describe("the facade's answer to a fetch of a customer's lists alone", () => {
  const customer = (id: string) => ({ representations: [{ __typename: 'Customer', id }] });

  test("acme's own: the list is read, not the customer again", async () => {
    const { status, body } = await federation.stack.facade.queryAs(
      'acme',
      DEFERRED_LIST_FETCH,
      customer('cus_acme'),
    );
    expect({ status, body }).toEqual({
      status: 200,
      body: { data: { _entities: [{ accounts: { nodes: ACME_ACCOUNTS.map((id) => ({ id })) } }] } },
    });
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 1,
      byRoute: { 'GET /v3/customers/{customerId}/accounts': 1 },
    });
  });

  test("another customer's, with acme's token: NOT_FOUND, no upstream call", async () => {
    const { body } = await federation.stack.facade.queryAs(
      'acme',
      DEFERRED_LIST_FETCH,
      customer('cus_globex'),
    );
    expect(body.data).toEqual({ _entities: [{ accounts: null }] });
    expect(body.errors).toEqual([
      expect.objectContaining({
        path: ['_entities', 0, 'accounts'],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });
  });

  test("a customer the platform does not know, as the operator: the list's NOT_FOUND", async () => {
    const { body } = await federation.stack.facade.queryAs(
      'operator',
      DEFERRED_LIST_FETCH,
      customer('cus_nobody'),
    );
    expect(body.data).toEqual({ _entities: [{ accounts: null }] });
    expect(body.errors).toEqual([
      expect.objectContaining({
        path: ['_entities', 0, 'accounts'],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
  });

  test("another customer's id alone, with acme's token: the entity is refused NOT_FOUND, as before", async () => {
    const { body } = await federation.stack.facade.queryAs(
      'acme',
      'query ($representations: [_Any!]!) { _entities(representations: $representations) { ... on Customer { id } } }',
      customer('cus_globex'),
    );
    expect(body.data).toEqual({ _entities: [null] });
    expect(body.errors).toEqual([
      expect.objectContaining({
        path: ['_entities', 0],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 0, byRoute: {} });
  });

  test('a selection with a field of the record still reads the record', async () => {
    const withName = DEFERRED_LIST_FETCH.replace('... on Customer {', '... on Customer {\n      displayName');
    const { body } = await federation.stack.facade.queryAs('acme', withName, customer('cus_acme'));
    expect(body.data).toEqual({
      _entities: [
        { displayName: 'Acme Robotics Ltd', accounts: { nodes: ACME_ACCOUNTS.map((id) => ({ id })) } },
      ],
    });
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}': 1,
      'GET /v3/customers/{customerId}/accounts': 1,
    });
  });
});
