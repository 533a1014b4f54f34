/**
 * Upstream GET answers kept across operations, until the platform says they changed.
 *
 * The facade receives every change the platform announces (verified, de-duplicated webhooks) and
 * makes every write itself, so it knows when an answer stops being current: an answer is kept until
 * an event or a write names it ({@link ResponseCache.invalidate}), for at most the maximum age (the
 * bound when an event is missed), within a cap in bytes (least recently used out first).
 *
 * Where it sits: inside `client.send`, after the caller's scope is checked (`access.ts`), so a hit
 * answers only a request the caller could have sent, and before the call budget is spent, which a
 * hit spends like a miss (an operation's limits do not depend on what others read before it).
 * An answer is keyed by the upstream key (a digest: the key selects the environment and the
 * platform account, so callers' own keys never share) and the exact path and query.
 *
 * No race: a read in flight when an invalidation that names it arrives is marked, never stores its
 * possibly old answer, and is no longer joined by later reads, which go to the upstream themselves.
 * Concurrent misses of one key share one upstream request (ten thousand subscribers reconnecting
 * read a customer once); one whose leader was cancelled by its own deadline reads for itself.
 *
 * Only answers the platform's events or the facade's writes can invalidate are kept (customers and
 * everything under them), and reference data that nothing changes at run time (institutions).
 * Capability discovery is the readiness probe and is always asked; webhook endpoints change
 * without any event.
 */
import { LRUCache } from 'lru-cache';
import { isHeldAsRead, recordSource, type AnswerSources } from './answer-sources.ts';
import {
  type CachedAnswer,
  dropNamed,
  removeFrom,
  startFlight,
  type Entry,
  type Holdings,
} from './cache-holdings.ts';

export type { CachedAnswer } from './cache-holdings.ts';
import { UpstreamCancelledError } from './errors.ts';
import { isUpstreamOutage } from './outage.ts';
import { bucketOf, type StaleReads } from './stale-reads.ts';

// What the cache's users read beside it, each kept in a file of its own concern.
export {
  createAnswerSources,
  freezeAnswerBody,
  PARSED_BYTES_PER_TEXT_BYTE,
  type AnswerSources,
} from './answer-sources.ts';
export { bucketOfStale, pathMatcherOf, staleReadsOfWrite, type StaleReads } from './stale-reads.ts';

/** Told of every invalidation; see {@link ResponseCache.onInvalidate}. */
export type InvalidationListener = (stale: readonly StaleReads[], cause: string | undefined) => unknown;

/** How the cache is configured (`CACHE_ENABLED`, `CACHE_MAX_AGE_SECONDS`, `CACHE_MAX_BYTES`). */
export interface ResponseCacheConfig {
  enabled: boolean;
  /** Longest time an answer is served without the upstream being asked again. */
  maxAgeSeconds: number;
  /** Bytes of answers held at most (bodies, keys and a fixed overhead per entry). */
  maxBytes: number;
  /**
   * Bytes of whole GraphQL answers made from held answers that are kept at most
   * (`CACHE_ANSWERS_MAX_BYTES`, `src/graph/answer-cache.ts`); 0 keeps none.
   */
  answersMaxBytes: number;
  /**
   * `CACHE_STALE_IF_ERROR_SECONDS`: how long past `maxAgeSeconds` an answer may still be served
   * when the upstream fails (marked stale); 0 or absent: never.
   */
  staleIfErrorSeconds?: number;
}

/** Counts since the cache was built, and what it holds now. */
export interface ResponseCacheStats {
  hits: number;
  misses: number;
  /** Answers dropped to stay under the byte cap. */
  evictions: number;
  /** Answers dropped, and reads in flight marked, because an event or a write named them. */
  invalidations: number;
  /** Answers that reached the maximum age (asked again, and kept for stale-if-error meanwhile). */
  expirations: number;
  /** Reads answered past their freshness because the upstream failed (`CACHE_STALE_IF_ERROR_SECONDS`). */
  staleServed: number;
  bytes: number;
  entries: number;
}

/** One read through the cache; see {@link ResponseCache.read}. */
export interface CacheRead {
  /**
   * Whose answers these are: the facade's key source (the same across a rotation) or a digest of a
   * caller's own key (`UpstreamCredentials.partition`). Never the key itself.
   */
  partition: string;
  /** The path without the query (`/v3/customers/cus_1/accounts`). */
  path: string;
  /** The encoded query with its `?`, or empty. */
  query: string;
  /** Skip the answers held and ask the upstream (its answer is kept for the next reads). */
  readThrough: boolean;
  /** The caller's own cancellation: a read that joined another cancelled by its deadline retries. */
  signal?: AbortSignal | undefined;
  /** Where the operation records the answer it is handed (see {@link AnswerSources}). */
  sources?: AnswerSources | undefined;
}

