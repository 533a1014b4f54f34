/**
 * The Apollo Client of the app: a normalised cache (accounts by id, so a mutation's payload, a
 * subscription event or a live query's new answer updates every place an account shows),
 * relay-style pagination of a customer's accounts, HTTP for queries and mutations, graphql-ws for
 * subscriptions and live queries, both with the bearer token.
 *
 * The split sends a `query @live` to the WebSocket as well as subscriptions: over HTTP the facade
 * refuses a live query (it could answer it only once), so with the usual split (subscriptions alone
 * to the WebSocket) the query would show that refusal as its error and no data. Over graphql-ws
 * every new answer reaches Apollo Client's cache, and an error (an expired token: the facade ends
 * the operation with UNAUTHENTICATED and closes the socket with 4401) reaches the query's `error`.
 *
 * Every operation is sent as the exact body listed in the persisted-document manifest that codegen
 * wrote (`gql/persisted-documents.json`), so a facade running with `TRUSTED_DOCUMENTS` set to that
 * manifest runs it, and refuses anything else.
 */
import { ApolloClient, ApolloLink, HttpLink, InMemoryCache } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { getMainDefinition, relayStylePagination } from '@apollo/client/utilities';
import { Kind, OperationTypeNode, parse, type DocumentNode } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import manifest from './gql/persisted-documents.json' with { type: 'json' };
import type { Session } from './sign-in.ts';

/** Manifest bodies by operation name (codegen refuses two operations of one name). */
const trustedBodies = new Map<string, string>(
  Object.values(manifest as Record<string, string>).flatMap((body) =>
    parse(body)
      .definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION)
      .map((definition) => [definition.name?.value ?? '', body] as [string, string]),
  ),
);

function operationName(document: DocumentNode): string | undefined {
  return getMainDefinition(document).name?.value;
}

/** The listed body of `document`'s operation; `print`'s text for one the manifest does not list. */
function trustedBody(document: DocumentNode, print: (document: DocumentNode) => string): string {
  const name = operationName(document);
  return (name === undefined ? undefined : trustedBodies.get(name)) ?? print(document);
}

/**
 * graphql-ws's client sends `print(document)`: swap in the listed body, byte for byte, by the
 * operation's name (the payload keeps its variables and extensions).
 */
function withTrustedBodies(client: Client): Client {
  return {
    ...client,
    subscribe: (payload, sink) =>
      client.subscribe(
        {
          ...payload,
          query:
            (payload.operationName == null ? undefined : trustedBodies.get(payload.operationName)) ??
            payload.query,
        },
        sink,
      ),
  };
}

export interface AppClient {
  client: ApolloClient;
  /** Closes the WebSocket. */
  dispose(): Promise<void>;
}

/**
 * Whether an operation goes over the WebSocket: a subscription, or a query marked `@live` (not
 * `@live(if: false)`), whose answers keep coming; everything else over HTTP.
 */
export function sendsOverWebSocket({ query }: { query: DocumentNode }): boolean {
  const definition = getMainDefinition(query);
  if (definition.kind !== Kind.OPERATION_DEFINITION) return false;
  if (definition.operation === OperationTypeNode.SUBSCRIPTION) return true;
  const live = definition.directives?.find((directive) => directive.name.value === 'live');
  const condition = live?.arguments?.find((argument) => argument.name.value === 'if')?.value;
  return (
    definition.operation === OperationTypeNode.QUERY &&
    live !== undefined &&
    !(condition?.kind === Kind.BOOLEAN && !condition.value)
  );
}

export function createAppClient(graphqlUrl: string, session: Session): AppClient {
  const authorization = `Bearer ${session.accessToken}`;
  const http = new HttpLink({
    uri: graphqlUrl,
    headers: { authorization },
    print: (node, print) => (node.kind === Kind.DOCUMENT ? trustedBody(node, print) : print(node)),
  });
  const socket = createClient({
    url: graphqlUrl.replace(/^http/, 'ws'),
    connectionParams: { Authorization: authorization },
    // Reconnect after a network blip, not after a refusal (a 4401 means sign in again).
    shouldRetry: (event) => !(event instanceof CloseEvent && event.code >= 4400 && event.code < 4500),
  });
  const trustedSocket = withTrustedBodies(socket);
  const live = new GraphQLWsLink(trustedSocket);
  const link = ApolloLink.split(sendsOverWebSocket, live, http);
  const client = new ApolloClient({
    link,
    cache: new InMemoryCache({
      typePolicies: {
        // Pages of accounts merge into one list per customer (and per `updatedSince` filter and page
        // size): the live total's ten accounts are a list of their own, apart from the paged one.
        Customer: { fields: { accounts: relayStylePagination(['updatedSince', 'first']) } },
      },
    }),
    // Sent as apollographql-client-name/-version, which the facade's CORS allows.
    clientAwareness: { name: 'platform-web-example', version: '1.0.0' },
  });
  return {
    client,
    async dispose() {
      client.stop();
      await socket.dispose();
    },
  };
}
