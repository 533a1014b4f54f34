/**
 * Serves a repeated HTTP query from the answer cache (`src/graph/answer-cache.ts`) and keeps what a
 * query's execution answered. It runs only for an operation the door admitted (Apollo calls
 * `responseForOperation` after `didResolveOperation`, where a refused one is thrown), so a held
 * answer is served only to an operation the door let through with every check and budget of a
 * fresh one; and before execution,
 * which a held answer skips with the loaders and the upstream context's reads.
 *
 * Left to execution every time: mutations, `@live` queries, a request with `Cache-Control:
 * no-cache` (it reads through both caches, and its fresh answer is kept), and a request that asks
 * for an inline trace (`ftv1` times the execution, so there must be one).
 */
import { HeaderMap } from '@apollo/server';
import { OperationTypeNode } from 'graphql';
import { answerKey, type AnswerCache } from '../graph/answer-cache.ts';
import type { GraphContext } from '../graph/context.ts';
import { isLiveQuery } from '../live-directive.ts';
import type { RequestHooksOf } from './request-hooks.ts';

/** The request header a gateway sends to ask for an inline trace. */
const INLINE_TRACE_HEADER = 'apollo-federation-include-trace';

/** The hooks over `answers` (for `createRequestHooksPlugin`). */
export function answerCacheHooks(answers: AnswerCache): RequestHooksOf<GraphContext> {
  return () => {
    // Set when the operation may be kept: its key, and whether a held answer was served.
    let keeping: { key: string; served: boolean } | undefined;
    return {
      responseForOperation({ operation, request, contextValue, queryHash, schema }) {
        const { upstream, caller } = contextValue;
        const cache = upstream.client.cache;
        if (
          cache === undefined ||
          upstream.answerSources === undefined ||
          queryHash === undefined ||
          operation.operation !== OperationTypeNode.QUERY ||
          request.http?.headers.get(INLINE_TRACE_HEADER) !== undefined ||
          isLiveQuery(schema, operation, request.variables)
        ) {
          return null;
        }
        const key = answerKey({
          upstream,
          caller,
          documentHash: queryHash,
          operationName: request.operationName,
          variables: request.variables,
        });
        if (key === undefined) return null;
        keeping = { key, served: false };
        if (upstream.readThrough === true) return null;
        const data = answers.find(key, cache, upstream.answerSources);
        if (data === undefined) return null;
        keeping.served = true;
        return {
          http: { status: undefined, headers: new HeaderMap() },
          body: { kind: 'single', singleResult: { data } },
        };
      },
      willSendResponse({ response, contextValue }) {
        if (keeping === undefined || keeping.served || response.body.kind !== 'single') return;
        const { data, errors } = response.body.singleResult;
        const { upstream } = contextValue;
        const cache = upstream.client.cache;
        if (errors !== undefined || data === undefined || data === null) return;
        if (cache === undefined || upstream.answerSources === undefined) return;
        answers.keep(keeping.key, data, upstream.answerSources, cache);
      },
    };
  };
}