export interface ResponseCache {
  /** Whether `path` is ever kept (customers and what lies under them, institutions). */
  isCacheable(path: string): boolean;
  /**
   * The answer for `read`: held (a hit), the one being read for the same key (joined), or read now
   * with `load` and kept unless an invalidation named it meanwhile. A failure is never kept. When
   * the upstream fails ({@link isUpstreamOutage}) and an answer past its freshness is still held
   * (at most `staleIfErrorSeconds` past it, not dropped by an event or a write, and not asked
   * with `readThrough`), that answer is served instead, with its `ageSeconds`.
   */
  read(read: CacheRead, load: () => Promise<CachedAnswer>): Promise<CachedAnswer>;
  /**
   * Drops what `stale` names and marks the reads of it in flight; returns how many of either.
   * `cause`: the id of the event that made them stale, when an event did (the replica that receives
   * a webhook hears its event twice: at receipt and from the log).
   */
  invalidate(stale: readonly StaleReads[], cause?: string): number;
  /**
   * As {@link invalidate}, and settles once what its listeners started for it has (a gateway's
   * cache dropping the same answers, within its own wait): what a webhook's acknowledgement waits for.
   */
  invalidateAndWait(stale: readonly StaleReads[], cause?: string): Promise<number>;
  /**
   * Drops what a write through this facade made stale, and tells the listeners of
   * {@link onWrite} (which carry it to the other replicas); settles as {@link invalidateAndWait}
   * does, so the write's answer leaves once the gateways dropped what it changed.
   */
  invalidateWrite(stale: readonly StaleReads[]): Promise<void>;
  /** Calls `listener` with what each write through this facade made stale. Must not throw. */
  onWrite(listener: (stale: readonly StaleReads[]) => void): void;
  /**
   * Calls `listener` with what every invalidation names (an event, a write here or on another
   * replica), whether or not an answer was held: live queries re-run what it makes stale, gateways'
   * caches drop it. Must not throw; a promise it returns must not reject (the invalidation's
   * waiters wait for it).
   */
  onInvalidate(listener: InvalidationListener): void;
  /**
   * Whether every answer `sources` records is still held as it was read (not dropped, expired,
   * evicted or read anew since), and they are all there is: a result made from them would be made
   * alike now. False for a record with no read at all (nothing stands for such a result).
   */
  isCurrent(sources: AnswerSources): boolean;
  /**
   * Whole seconds for which a result made from what `sources` records stays fresh: the least
   * freshness left of its reads, when {@link isCurrent} holds; undefined otherwise. What a cache in
   * front of the facade may keep the result for (`Cache-Control: max-age`).
   */
  freshForSeconds(sources: AnswerSources): number | undefined;
  /** `CACHE_MAX_AGE_SECONDS`: longest an answer is served without the upstream being asked again. */
  readonly maxAgeSeconds: number;
  stats(): ResponseCacheStats;
}

/** Options of {@link createResponseCache}; `now` (milliseconds) is for tests. */
export interface ResponseCacheOptions extends Omit<ResponseCacheConfig, 'enabled' | 'answersMaxBytes'> {
  now?: () => number;
}

/** Paths whose answers may be kept: see the module comment. */
const CACHEABLE_PATH = /^\/v3\/(?:customers|institutions)(?:\/|$)/;

