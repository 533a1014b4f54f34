/**
 * The store's notion of time. Every change takes one timestamp from here; timestamps
 * strictly increase even when the wall clock stalls or steps back, so ordering by
 * `updatedAt` and the updated-since filter give the same answer on every run.
 */
export type TimestampSource = {
  /** A new RFC 3339 timestamp (millisecond precision, UTC), later than every one before. */
  next(): string;
  /** Makes later timestamps come after `timestamp` (used after loading fixed demo data). */
  advancePast(timestamp: string): void;
};

/** Creates a {@link TimestampSource} over `clock` (default: the system clock). */
export function createTimestampSource(clock: () => Date = () => new Date()): TimestampSource {
  let lastMs = Number.NEGATIVE_INFINITY;
  return {
    next() {
      lastMs = Math.max(clock().getTime(), lastMs + 1);
      return new Date(lastMs).toISOString();
    },
    advancePast(timestamp) {
      lastMs = Math.max(lastMs, Date.parse(timestamp));
    },
  };
}
