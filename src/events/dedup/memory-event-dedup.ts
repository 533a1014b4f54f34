/**
 * De-duplication of webhook deliveries within one process, for a single replica without Redis.
 */
import {
  dedupTimings,
  type ClaimResult,
  type EventDeduplicator,
  type EventDeduplicatorOptions,
} from './event-dedup.ts';

/** Options of {@link createMemoryEventDeduplicator}. */
export interface MemoryEventDeduplicatorOptions extends EventDeduplicatorOptions {
  /**
   * Most ids remembered. When full, the oldest entry is forgotten first, so a flood of events costs
   * bounded memory; a forgotten id would be published again if redelivered. Default 100 000.
   */
  maxEntries?: number;
  /** Clock in milliseconds. Default `Date.now`. */
  now?: () => number;
}

type Entry = { state: 'claimed' | 'seen'; expiresAt: number };

/**
 * An {@link EventDeduplicator} in this process's memory: right for a single replica. Entries expire
 * (claims after `claimTtlMs`, seen ids after `retentionMs`) and the map never holds more than
 * `maxEntries`.
 */
export function createMemoryEventDeduplicator(
  options: MemoryEventDeduplicatorOptions = {},
): EventDeduplicator {
  const { retentionMs, claimTtlMs } = dedupTimings(options);
  const maxEntries = options.maxEntries ?? 100_000;
  const now = options.now ?? Date.now;
  // A Map iterates in insertion order; every write re-inserts, so the first key is the oldest write.
  const entries = new Map<string, Entry>();

  function write(eventId: string, entry: Entry): void {
    entries.delete(eventId);
    entries.set(eventId, entry);
    evictExpiredFromTheFront(now());
    while (entries.size > maxEntries) {
      const oldest = entries.keys().next();
      if (oldest.done) break;
      entries.delete(oldest.value);
    }
  }

  // Entries have different lifetimes, so the oldest write is not always the first to expire; sweeping
  // from the front until a live entry is cheap and keeps the common case (equal lifetimes) tidy.
  function evictExpiredFromTheFront(at: number): void {
    for (const [id, entry] of entries) {
      if (entry.expiresAt > at) break;
      entries.delete(id);
    }
  }

  return {
    async claim(eventId: string): Promise<ClaimResult> {
      const at = now();
      const entry = entries.get(eventId);
      if (entry !== undefined && entry.expiresAt > at) return entry.state === 'seen' ? 'seen' : 'in_flight';
      write(eventId, { state: 'claimed', expiresAt: at + claimTtlMs });
      return 'claimed';
    },
    async confirm(eventId: string): Promise<void> {
      write(eventId, { state: 'seen', expiresAt: now() + retentionMs });
    },
    async release(eventId: string): Promise<void> {
      if (entries.get(eventId)?.state === 'claimed') entries.delete(eventId);
    },
    async close(): Promise<void> {
      entries.clear();
    },
  };
}
