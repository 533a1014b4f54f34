/**
 * What one response cache holds (`response-cache.ts`): its answers, their keys by customer, and
 * its reads in flight; how a read lands in it, and how what an event or a write names leaves it.
 */
import type { LRUCache } from 'lru-cache';
import { PARSED_BYTES_PER_TEXT_BYTE } from './answer-sources.ts';
import { bucketOfStale, pathMatcherOf, PLATFORM_BUCKET, type StaleReads } from './stale-reads.ts';

/**
 * An answer as the upstream sent it. With `body` (the text parsed, deeply frozen: see
 * {@link freezeAnswerBody}) a hit hands out that one value and the text is not kept; without it
 * the text is kept and parsed anew for every hit.
 */
export interface CachedAnswer {
  status: number;
  text: string;
  body?: unknown;
  /**
   * Present only on an answer served past its freshness because the upstream failed: seconds since
   * it was read from the upstream (see {@link ResponseCache.read}).
   */
  ageSeconds?: number;
}

/** Bytes an entry costs beyond its key and body: the entry object, the LRU slots, the index. */
const ENTRY_OVERHEAD_BYTES = 256;
/** One answer held. */
export interface Entry {
  answer: CachedAnswer;
  path: string;
  bucket: string;
  bytes: number;
  /** When it was read from the upstream (the cache's clock). */
  storedAt: number;
  /** Counted as expired already (when first found past its freshness). */
  expired: boolean;
}

/** One read under way, which later reads of its key join. */
export interface Flight {
  key: string;
  promise: Promise<CachedAnswer>;
  path: string;
  bucket: string;
  /** Set when an invalidation named the read while it was in flight: its answer is not kept. */
  invalidated: boolean;
}

/** What one cache holds: its answers, their keys by customer, and its reads in flight. */
export interface Holdings {
  readonly entries: LRUCache<string, Entry>;
  readonly held: Map<string, Set<string>>;
  readonly flights: Map<string, Flight>;
  readonly flightsByBucket: Map<string, Set<Flight>>;
}

/**
 * Reads `load` for `read.key`, joined by later reads of the key while out, and keeps its answer
 * unless an invalidation named it meanwhile (or it is larger than the whole cap).
 */
export function startFlight(
  holdings: Holdings,
  read: { key: string; path: string; bucket: string; load: () => Promise<CachedAnswer> },
  options: { maxBytes: number; clock: () => number },
): Flight {
  const { entries, held, flights, flightsByBucket } = holdings;
  const { key, path, bucket } = read;
  const flight: Flight = { key, promise: read.load(), path, bucket, invalidated: false };
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
      entries.set(key, { answer: kept, path, bucket, bytes, storedAt: options.clock(), expired: false });
      addTo(held, bucket, key);
    },
    () => land(),
  );
  return flight;
}

/** Drops the answers `reads` names and marks the reads of them in flight; returns how many. */
export function dropNamed(holdings: Holdings, reads: StaleReads): number {
  const { entries, held, flights, flightsByBucket } = holdings;
  let dropped = 0;
  if (reads.kind === 'everything') {
    dropped += entries.size;
    for (const out of flightsByBucket.values()) {
      for (const flight of out) flight.invalidated = true;
      dropped += out.size;
    }
    flights.clear();
    flightsByBucket.clear();
    entries.clear();
    return dropped;
  }
  const bucket = bucketOfStale(reads) ?? PLATFORM_BUCKET;
  const matches = pathMatcherOf(reads);
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
  return dropped;
}

function addTo<T>(index: Map<string, Set<T>>, bucket: string, member: T): void {
  let members = index.get(bucket);
  if (members === undefined) index.set(bucket, (members = new Set()));
  members.add(member);
}

/** Takes `member` out of `index`'s `bucket`, and the bucket once it is empty. */
export function removeFrom<T>(index: Map<string, Set<T>>, bucket: string, member: T): void {
  const members = index.get(bucket);
  if (members === undefined) return;
  members.delete(member);
  if (members.size === 0) index.delete(bucket);
}
