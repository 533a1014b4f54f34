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
import type { CustomerCollection } from './types.ts';
import { UpstreamCancelledError } from './errors.ts';

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
}

/**
 * An answer as the upstream sent it. With `body` (the text parsed, deeply frozen: see
 * {@link freezeAnswerBody}) a hit hands out that one value and the text is not kept; without it
 * the text is kept and parsed anew for every hit.
 */
export interface CachedAnswer {
  status: number;
  text: string;
  body?: unknown;
}

/**
 * A parsed body made safe to share between operations: frozen all the way down, so no reader can
 * change what the next one is served (a write would throw instead of leaking).
 */
export function freezeAnswerBody<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) freezeAnswerBody((value as Record<string, unknown>)[key]);
  }
  return value;
}

/** Answers made stale by a change: what an event or a write names. */
export type StaleReads =
  /** The list of every customer (any page or filter). */
  | { kind: 'customer-list' }
  /** One customer's own record (not what lies under it). */
  | { kind: 'customer'; customerId: string }
  /** One record of a customer's collection, and what lies under it (an account's fees). */
  | { kind: 'record'; customerId: string; collection: CustomerCollection; id: string }
  /** A customer's list of a collection (any page or filter). */
  | { kind: 'list'; customerId: string; collection: CustomerCollection }
  /** A customer's whole collection: every record of it, what lies under them, and its list. */
  | { kind: 'collection'; customerId: string; collection: CustomerCollection }
  /** Everything of one customer: its record and everything under it. */
  | { kind: 'all-of-customer'; customerId: string }
  /** Every answer held (an event of a kind the facade does not know). */
  | { kind: 'everything' };

/** Counts since the cache was built, and what it holds now. */
export interface ResponseCacheStats {
  hits: number;
  misses: number;
  /** Answers dropped to stay under the byte cap. */
  evictions: number;
  /** Answers dropped, and reads in flight marked, because an event or a write named them. */
  invalidations: number;
  /** Answers dropped because they reached the maximum age. */
  expirations: number;
  bytes: number;
  entries: number;
}

/**
 * The held answers one operation's result was made from, so that result can be served again while
 * they are all still held (`src/graph/answer-cache.ts`). A body is recorded by identity: an answer
 * read again after an invalidation is a new value, so a result made from the old one is not current.
 */
export interface AnswerSources {
  /**
   * Each answer read through the cache: its key, and the parsed body handed out, held weakly: a
   * result kept for later must not keep alive a body the cache has let go (evicted, expired,
   * dropped), or held results would pin every page they read past both caps. A body collected is
   * one no longer held, so the result is not current.
   */
  readonly reads: Map<string, WeakRef<object>>;
  /**
   * False once the operation read anything no held answer stands for: a write, a path never kept,
   * an answer kept as text, a read that failed (a 404 is never kept), or a read outside the cache.
   */
  complete: boolean;
}

/** An empty record of what an operation read; see {@link AnswerSources}. */
export function createAnswerSources(): AnswerSources {
  return { reads: new Map(), complete: true };
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
   * with `load` and kept unless an invalidation named it meanwhile. A failure is never kept.
   */
  read(read: CacheRead, load: () => Promise<CachedAnswer>): Promise<CachedAnswer>;
  /**
   * Drops what `stale` names and marks the reads of it in flight; returns how many of either.
   * `cause`: the id of the event that made them stale, when an event did (the replica that receives
   * a webhook hears its event twice: at receipt and from the log).
   */
  invalidate(stale: readonly StaleReads[], cause?: string): number;
  /**
   * Drops what a write through this facade made stale, and tells the listeners of
   * {@link onWrite} (which carry it to the other replicas).
   */
  invalidateWrite(stale: readonly StaleReads[]): void;
  /** Calls `listener` with what each write through this facade made stale. Must not throw. */
  onWrite(listener: (stale: readonly StaleReads[]) => void): void;
  /**
   * Calls `listener` with what every invalidation names (an event, a write here or on another
   * replica), whether or not an answer was held: live queries re-run what it makes stale. Must not throw.
   */
  onInvalidate(listener: (stale: readonly StaleReads[], cause: string | undefined) => void): void;
  /**
   * Whether every answer `sources` records is still held as it was read (not dropped, expired,
   * evicted or read anew since), and they are all there is: a result made from them would be made
   * alike now. False for a record with no read at all (nothing stands for such a result).
   */
  isCurrent(sources: AnswerSources): boolean;
  /** `CACHE_MAX_AGE_SECONDS`: longest an answer is served without the upstream being asked again. */
  readonly maxAgeSeconds: number;
  stats(): ResponseCacheStats;
}

