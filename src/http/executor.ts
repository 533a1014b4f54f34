/**
 * HTTP's executor, as the HTTP adapter of the door (src/edge/http.ts) is given it: Apollo Server
 * (`apollo-server.ts`) running each request the door admitted, with that request's operation
 * context, and the automatic persisted queries Apollo holds, which the door reads too.
 */
import type { ApolloServer } from '@apollo/server';
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

export interface HttpExecutorOptions extends Omit<ApolloServerOptions, 'admitted'> {
  /** Builds an operation's context (the same for every transport). */
  createContext(input: OperationContextInput): GraphContext;
}

/** Apollo Server, started, as HTTP's executor. */
export interface StartedHttpExecutor {
  readonly apollo: ApolloServer<GraphContext>;
  readonly execute: HttpExecutor;
  /** The text Apollo holds for an automatic persisted query's hash (the door reads it). */
  readonly persistedQuery: (sha256Hash: string) => Promise<string | undefined>;
}

export async function createHttpExecutor(options: HttpExecutorOptions): Promise<StartedHttpExecutor> {
  // The door's admission of each request, handed to Apollo's hooks.
  const admitted = createAdmittedOperations();
  const apollo = await createApolloServer({ ...options, admitted });
  const execute = createGraphQLHandler(apollo, {
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
