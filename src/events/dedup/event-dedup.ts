/**
 * De-duplication of webhook deliveries by event id.
 *
 * The upstream delivers at least once and retries for about two minutes, so one event may arrive
 * several times, possibly at the same moment on two replicas. The receiver must publish each event
 * once, and must never acknowledge an event it has not published.
 *
 * The protocol is claim, publish, then confirm or release:
 *
 * 1. `claim(id)` atomically takes the event for this delivery. It answers `claimed` to exactly one
 *    caller; a concurrent duplicate gets `in_flight`, a later one `seen`.
 * 2. The claimant publishes. On success it calls `confirm(id)`, which keeps the id as seen for the
 *    retention window; only then is the delivery acknowledged.
 * 3. If publishing fails it calls `release(id)` and answers with an error, so the upstream's retry
 *    finds the id free and publishes it.
 *
 * Why not publish-then-mark: two concurrent deliveries of one event (a retry racing a slow first
 * attempt, or two replicas) would both pass a "not seen yet" check and both publish. Why not a plain
 * mark-then-publish: a process that dies between the mark and the publish would leave the event
 * marked seen but never published, and every retry would be acknowledged as a duplicate: lost. The
 * claim therefore expires on its own (`claimTtlMs`, far shorter than the upstream's retry window),
 * so even a crash only delays the event until the next retry. An `in_flight` answer is not 2xx, so
 * the upstream retries it too, and by then it is `seen` (acknowledged) or free again (published).
 */

/** The answer of {@link EventDeduplicator.claim}. */
export type ClaimResult =
  /** This caller owns the event: publish it, then confirm or release. */
  | 'claimed'
  /** Another delivery of the same event is being published right now. */
  | 'in_flight'
  /** The event was published already: acknowledge without publishing. */
  | 'seen';

/** Shared or local memory of the event ids already published. */
export interface EventDeduplicator {
  /** Takes the event for publication, atomically across everyone sharing this store. */
  claim(eventId: string): Promise<ClaimResult>;
  /** Marks a claimed event as published; it stays `seen` for the retention window. */
  confirm(eventId: string): Promise<void>;
  /** Gives a claimed event up after a failed publication, so the next delivery can publish it. */
  release(eventId: string): Promise<void>;
  /** Releases resources (connections). The store's data is left alone. */
  close(): Promise<void>;
}

/** Timing shared by every {@link EventDeduplicator}. */
export interface EventDeduplicatorOptions {
  /**
   * How long a published event id is remembered. At least the upstream's retry window (about two
   * minutes of retries); the default, 24 hours, also covers a replayed or manually resent event.
   */
  retentionMs?: number;
  /** How long a claim holds without a confirm, so a crash mid-publication cannot lose the event. Default 30 s. */
  claimTtlMs?: number;
}

const DEFAULT_DEDUP_RETENTION_MS = 24 * 60 * 60 * 1000;
const DEFAULT_DEDUP_CLAIM_TTL_MS = 30_000;

/** The timing of `options`, defaults filled in: one place, so every store keeps the same promises. */
export function dedupTimings(options: EventDeduplicatorOptions): Required<EventDeduplicatorOptions> {
  return {
    retentionMs: options.retentionMs ?? DEFAULT_DEDUP_RETENTION_MS,
    claimTtlMs: options.claimTtlMs ?? DEFAULT_DEDUP_CLAIM_TTL_MS,
  };
}