/** Options of {@link createResponseCache}; `now` (milliseconds) is for tests. */
export interface ResponseCacheOptions extends Omit<ResponseCacheConfig, 'enabled' | 'answersMaxBytes'> {
  now?: () => number;
}

/** Bytes an entry costs beyond its key and body: the entry object, the LRU slots, the index. */
const ENTRY_OVERHEAD_BYTES = 256;
/**
 * Bytes counted per byte of text for a body kept parsed: a parsed JSON value takes about 1.5 times
 * its text on V8's heap (measured on lists of account records), counted as 2 to stay under the cap.
 */
export const PARSED_BYTES_PER_TEXT_BYTE = 2;

/** Paths whose answers may be kept: see the module comment. */
const CACHEABLE_PATH = /^\/v3\/(?:customers|institutions)(?:\/|$)/;
/** The customer a path belongs to (still encoded, as paths carry it). */
const CUSTOMER_OF_PATH = /^\/v3\/customers\/([^/]+)/;
/** The index bucket of paths that belong to no customer. */
const PLATFORM_BUCKET = '';

interface Entry {
  answer: CachedAnswer;
  path: string;
  bucket: string;
  bytes: number;
}

interface Flight {
  key: string;
  promise: Promise<CachedAnswer>;
  path: string;
  bucket: string;
  /** Set when an invalidation named the read while it was in flight: its answer is not kept. */
  invalidated: boolean;
}

