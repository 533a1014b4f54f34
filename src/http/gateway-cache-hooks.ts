/**
 * What a gateway's response cache needs of an answer, for a gateway whose cache the facade
 * invalidates (Apollo Router's `response_cache`, Hive Gateway's with deploy/gateway.config.ts): it
 * says so with {@link GATEWAY_CACHE_HEADER}, and an answer it may keep then carries
 * `Cache-Control: private, max-age=<seconds>` and its cache tags in Apollo Router's extensions
 * (`apolloCacheTags`, or `apolloEntityCacheTags` per entity of an `_entities` fetch). The facade
 * drops the answers of those tags from the gateways' caches when an event or a write makes them
 * stale (`src/events/gateway-caches/`).
 *
 * May keep: an error-free query (not `@live`), made only of reads the response cache holds and
 * still holds as they were read (the whole-answer cache's own rule, `AnswerSources`), for as long
 * as the least fresh of them stays fresh. A read that changed while the operation ran (an event
 * arrived meanwhile) leaves the answer `no-store`: the gateway never keeps what was stale when it
 * left. `private`: the answer is the caller's; no shared HTTP cache (a CDN) may keep it, and the
 * gateways key it by the caller's identity (docs/federation.md).
 *
 * Every other answer, and every answer to a request without the header (a browser's included: no
 * browser cache can be told of an event), stays `no-store`.
 */
import { Kind, OperationTypeNode } from 'graphql';
import type { GraphContext } from '../graph/context.ts';
import { isLiveQuery } from '../live-directive.ts';
import { cacheTagsOfReads } from '../upstream/cache-tags.ts';
import type { RequestHooks, RequestHooksOf } from './request-hooks.ts';

/**
 * The request header with which a gateway whose response cache the facade invalidates asks for
 * the answers it may keep to say so (`X-Gateway-Cache: tags`). Any other value, or none, leaves
 * every answer `no-store`.
 */
export const GATEWAY_CACHE_HEADER = 'x-gateway-cache';

/** Apollo Router's response extension holding a root-field fetch's cache tags. */
const ROOT_FIELDS_CACHE_TAGS = 'apolloCacheTags';
/** Apollo Router's response extension holding each entity's cache tags, in `_entities` order. */
const ENTITY_CACHE_TAGS = 'apolloEntityCacheTags';

/** Whether a request's {@link GATEWAY_CACHE_HEADER} value asks for cache tags. */
export function asksForCacheTags(value: string | string[] | undefined): boolean {
  return typeof value === 'string' && value.trim().toLowerCase() === 'tags';
}

const HOOKS: RequestHooks<GraphContext> = {
  willSendResponse({ request, response, contextValue, operation, schema }) {
    if (!asksForCacheTags(request.http?.headers.get(GATEWAY_CACHE_HEADER))) return;
    if (response.body.kind !== 'single' || operation === undefined) return;
    if (
      operation.operation !== OperationTypeNode.QUERY ||
      isLiveQuery(schema, operation, request.variables)
    ) {
      return;
    }
    const result = response.body.singleResult;
    const { data } = result;
    if (result.errors !== undefined || data === undefined || data === null) return;
    const { upstream } = contextValue;
    const cache = upstream.client.cache;
    const sources = upstream.answerSources;
    if (cache === undefined || sources === undefined) return;
    const seconds = cache.freshForSeconds(sources);
    if (seconds === undefined || seconds < 1) return;
    const tags = cacheTagsOfReads(sources.reads.keys(), upstream.environment);
    const entities = entitiesFetched(operation.selectionSet.selections, data);
    result.extensions = {
      ...result.extensions,
      // One cache entry per entity at the Router, each tagged with every read of the fetch: reads
      // are shared between the entities of one fetch, so none can be told apart safely.
      ...(entities === undefined
        ? { [ROOT_FIELDS_CACHE_TAGS]: tags }
        : { [ENTITY_CACHE_TAGS]: Array.from({ length: entities }, () => tags) }),
    };
    response.http.headers.set('cache-control', `private, max-age=${seconds}`);
  },
};

/** How many entities an `_entities` fetch answered; undefined for any other operation. */
function entitiesFetched(
  selections: readonly { kind: Kind; name?: { value: string } }[],
  data: Record<string, unknown>,
): number | undefined {
  const only = selections.length === 1 ? selections[0] : undefined;
  if (only?.kind !== Kind.FIELD || only.name?.value !== '_entities') return undefined;
  const entities = data['_entities'];
  return Array.isArray(entities) ? entities.length : undefined;
}

/** The hooks (for `createRequestHooksPlugin`). */
export const gatewayCacheHooks: RequestHooksOf<GraphContext> = () => HOOKS;
