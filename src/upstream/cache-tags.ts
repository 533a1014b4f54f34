/**
 * Cache tags: the names under which a gateway's response cache (Apollo Router's, Hive Gateway's with
 * deploy/gateway.config.ts) keeps an answer of the facade, and by which the facade drops it when an
 * event or a write makes it stale.
 *
 * One vocabulary on both sides, made from what the response cache already knows: an answer is
 * tagged with every {@link StaleReads} that would name a path it read ({@link cacheTagsOfPath}), and
 * an invalidation names the one tag of each of its stale reads ({@link cacheTagOfStale}). So a
 * gateway drops exactly the answers the facade's own cache would drop, by construction (the test
 * compares both with `pathMatcherOf`): no table of its own to keep in step.
 *
 * Every tag starts with the environment whose stack served or invalidated it (`default` with one
 * key), so a sandbox event never names a live answer. Ids are URI-encoded as paths carry them: a tag
 * holds no `:` of an id, and `*` or spaces never reach a Redis key or a Router tag unencoded.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';
import type { StaleReads } from './stale-reads.ts';

/** The environment part of a tag: the stack's environment, or `default` for the one stack of `UPSTREAM_API_KEY`. */
function environmentPart(environment: PlatformEnvironment | undefined): string {
  return environment ?? 'default';
}

/** A customer's path as the response cache keys it: `/v3/customers/<encoded id>...`. */
const CUSTOMER_PATH = /^\/v3\/customers\/([^/?]+)(?:\/([^/?]+)(?:\/([^/?]+))?)?/;

/**
 * The tags of an answer that read `path` (without its query), in `environment`: one per kind of
 * stale read that would name it, and the environment's `everything`.
 */
export function cacheTagsOfPath(path: string, environment: PlatformEnvironment | undefined): string[] {
  const env = environmentPart(environment);
  const tags = [`${env}:everything`];
  if (path === '/v3/customers') {
    tags.push(`${env}:customers`);
    return tags;
  }
  const match = CUSTOMER_PATH.exec(path);
  if (match === null) return tags;
  const [, customer, collection, id] = match as unknown as [string, string, string?, string?];
  tags.push(`${env}:all:${customer}`);
  if (collection === undefined) {
    tags.push(`${env}:customer:${customer}`);
    return tags;
  }
  tags.push(`${env}:collection:${customer}:${collection}`);
  tags.push(
    id === undefined
      ? `${env}:list:${customer}:${collection}`
      : `${env}:record:${customer}:${collection}:${id}`,
  );
  return tags;
}

/** The one tag `stale`, invalidated in `environment`, names. */
export function cacheTagOfStale(stale: StaleReads, environment: PlatformEnvironment | undefined): string {
  const env = environmentPart(environment);
  const encoded = (id: string) => encodeURIComponent(id);
  switch (stale.kind) {
    case 'everything':
      return `${env}:everything`;
    case 'customer-list':
      return `${env}:customers`;
    case 'customer':
      return `${env}:customer:${encoded(stale.customerId)}`;
    case 'all-of-customer':
      return `${env}:all:${encoded(stale.customerId)}`;
    case 'collection':
      return `${env}:collection:${encoded(stale.customerId)}:${stale.collection}`;
    case 'list':
      return `${env}:list:${encoded(stale.customerId)}:${stale.collection}`;
    case 'record':
      return `${env}:record:${encoded(stale.customerId)}:${stale.collection}:${encoded(stale.id)}`;
  }
}

/** The distinct tags of `stale`, in `environment`. */
export function cacheTagsOfStale(
  stale: readonly StaleReads[],
  environment: PlatformEnvironment | undefined,
): string[] {
  return [...new Set(stale.map((reads) => cacheTagOfStale(reads, environment)))];
}

/**
 * The tags of an answer made from the reads whose response-cache keys are `readKeys`
 * (`<partition> <path><query>`), deduplicated and sorted.
 */
export function cacheTagsOfReads(
  readKeys: Iterable<string>,
  environment: PlatformEnvironment | undefined,
): string[] {
  const tags = new Set<string>();
  for (const key of readKeys) {
    const pathAndQuery = key.slice(key.indexOf(' ') + 1);
    const query = pathAndQuery.indexOf('?');
    for (const tag of cacheTagsOfPath(
      query === -1 ? pathAndQuery : pathAndQuery.slice(0, query),
      environment,
    )) {
      tags.add(tag);
    }
  }
  return [...tags].sort();
}