/** Builds an empty cache. */
export function createResponseCache(options: ResponseCacheOptions): ResponseCache {
  const stats = { hits: 0, misses: 0, evictions: 0, invalidations: 0, expirations: 0 };
  // Keys of the answers held and of the reads in flight, by customer: an invalidation looks at one
  // customer's, not at everything held.
  const held = new Map<string, Set<string>>();
  // The flight later reads of a key join, and every flight still out, by customer: a read-through
  // (or a retry after a cancelled leader) can leave two flights of one key out at once, and an
  // invalidation must mark both.
  const flights = new Map<string, Flight>();
  const flightsByBucket = new Map<string, Set<Flight>>();
  const now = options.now;
  const entries = new LRUCache<string, Entry>({
    maxSize: options.maxBytes,
    sizeCalculation: (entry) => entry.bytes,
    ttl: options.maxAgeSeconds * 1000,
    // Expiry is checked on every read, not rounded to lru-cache's default 1 ms resolution.
    ttlResolution: 0,
    ...(now === undefined ? {} : { perf: { now } }),
    dispose: (entry, key, reason) => {
      removeFrom(held, entry.bucket, key);
      if (reason === 'evict') stats.evictions += 1;
      else if (reason === 'expire') stats.expirations += 1;
    },
  });
  const writeListeners: ((stale: readonly StaleReads[]) => void)[] = [];
  const invalidateListeners: ((stale: readonly StaleReads[], cause: string | undefined) => void)[] = [];

  function startFlight(key: string, path: string, bucket: string, load: () => Promise<CachedAnswer>): Flight {
    const flight: Flight = { key, promise: load(), path, bucket, invalidated: false };
    flights.set(key, flight);
    addTo(flightsByBucket, bucket, flight);
    const land = () => {
      if (flights.get(key) === flight) flights.delete(key);
      removeFrom(flightsByBucket, bucket, flight);
    };
    flight.promise.then(
      (answer) => {
        land();
        if (flight.invalidated) return;
        const parsed = 'body' in answer;
        const bodyBytes = parsed ? PARSED_BYTES_PER_TEXT_BYTE * answer.text.length : answer.text.length;
        const bytes = ENTRY_OVERHEAD_BYTES + key.length + bodyBytes;
        // An answer larger than the whole cap is not kept (lru-cache would refuse it anyway).
        if (bytes > options.maxBytes) return;
        const kept = parsed ? { status: answer.status, text: '', body: answer.body } : answer;
        entries.set(key, { answer: kept, path, bucket, bytes });
        addTo(held, bucket, key);
      },
      () => land(),
    );
    return flight;
  }

  return {
    isCacheable: (path) => CACHEABLE_PATH.test(path),

    async read(read, load) {
      const path = read.path;
      const key = `${read.partition} ${path}${read.query}`;
      const bucket = bucketOf(path);
      const sources = read.sources;
      if (!read.readThrough) {
        const entry = entries.get(key);
        if (entry !== undefined) {
          stats.hits += 1;
          if (sources !== undefined) recordSource(sources, key, entry.answer);
          return entry.answer;
        }
        const flight = flights.get(key);
        if (flight !== undefined) {
          stats.hits += 1;
          try {
            const answer = await flight.promise;
            if (sources !== undefined) recordSource(sources, key, answer);
            return answer;
          } catch (error) {
            // The leader's own deadline is not this read's: it reads for itself.
            if (!(error instanceof UpstreamCancelledError) || read.signal?.aborted === true) throw error;
          }
        }
      }
      stats.misses += 1;
      const answer = await startFlight(key, path, bucket, load).promise;
      if (sources !== undefined) recordSource(sources, key, answer);
      return answer;
    },

    isCurrent: (sources) => isHeldAsRead(entries, sources),

    invalidate(stale, cause) {
      let dropped = 0;
      for (const reads of stale) {
        if (reads.kind === 'everything') {
          dropped += entries.size;
          for (const out of flightsByBucket.values()) {
            for (const flight of out) flight.invalidated = true;
            dropped += out.size;
          }
          flights.clear();
          flightsByBucket.clear();
          entries.clear();
          continue;
        }
        const bucket = bucketOfStale(reads) ?? PLATFORM_BUCKET;
        const matches = matcherOf(reads);
        for (const key of [...(held.get(bucket) ?? [])]) {
          const entry = entries.peek(key, { allowStale: true });
          if (entry !== undefined && matches(entry.path)) {
            entries.delete(key);
            dropped += 1;
          }
        }
        for (const flight of [...(flightsByBucket.get(bucket) ?? [])]) {
          if (!matches(flight.path)) continue;
          flight.invalidated = true;
          if (flights.get(flight.key) === flight) flights.delete(flight.key);
          removeFrom(flightsByBucket, bucket, flight);
          dropped += 1;
        }
      }
      stats.invalidations += dropped;
      for (const listener of invalidateListeners) listener(stale, cause);
      return dropped;
    },

    invalidateWrite(stale) {
      this.invalidate(stale);
      for (const listener of writeListeners) listener(stale);
    },

    onWrite(listener) {
      writeListeners.push(listener);
    },

    onInvalidate(listener) {
      invalidateListeners.push(listener);
    },

    maxAgeSeconds: options.maxAgeSeconds,

    stats: () => ({ ...stats, bytes: entries.calculatedSize, entries: entries.size }),
  };
}

/** See {@link ResponseCache.isCurrent}. */
function isHeldAsRead(entries: LRUCache<string, Entry>, sources: AnswerSources): boolean {
  if (!sources.complete || sources.reads.size === 0) return false;
  for (const [key, read] of sources.reads) {
    const body = read.deref();
    if (body === undefined || entries.get(key)?.answer.body !== body) return false;
  }
  return true;
}

/**
 * Records the answer one read was handed. Only a parsed object has an identity to check later; an
 * answer kept as text (parsed anew for each read), or a body that is no object, makes the record
 * incomplete.
 */
