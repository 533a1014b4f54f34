/**
 * Apollo Server on express as the HTTP door's executor: it runs the request the door admitted (the
 * admission registered for Apollo's hooks, `admitted-operation.ts`) and writes its answer, doing
 * per request only what a GraphQL answer needs.
 *
 * It does what `expressMiddleware` of `@as-integrations/express5` does (same request handed to
 * Apollo, same status, headers and body back), without two costs paid on every operation: the
 * query string was found by parsing the whole URL again with the legacy `url.parse`, and the body
 * went out through `res.send`, which hashes every answer into a weak ETag that no GraphQL client
 * revalidates (answers are `no-store`). Here the query string is cut from the URL and the body is
 * written as it is, with its length.
 */
import { HeaderMap, type ApolloServer, type BaseContext, type HTTPGraphQLRequest } from '@apollo/server';
import type { Request, Response } from 'express';
import type { GraphQLSchema } from 'graphql';
import type { Connection } from '../edge/door/door.ts';
import type { OperationAdmission } from '../edge/door/requests.ts';
import type { HttpExecutor } from '../edge/http.ts';
import type { SharedReadCache } from '../upstream/client.ts';
import { executeBatch } from './batch.ts';

export interface GraphQLHandlerOptions<TContext extends BaseContext> {
  /**
   * Builds the context of one operation of `connection`; throwing answers the request with
   * Apollo's error. `readCache`: the upstream reads the operations of one batch share.
   */
  context: (args: {
    req: Request;
    res: Response;
    connection: Connection;
    readCache?: SharedReadCache | undefined;
  }) => Promise<TContext>;
  /** Hands the door's admission of one operation to Apollo's hooks. */
  admit: (request: HTTPGraphQLRequest, admission: OperationAdmission) => void;
}

/**
 * The executor running, for the requests the door admitted at the path it serves (one operation,
 * or a batch: `batch.ts`), the server (started) of the schema the door served its caller
 * (`serverOf`).
 */
export function createGraphQLHandler<TContext extends BaseContext>(
  serverOf: (schema: GraphQLSchema) => ApolloServer<TContext>,
  options: GraphQLHandlerOptions<TContext>,
): HttpExecutor {
  return async (req, res, admission) => {
    const server = serverOf(admission.schema);
    if (!('body' in req)) {
      res
        .status(500)
        .type('text/plain')
        .end('`req.body` is not set: mount express.json() before the GraphQL handler.');
      return;
    }
    const headers = new HeaderMap();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    const { connection } = admission;
    if ('operations' in admission) {
      const context = (of: Connection, readCache: SharedReadCache) =>
        options.context({ req, res, connection: of, readCache });
      await executeBatch({ server, headers, context, admit: options.admit }, req, res, admission);
      return;
    }
    const httpGraphQLRequest: HTTPGraphQLRequest = {
      method: req.method.toUpperCase(),
      headers,
      search: searchOf(req.url),
      body: req.body,
    };
    options.admit(httpGraphQLRequest, admission);
    const answer = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest,
      context: () => options.context({ req, res, connection }),
    });
    for (const [name, value] of answer.headers) res.setHeader(name, value);
    res.statusCode = answer.status ?? 200;
    if (answer.body.kind === 'complete') {
      const body = answer.body.string;
      if (!res.hasHeader('content-type')) res.setHeader('content-type', 'text/plain; charset=utf-8');
      res.setHeader('content-length', Buffer.byteLength(body));
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    // Incremental delivery (@defer/@stream): chunks as Apollo produces them.
    for await (const chunk of answer.body.asyncIterator) res.write(chunk);
    res.end();
  };
}

/** The query string of a request URL with its `?` (what `url.parse(url).search` gives), or ''. */
export function searchOf(url: string): string {
  const start = url.indexOf('?');
  if (start === -1) return '';
  const hash = url.indexOf('#', start);
  return hash === -1 ? url.slice(start) : url.slice(start, hash);
}
