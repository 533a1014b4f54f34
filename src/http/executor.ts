/**
 * HTTP's executor, as the HTTP adapter of the door (src/edge/http.ts) is given it: Apollo Server
 * (`apollo-server.ts`) running each request the door admitted, with that request's operation
 * context, and the automatic persisted queries Apollo holds, which the door reads too.
 *
 * One Apollo Server per schema served (the whole one, and each contract's: src/graph/audiences.ts),
 * each running the requests of its audience's callers: Apollo executes with the schema it was
 * built with, and words a document the door refused with it, so a contract's callers meet nothing
 * it hides, not even in a "Did you mean" suggestion. The first server drains the http.Server at a
 * shutdown and stops the others; they share its cache of persisted queries.
 */
import type { ApolloServer, ApolloServerPlugin } from '@apollo/server';
import type { GraphQLSchema } from 'graphql';
import type { HttpExecutor } from '../edge/http.ts';
import type { GraphContext } from '../graph/context.ts';
import type { OperationContextInput } from '../graph/operation-context.ts';
import { createAdmittedOperations } from './admitted-operation.ts';
import { createApolloServer, type ApolloServerOptions } from './apollo-server.ts';
import { asksForCacheTags, GATEWAY_CACHE_HEADER } from './gateway-cache-hooks.ts';
import { createGraphQLHandler } from './graphql-handler.ts';

/**
 * The prefix of the automatic persisted queries' keys in the cache Apollo Server keeps them in
 * (`APQ_CACHE_PREFIX` of its request pipeline; its default cache, bounded at 30 MiB).
 */
const PERSISTED_QUERY_KEY = 'apq:';

export interface HttpExecutorOptions extends Omit<ApolloServerOptions, 'admitted' | 'cache'> {
  /** Builds an operation's context (the same for every transport). */
  createContext(input: OperationContextInput): GraphContext;
  /** Every contract's schema besides `schema` (the whole one): each gets a server of its own. */
  contractSchemas: readonly GraphQLSchema[];
}

/** Apollo Server, started, as HTTP's executor. */
export interface StartedHttpExecutor {
  /** The whole schema's server: stopping it drains the http.Server, then stops every other. */
  readonly apollo: ApolloServer<GraphContext>;
  readonly execute: HttpExecutor;
  /** The text Apollo holds for an automatic persisted query's hash (the door reads it). */
  readonly persistedQuery: (sha256Hash: string) => Promise<string | undefined>;
}

export async function createHttpExecutor(options: HttpExecutorOptions): Promise<StartedHttpExecutor> {
  // The door's admission of each request, handed to Apollo's hooks.
  const admitted = createAdmittedOperations();
  const others: ApolloServer<GraphContext>[] = [];
  // Stopped once the first has drained the http.Server: no request of theirs is left by then.
  const stopOthers: ApolloServerPlugin<GraphContext> = {
    async serverWillStart() {
      return {
        async serverWillStop() {
          await Promise.all(others.map((other) => other.stop()));
        },
      };
    },
  };
  const apollo = await createApolloServer({
    ...options,
    admitted,
    serverPlugins: [...(options.serverPlugins ?? []), stopOthers],
  });
  const servers = new Map([[options.schema, apollo]]);
  for (const schema of options.contractSchemas) {
    const server = await createApolloServer({
      ...options,
      schema,
      httpServer: undefined,
      serverPlugins: [],
      cache: apollo.cache,
      admitted,
    });
    others.push(server);
    servers.set(schema, server);
  }
  const serverOf = (schema: GraphQLSchema): ApolloServer<GraphContext> => {
    const server = servers.get(schema);
    // Never another audience's server in place of the caller's.
    if (server === undefined) throw new Error('no Apollo Server runs the schema the door served');
    return server;
  };
  const execute = createGraphQLHandler(serverOf, {
    admit: admitted.admit,
    context: async ({ req, res, connection, readCache }) =>
      options.createContext({
        connection,
        readCache,
        requestId: res.locals.requestId as string,
        facadeRequestId: res.locals.facadeRequestId as string,
        callerRequestId: res.locals.callerRequestId as string | undefined,
        // `Cache-Control: no-cache` on the request: this operation reads through the response cache.
        readThrough: /(?:^|[\s,])no-cache(?:$|[\s,=])/i.test(req.headers['cache-control'] ?? ''),
        // What the whole-answer cache and a gateway's cache tags are made from.
        recordAnswerSources:
          options.answers !== undefined || asksForCacheTags(req.headers[GATEWAY_CACHE_HEADER]),
      }),
  });
  return {
    apollo,
    execute,
    persistedQuery: async (sha256Hash) => apollo.cache.get(`${PERSISTED_QUERY_KEY}${sha256Hash}`),
  };
}