function recordSource(sources: AnswerSources, key: string, answer: CachedAnswer): void {
  const body = 'body' in answer ? answer.body : undefined;
  if (typeof body !== 'object' || body === null) {
    sources.complete = false;
    return;
  }
  const before = sources.reads.get(key);
  if (before === undefined) sources.reads.set(key, new WeakRef(body));
  // Read twice with an invalidation between: the result holds both, and no one entry stands for it.
  else if (before.deref() !== body) sources.complete = false;
}

/**
 * Which paths (without query) `stale` names: what a live query that read one of them must run
 * again for. Made once per invalidation, then asked of every path read.
 */
export function pathMatcherOf(stale: StaleReads): (path: string) => boolean {
  return stale.kind === 'everything' ? () => true : matcherOf(stale);
}

/**
 * The bucket of the paths `stale` names: its customer as paths carry it (encoded), or the bucket
 * of paths that belong to no customer for the list of customers; undefined for everything.
 */
export function bucketOfStale(stale: StaleReads): string | undefined {
  if (stale.kind === 'everything') return undefined;
  return stale.kind === 'customer-list' ? PLATFORM_BUCKET : encodeURIComponent(stale.customerId);
}

/** Which paths (without query) `reads` names. */
function matcherOf(reads: Exclude<StaleReads, { kind: 'everything' }>): (path: string) => boolean {
  switch (reads.kind) {
    case 'customer-list':
      return (path) => path === '/v3/customers';
    case 'customer': {
      const record = customerPath(reads.customerId);
      return (path) => path === record;
    }
    case 'all-of-customer': {
      const record = customerPath(reads.customerId);
      return (path) => path === record || path.startsWith(`${record}/`);
    }
    case 'list': {
      const list = `${customerPath(reads.customerId)}/${reads.collection}`;
      return (path) => path === list;
    }
    case 'collection': {
      const list = `${customerPath(reads.customerId)}/${reads.collection}`;
      return (path) => path === list || path.startsWith(`${list}/`);
    }
    case 'record': {
      const record = `${customerPath(reads.customerId)}/${reads.collection}/${encodeURIComponent(reads.id)}`;
      return (path) => path === record || path.startsWith(`${record}/`);
    }
  }
}

/** The path of a customer's record, encoded as `restPath` encodes it. */
function customerPath(customerId: string): string {
  return `/v3/customers/${encodeURIComponent(customerId)}`;
}

function bucketOf(path: string): string {
  return CUSTOMER_OF_PATH.exec(path)?.[1] ?? PLATFORM_BUCKET;
}

function addTo<T>(index: Map<string, Set<T>>, bucket: string, member: T): void {
  let members = index.get(bucket);
  if (members === undefined) index.set(bucket, (members = new Set()));
  members.add(member);
}

function removeFrom<T>(index: Map<string, Set<T>>, bucket: string, member: T): void {
  const members = index.get(bucket);
  if (members === undefined) return;
  members.delete(member);
  if (members.size === 0) index.delete(bucket);
}

/**
 * What a write through the facade makes stale: everything of the customer it acts for (the one its
 * path names, or `actingFor`) and the list of customers, whose records carry `updatedAt`. A superset
 * of what `src/loaders/written.ts` drops for its own operation, decided from the request alone, so
 * no write can leave an answer behind, including one that failed after reaching the upstream.
 * Creating a customer changes only the list; a webhook endpoint is never kept; any other write that
 * names no customer (an operator's sandbox top-up moves money on an account it names alone) drops
 * everything rather than guess.
 */
export function staleReadsOfWrite(path: string, actingFor: string | undefined): readonly StaleReads[] {
  if (path === '/v3/customers') return [{ kind: 'customer-list' }];
  if (/^\/v3\/webhooks(?:\/|$)/.test(path)) return [];
  const customer = /^\/v3\/(?:sandbox\/)?customers\/([^/]+)/.exec(path)?.[1];
  const customerId = customer === undefined ? actingFor : safeDecode(customer);
  if (customerId === undefined) return [{ kind: 'everything' }];
  return [{ kind: 'all-of-customer', customerId }, { kind: 'customer-list' }];
}

function safeDecode(encoded: string): string | undefined {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return undefined;
  }
}
