/**
 * A `query @live` from Apollo Client 4 wired the usual way, against a real facade:
 *
 * - the usual `split` (subscriptions to `GraphQLWsLink`, the rest to `HttpLink`) sends it over
 *   HTTP, which refuses it before reading anything: the watched query (what `useQuery` renders)
 *   gets the error, which says where its updates are and how to wire the split;
 * - the example web app's own client (examples/web/src/apollo.ts, whose split sends `@live` queries
 *   to the WebSocket too) gets every new answer into Apollo Client's cache: a top-up shows in the
 *   watched query and in the normalised account, with no refetch;
 * - a token that expires under it reaches the watched query as an `UNAUTHENTICATED` error, and the
 *   client does not reconnect with it.
 */
import { ApolloClient, ApolloLink, CombinedGraphQLErrors, HttpLink, InMemoryCache } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { getMainDefinition } from '@apollo/client/utilities';
import { Kind, OperationTypeNode } from 'graphql';
import { createClient } from 'graphql-ws';
import { describe, expect, test } from 'vitest';
import { createAppClient } from '../../examples/web/src/apollo.ts';
import { LiveBalanceDocument, type LiveBalanceQuery } from '../../examples/web/src/gql/graphql.ts';
import { useStack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { issuerSignedToken, tokenFor } from '../support/tokens.ts';

const stack = useStack({ env: { CACHE_ENABLED: 'true', AUTH_CLOCK_TOLERANCE_SECONDS: '0' } });

/** The USDC available on acme's ETH account in a live total's answer. */
function ethUsdc(data: LiveBalanceQuery | undefined): number {
  const node = data?.customer?.accounts?.edges.find((edge) => edge.node.id === 'acc_acme_eth')?.node;
  return Number(node?.balances.find((balance) => balance.currency === 'USDC')?.available ?? Number.NaN);
}

/** What one watched query was given, in order. */
function watch(client: ApolloClient) {
  const seen = { answers: [] as LiveBalanceQuery[], errors: [] as Error[] };
  const subscription = client
    .watchQuery({ query: LiveBalanceDocument, variables: { customerId: 'cus_acme' } })
    .subscribe({
      next: (result) => {
        if (result.error !== undefined) seen.errors.push(result.error);
        else if (result.data !== undefined && result.dataState === 'complete') {
          seen.answers.push(result.data as LiveBalanceQuery);
        }
      },
      error: (error: Error) => seen.errors.push(error),
    });
  return { seen, stop: () => subscription.unsubscribe() };
}

const topUpThroughTheFacade = async () => {
  const answer = await stack.query(
    `mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", customerId: "cus_acme", amount: "3.00", currency: "USDC", idempotencyKey: "live-apollo-${Date.now()}" }) { topUp { id } } }`,
  );
  expect(answer.body.errors).toBeUndefined();
};

describe('a @live query from Apollo Client 4', () => {
  test('through the usual split, goes over HTTP: useQuery shows an error saying how to wire it, and nothing is read', async () => {
    const authorization = `Bearer ${await tokenFor('acme')}`;
    const socket = createClient({
      url: stack.graphqlUrl.replace(/^http/, 'ws'),
      connectionParams: { Authorization: authorization },
    });
    const usualSplit = ApolloLink.split(
      ({ query }) => {
        const definition = getMainDefinition(query);
        return (
          definition.kind === Kind.OPERATION_DEFINITION &&
          definition.operation === OperationTypeNode.SUBSCRIPTION
        );
      },
      new GraphQLWsLink(socket),
      new HttpLink({ uri: stack.graphqlUrl, headers: { authorization } }),
    );
    const client = new ApolloClient({ link: usualSplit, cache: new InMemoryCache() });
    await stack.resetUpstreamCalls();
    // What useQuery renders: the watched query's result, with the default error policy.
    const { seen, stop } = watch(client);
    await waitFor(() => seen.errors.length > 0, 'the refusal');
    expect(seen.answers).toEqual([]);
    expect(CombinedGraphQLErrors.is(seen.errors[0])).toBe(true);
    const [refusal] = (seen.errors[0] as CombinedGraphQLErrors).errors;
    expect(refusal?.extensions?.code).toBe('BAD_REQUEST');
    expect(refusal?.message).toMatch(/^This query is marked @live, and over HTTP it would be answered once/);
    expect(refusal?.message).toContain('connect a graphql-ws client (WebSocket) to /graphql');
    expect(refusal?.message).toContain('sends queries marked @live to GraphQLWsLink');
    expect((await stack.upstreamCalls()).total).toBe(0);
    stop();
    client.stop();
    await socket.dispose();
  });

  test("through the example app's split, every new answer reaches Apollo Client's cache", async () => {
    const app = createAppClient(stack.graphqlUrl, {
      accessToken: await tokenFor('acme'),
      expiresAt: Date.now() + 3_600_000,
    });
    const { seen, stop } = watch(app.client);
    await waitFor(() => seen.answers.length === 1, 'the first answer');
    const before = ethUsdc(seen.answers[0]);
    await topUpThroughTheFacade();
    await waitFor(() => seen.answers.length === 2, 'the answer after the top-up');
    expect(ethUsdc(seen.answers[1])).toBe(before + 3);
    // The normalised account holds the new balance: every query showing it shows it.
    const account = (app.client.cache.extract() as Record<string, unknown>)['Account:acc_acme_eth'] as {
      balances: { currency: string; available: string }[];
    };
    expect(Number(account.balances.find((balance) => balance.currency === 'USDC')?.available)).toBe(
      before + 3,
    );
    expect(seen.errors).toEqual([]);
    stop();
    await app.dispose();
  });

  test('whose token expires under it, reports UNAUTHENTICATED to the watched query', async () => {
    const app = createAppClient(stack.graphqlUrl, {
      accessToken: await issuerSignedToken({ exp: Math.floor(Date.now() / 1000) + 3 }),
      expiresAt: Date.now() + 3_000,
    });
    const { seen, stop } = watch(app.client);
    await waitFor(() => seen.answers.length === 1, 'the first answer');
    await waitFor(() => seen.errors.length > 0, 'the expiry', 15_000);
    expect(seen.errors[0]!.message).toMatch(/access token of this connection has expired/);
    // No new answer follows with the expired token, and none is read upstream for it.
    await stack.resetUpstreamCalls();
    await topUpThroughTheFacade();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(seen.answers).toHaveLength(1);
    expect((await stack.upstreamCalls()).byRoute).not.toHaveProperty([
      'GET /v3/customers/{customerId}/accounts',
    ]);
    stop();
    await app.dispose();
  });
});