/** Builds an empty cache. */
export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  const stats = { hits: 0, misses: 0, evictions: 0, invalidations: 0, expirations: 0, staleServed: 0 };
  const held = new Map<string, Set<string>>();
  const now = options.now;
  const clock = now ?? (() => performance.now());
  const freshMs = options.maxAgeSeconds * 1000;
  const entries = new LRUCache<string, Entry>({
    maxSize: options.maxBytes,
    sizeCalculation: (entry) => entry.bytes,
    // Held past its freshness for stale-if-error only: a read then asks the upstream first.
    ttl: freshMs + (options.staleIfErrorSeconds ?? 0) * 1000,
    // Expiry is checked on every read, not rounded to lru-cache's default 1 ms resolution.
    ttlResolution: 0,
    ...(now === undefined ? {} : { perf: { now } }),
    dispose: (entry, key, reason) => {
      removeFrom(held, entry.bucket, key);
      if (reason === 'evict') stats.evictions += 1;
      else if (reason === 'expire' && !entry.expired) stats.expirations += 1;
    },
  });
  // Keys of the answers held and of the reads in flight, by customer: an invalidation looks at one
  // customer's, not at everything held. The flight later reads of a key join, and every flight
  // still out, by customer: a read-through (or a retry after a cancelled leader) can leave two
  // flights of one key out at once, and an invalidation must mark both.
  const holdings: Holdings = { entries, held, flights: new Map(), flightsByBucket: new Map() };
  const { flights } = holdings;
  function isFresh(entry: Entry): boolean {
    // As lru-cache judges its own ttl: served at the maximum age, not past it.
    return clock() - entry.storedAt <= freshMs;
  }

  /** `entry`, found past its freshness: counted expired once, kept for stale-if-error. */
  function expire(entry: Entry): Entry {
    if (!entry.expired) stats.expirations += 1;
    entry.expired = true;
    return entry;
  }

  /**
   * The held answer `stale` in place of a read that failed with `error` when the upstream failed,
   * marked with its age and never recorded as a source a whole answer may stand on; else throws.
   */
  function servedStale(
    stale: Entry | undefined,
    error: unknown,
    sources: AnswerSources | undefined,
  ): CachedAnswer {
    if (stale === undefined || !isUpstreamOutage(error)) throw error;
    stats.staleServed += 1;
    if (sources !== undefined) sources.complete = false;
    return { ...stale.answer, ageSeconds: Math.floor((clock() - stale.storedAt) / 1000) };
  }

  return {
    isCacheable: (path) => CACHEABLE_PATH.test(path),

    async read(read, load) {
      const path = read.path;
      const key = `${read.partition} ${path}${read.query}`;
      const sources = read.sources;
      // Past its freshness, the held answer stands in only if the upstream fails.
      let stale: Entry | undefined;
      if (!read.readThrough) {
        const entry = entries.get(key);
        if (entry !== undefined && isFresh(entry)) {
          stats.hits += 1;
          if (sources !== undefined) recordSource(sources, key, entry.answer);
          return entry.answer;
        }
        stale = entry === undefined ? undefined : expire(entry);
        const flight = flights.get(key);
        if (flight !== undefined) {
          stats.hits += 1;
          try {
            const answer = await flight.promise;
            if (sources !== undefined) recordSource(sources, key, answer);
            return answer;
          } catch (error) {
            // The leader's own deadline is not this read's: it reads for itself.
            const leadersOwn = error instanceof UpstreamCancelledError && read.signal?.aborted !== true;
            if (!leadersOwn) return servedStale(stale, error, sources);
          }
        }
      }
      stats.misses += 1;
      try {
        const flight = startFlight(
          holdings,
          { key, path, bucket: bucketOf(path), load },
          { maxBytes: options.maxBytes, clock },
        );
        const answer = await flight.promise;
        if (sources !== undefined) recordSource(sources, key, answer);
        return answer;
      } catch (error) {
        return servedStale(stale, error, sources);
      }
    },

    isCurrent: (sources) =>
      isHeldAsRead(sources, (key) => {
        const entry = entries.get(key);
        // An answer past its freshness stands for no result: the whole answer is made anew.
        return entry !== undefined && isFresh(entry) ? entry.answer.body : undefined;
      }),

    freshForSeconds(sources) {
      let leastMs = Infinity;
      const current = isHeldAsRead(sources, (key) => {
        const entry = entries.get(key);
        if (entry === undefined || !isFresh(entry)) return undefined;
        leastMs = Math.min(leastMs, freshMs - (clock() - entry.storedAt));
        return entry.answer.body;
      });
      return current ? Math.floor(leastMs / 1000) : undefined;
    },

    ...invalidations(holdings, stats),

    maxAgeSeconds: options.maxAgeSeconds,

    stats: () => ({ ...stats, bytes: entries.calculatedSize, entries: entries.size }),
  };
}

/** The invalidating part of a {@link ResponseCache}: what it drops from `holdings`, and who is told. */
function invalidations(
  holdings: Holdings,
  stats: { invalidations: number },
): Pick<ResponseCache, 'invalidate' | 'invalidateAndWait' | 'invalidateWrite' | 'onWrite' | 'onInvalidate'> {
  const writeListeners: ((stale: readonly StaleReads[]) => void)[] = [];
  const invalidateListeners: InvalidationListener[] = [];

  /** Drops what `stale` names; the count, and what its listeners started for it. */
  function drop(
    stale: readonly StaleReads[],
    cause: string | undefined,
  ): { dropped: number; waits: unknown[] } {
    let dropped = 0;
    for (const reads of stale) dropped += dropNamed(holdings, reads);
    stats.invalidations += dropped;
    const waits: unknown[] = [];
    for (const listener of invalidateListeners) {
      const started = listener(stale, cause);
      if (started !== undefined) waits.push(started);
    }
    return { dropped, waits };
  }

  return {
    invalidate(stale, cause) {
      return drop(stale, cause).dropped;
    },

    async invalidateAndWait(stale, cause) {
      const { dropped, waits } = drop(stale, cause);
      await Promise.allSettled(waits);
      return dropped;
    },

    async invalidateWrite(stale) {
      const { waits } = drop(stale, undefined);
      for (const listener of writeListeners) listener(stale);
      await Promise.allSettled(waits);
    },

    onWrite(listener) {
      writeListeners.push(listener);
    },

    onInvalidate(listener) {
      invalidateListeners.push(listener);
    },
  };
}
