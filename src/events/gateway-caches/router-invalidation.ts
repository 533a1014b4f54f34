/**
 * Apollo Router's invalidation endpoint (`response_cache.invalidation`, Router 2.10 and later), as
 * its documentation and source (`apollo-router/src/plugins/response_cache/invalidation_endpoint.rs`
 * at v2.13.1) define it: a `POST` of a JSON array of invalidation requests, the shared key as the
 * whole `Authorization` header (no scheme), answered 202 with `{"count": <entries removed>}`; a
 * missing or wrong key 401, a body it cannot read or an invalidation its storage failed 400, another
 * method 405. The facade sends one `cache_tag` request per tag, for its own subgraph.
 */
import type { RouterInvalidationConfig } from './config.ts';

/** One request of the Router's array: drop every entry of `subgraphs` tagged `cache_tag`. */
export interface RouterCacheTagInvalidation {
  kind: 'cache_tag';
  subgraphs: string[];
  cache_tag: string;
}

/** The body the facade posts for `tags`. */
export function routerInvalidationBody(
  subgraph: string,
  tags: readonly string[],
): RouterCacheTagInvalidation[] {
  return tags.map((tag) => ({ kind: 'cache_tag', subgraphs: [subgraph], cache_tag: tag }));
}

/** How long one attempt may take. */
const ATTEMPT_TIMEOUT_MS = 5_000;

/** The Router refused the request itself (its key, its path, its method): trying again changes nothing. */
export class RouterRefusedInvalidation extends Error {
  readonly status: number;
  constructor(status: number) {
    super(`the Router's invalidation endpoint answered ${status}`);
    this.name = 'RouterRefusedInvalidation';
    this.status = status;
  }
}

/**
 * Posts the invalidation of `tags` once; resolves with the Router's count. Rejects with
 * {@link RouterRefusedInvalidation} for an answer a retry cannot change (401, 403, 404, 405), with
 * another error for one that may (no answer, 5xx, 400: its storage failing answers 400 too).
 */
export async function postRouterInvalidation(
  router: RouterInvalidationConfig,
  tags: readonly string[],
): Promise<number> {
  const response = await fetch(router.url, {
    method: 'POST',
    headers: {
      authorization: router.sharedKey,
      'content-type': 'application/json',
      accept: 'application/json',
    },
    body: JSON.stringify(routerInvalidationBody(router.subgraph, tags)),
    signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
    redirect: 'error',
  });
  const text = await response.text();
  if ([401, 403, 404, 405].includes(response.status)) throw new RouterRefusedInvalidation(response.status);
  if (!response.ok) throw new Error(`the Router's invalidation endpoint answered ${response.status}`);
  return countOf(text);
}

/** The `count` of the Router's answer; 0 when it gives none (the invalidation was done all the same). */
function countOf(text: string): number {
  try {
    const count = (JSON.parse(text) as { count?: unknown } | null)?.count;
    return typeof count === 'number' ? count : 0;
  } catch {
    return 0;
  }
}
