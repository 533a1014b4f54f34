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
import type { RequestAdmission } from '../edge/door/door.ts';
import type { HttpExecutor } from '../edge/http.ts';

export interface GraphQLHandlerOptions<TContext extends BaseContext> {
  /** Builds the context of one operation; throwing answers the request with Apollo's error. */
  context: (args: { req: Request; res: Response; admission: RequestAdmission }) => Promise<TContext>;
  /** Hands the door's admission of the request to Apollo's hooks. */
  admit(request: HTTPGraphQLRequest, admission: RequestAdmission): void;
}

/**
 * The executor running, for each request the door admitted at the path it serves, the server (started)
 * of the schema the door served its caller (`serverOf`).
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
    const httpGraphQLRequest: HTTPGraphQLRequest = {
      method: req.method.toUpperCase(),
      headers,
      search: searchOf(req.url),
      body: req.body,
    };
    options.admit(httpGraphQLRequest, admission);
    const answer = await server.executeHTTPGraphQLRequest({
      httpGraphQLRequest,
      context: () => options.context({ req, res, admission }),
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
