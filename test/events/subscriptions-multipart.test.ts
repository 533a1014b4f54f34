/**
 * Subscriptions over Apollo's multipart HTTP protocol at /graphql, chosen by the `Accept` header,
 * through the same door as every transport: Apollo Client 4 with nothing but its `HttpLink`
 * receives a top-up made at the emulator (whose webhook the facade verifies), and a raw reader sees
 * the framing as written (heartbeats, `payload`, the cursor in `extensions`, the final
 * `payload: null` part, the closing delimiter) and every refusal, with the emulator's counts.
 */
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { describe, expect, test } from 'vitest';
import { openMultipartStream } from '../support/harness/multipart-stream.ts';
import { useStack } from '../support/harness/stack.ts';
import { liveGauges } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { WEBHOOK_REGISTER: 'true' } });

const ACCOUNT = `subscription Account($after: String) {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth", after: $after) {
    eventId type account { balances { available } }
  }
}`;

interface AccountChanged {
  accountChanged: { eventId: string; type: string; account: { balances: { available: string }[] } };
}

const multipartGauges = () => liveGauges(stack, 'multipart');
const operator = async () => ({ authorization: `Bearer ${await tokenFor('operator')}` });
const topUp = async () => {
  const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    body: { amount: '2.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
};

/** Apollo Client 4 with one `HttpLink` and nothing else: no WebSocket link, no SSE link. */
function apolloClient(authorization: string): ApolloClient {
  return new ApolloClient({
    link: new HttpLink({ uri: stack.graphqlUrl, headers: { authorization } }),
    cache: new InMemoryCache(),
  });
}

/** What one Apollo Client subscription received. */
function subscribeWith<Data>(client: ApolloClient, query: string) {
  const seen = {
    results: [] as { data?: Data; extensions?: Record<string, unknown> }[],
    errors: [] as unknown[],
    completed: false,
  };
  const subscription = client.subscribe<Data>({ query: gql(query) }).subscribe({
    next: (result) => {
      if (result.error === undefined) seen.results.push(result as never);
      else seen.errors.push(result.error);
    },
    error: (error: unknown) => seen.errors.push(error),
    complete: () => (seen.completed = true),
  });
  return { seen, stop: () => subscription.unsubscribe() };
}

describe('subscriptions over the multipart HTTP protocol', () => {
  test('Apollo Client with only HttpLink receives a top-up made at the upstream', async () => {
    const client = apolloClient((await operator()).authorization);
    await stack.resetUpstreamCalls();
    const { seen, stop } = subscribeWith<AccountChanged>(client, ACCOUNT);
    await stack.subscriptionsStarted(1);
    expect(await multipartGauges()).toEqual({ connections: 1, subscriptions: 1 });

    await topUp();
    await waitFor(() => seen.results.length === 1, 'the top-up over multipart');
    expect(seen.errors).toEqual([]);
    expect(seen.results[0]!.data?.accountChanged).toMatchObject({
      type: 'account.updated',
      account: { balances: [{ available: expect.any(String) }] },
    });
    // The event's cursor rides beside the result, whatever the document selected.
    expect(seen.results[0]!.extensions?.['cursor']).toMatch(/^\d+-\d+$/);
    stop();
    await stack.subscriptionsCompleted(1);
    client.stop();
  });

  test('the framing: a heartbeat at once and again once quiet, payload-wrapped results, the cursor beside them', async () => {
    const stream = await openMultipartStream<AccountChanged>(stack.facadeUrl, ACCOUNT, await operator());
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe(
      'multipart/mixed;boundary="graphql";subscriptionSpec="1.0"',
    );
    await stack.subscriptionsStarted(1);
    await waitFor(() => stream.parts.length >= 1, 'the first heartbeat');
    expect(stream.parts[0]).toEqual({});
    await topUp();
    await waitFor(() => stream.results().length === 1, 'the top-up');
    const [result] = stream.results();
    expect(Object.keys(stream.parts.find((part) => part.payload != null)!)).toEqual(['payload']);
    expect(result!.extensions?.cursor).toMatch(/^\d+-\d+$/);
    // A stream quiet for the interval (5 s, Apollo Router's) gets another `{}` (no time limit asserted).
    const heartbeats = () => stream.parts.filter((part) => Object.keys(part).length === 0).length;
    await waitFor(() => heartbeats() >= 2, 'a second heartbeat', 20_000);
    stream.close();
    await stream.ended;
    await stack.subscriptionsCompleted(1);
  });

  test('resuming with `after` set to the last cursor received replays what was missed, then goes on live', async () => {
    const first = await openMultipartStream<AccountChanged>(stack.facadeUrl, ACCOUNT, await operator());
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => first.results().length === 1, 'the first top-up');
    const cursor = first.results()[0]!.extensions!.cursor!;
    first.close();
    await first.ended;
    await stack.subscriptionsCompleted(1);

    // Away: one more top-up; a watcher over graphql-ws shows when it is in the log.
    const watcher = stack.connect().subscribe(ACCOUNT);
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => watcher.data.length === 1, 'the missed top-up');
    const missed = (watcher.data[0] as AccountChanged).accountChanged.eventId;

    const back = await openMultipartStream<AccountChanged>(stack.facadeUrl, ACCOUNT, await operator(), {
      after: cursor,
    });
    expect(back.status).toBe(200);
    await waitFor(() => back.results().length === 1, 'the missed top-up on resuming');
    await stack.subscriptionsStarted(1);
    await topUp();
    await waitFor(() => back.results().length === 2 && watcher.data.length === 2, 'a live top-up');
    expect(back.results().map((result) => result.data!.accountChanged.eventId)).toEqual([
      missed,
      (watcher.data[1] as AccountChanged).accountChanged.eventId,
    ]);
    back.close();
    watcher.stop();
  });

  test('the door refuses as over SSE: no token 401, a query, a bad Last-Event-ID; nothing runs upstream', async () => {
    await stack.resetUpstreamCalls();
    const anonymous = await openMultipartStream(stack.facadeUrl, ACCOUNT, {});
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(anonymous.body).toMatchObject({ errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] });

    const query = await openMultipartStream(
      stack.facadeUrl,
      '{ customer(id: "cus_acme") { id } }',
      await operator(),
    );
    expect(query.status).toBe(400);
    expect(query.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] });
    expect(JSON.stringify(query.body)).toContain('subscriptions only');

    const badCursor = await openMultipartStream(stack.facadeUrl, ACCOUNT, {
      ...(await operator()),
      'last-event-id': 'not-a-cursor',
    });
    expect(badCursor.status).toBe(400);
    expect(badCursor.body).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
    expect((await stack.upstreamCalls()).total).toBe(0);

    // Apollo Client sees the refusal as an error.
    const client = apolloClient('Bearer not-a-token');
    const { seen } = subscribeWith(client, ACCOUNT);
    await waitFor(() => seen.errors.length === 1, 'the refusal in Apollo Client');
    expect(String(seen.errors[0])).toMatch(/401/);
    client.stop();
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a caller scoped to one customer cannot follow another’s: refused before the stream, 0 upstream calls', async () => {
    await stack.resetUpstreamCalls();
    const acme = { authorization: `Bearer ${await tokenFor('acme')}` };
    const other = `subscription { accountChanged(customerId: "cus_globex") { eventId } }`;
    const refused = await openMultipartStream(stack.facadeUrl, other, acme);
    expect(refused.status).toBe(200);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    expect(refused.body).toEqual({
      errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'NOT_FOUND' }) })],
    });

    const client = apolloClient(acme.authorization);
    const { seen } = subscribeWith(client, other);
    await waitFor(() => seen.errors.length === 1, 'the refusal in Apollo Client');
    expect(JSON.stringify(seen.errors[0])).toContain('NOT_FOUND');
    client.stop();
    expect((await stack.upstreamCalls()).total).toBe(0);
    // Nothing started, nothing is left open.
    expect(await multipartGauges()).toEqual({ connections: 0, subscriptions: 0 });
  });

  test('a token that expires on an open stream ends it with a final part: payload null, UNAUTHENTICATED', async () => {
    const token = await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 2 });
    const stream = await openMultipartStream(
      stack.facadeUrl,
      `subscription { accountChanged(customerId: "cus_acme") { accountId } }`,
      { authorization: `Bearer ${token}` },
    );
    expect(stream.status).toBe(200);
    await stack.subscriptionsStarted(1);
    await stream.ended;
    expect(stream.parts.at(-1)).toEqual({
      payload: null,
      errors: [
        expect.objectContaining({
          message: expect.stringMatching(/access token of this connection has expired/),
          extensions: expect.objectContaining({ code: 'UNAUTHENTICATED' }),
        }),
      ],
    });
    expect(stream.closed()).toBe(true);
    await stack.subscriptionsCompleted(1);
  });

  test('a page of another origin is refused at the preflight, as on /graphql and /graphql/stream', async () => {
    await stack.resetUpstreamCalls();
    const preflight = await fetch(stack.graphqlUrl, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://hostile.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    // Without a preflight a page can send no Authorization header: such a request is anonymous.
    const simple = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: {
        origin: 'https://hostile.example',
        accept: 'multipart/mixed;subscriptionSpec=1.0',
        'content-type': 'text/plain',
      },
      body: JSON.stringify({ query: ACCOUNT }),
    });
    expect(simple.status).toBe(401);
    expect(await simple.json()).toMatchObject({ errors: [{ extensions: { code: 'UNAUTHENTICATED' } }] });
    expect((await stack.upstreamCalls()).total).toBe(0);
    expect(await multipartGauges()).toEqual({ connections: 0, subscriptions: 0 });
  });

  test('a GET with the document in the URL streams too; a GET asking for JSON is not taken for a subscription', async () => {
    const stream = await openMultipartStream(
      stack.facadeUrl,
      'subscription { accountChanged(customerId: "cus_acme") { accountId } }',
      await operator(),
      {},
      'GET',
    );
    expect(stream.status).toBe(200);
    await stack.subscriptionsStarted(1);
    stream.close();
    await stack.subscriptionsCompleted(1);

    const url = new URL(stack.graphqlUrl);
    url.searchParams.set('query', 'subscription { accountChanged(customerId: "cus_acme") { accountId } }');
    const json = await fetch(url, {
      headers: { accept: 'application/json', 'apollo-require-preflight': 'true', ...(await operator()) },
    });
    // Apollo Server's answer to a subscription over plain HTTP GET.
    expect(json.status).toBe(405);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await json.json()).toMatchObject({ errors: [{ extensions: { code: 'BAD_REQUEST' } }] });
  });
});
