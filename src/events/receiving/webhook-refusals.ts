/**
 * Refused webhook deliveries, counted per sender address in fixed windows: an address refused more
 * than `limit` times in a window is answered 429 before its headers are even checked, until the
 * window ends; and only the first refusal of each address in a window is logged, carrying how many
 * the previous window refused, so a flood of forgeries writes a line per address per window rather
 * than one per forgery. Per process: each replica counts what it receives.
 *
 * A signed delivery is never refused, so the upstream's own address is never counted unless it
 * shares its address with the forger (the same proxy without a trusted X-Forwarded-For): then its
 * deliveries wait out the window and its retries get through.
 */

/** Options of {@link createWebhookRefusals}. */
export interface WebhookRefusalsOptions {
  /** Refusals an address may have in one window before it is answered 429. */
  limit: number;
  /** Length of a window, in milliseconds. */
  windowMs: number;
  /** Addresses remembered at most; the oldest window is forgotten first. Default 10,000. */
  maxAddresses?: number;
  /** Clock in milliseconds. Default `Date.now`. */
  now?: () => number;
}

/** What {@link WebhookRefusals.refused} decided about the log line of a refusal. */
export interface RefusalSample {
  /** Log this refusal (the first of its address in this window). */
  log: boolean;
  /** Refusals of the address in its previous window (for the logged line). */
  refusedInPreviousWindow: number;
}

export interface WebhookRefusals {
  /** Seconds until `address` may deliver again, or undefined while it is within its limit. */
  blockedFor(address: string): number | undefined;
  /** Counts a refusal of `address`; says whether to log it. */
  refused(address: string): RefusalSample;
}

interface Window {
  startedAt: number;
  count: number;
  previousCount: number;
}

export function createWebhookRefusals(options: WebhookRefusalsOptions): WebhookRefusals {
  const now = options.now ?? Date.now;
  const maxAddresses = options.maxAddresses ?? 10_000;
  // A Map keeps insertion order: re-inserting an address on each new window keeps the oldest first.
  const windows = new Map<string, Window>();

  const current = (address: string): Window | undefined => {
    const window = windows.get(address);
    if (window === undefined) return undefined;
    const elapsed = now() - window.startedAt;
    if (elapsed < options.windowMs) return window;
    const next = {
      startedAt: now(),
      count: 0,
      previousCount: elapsed < 2 * options.windowMs ? window.count : 0,
    };
    windows.delete(address);
    windows.set(address, next);
    return next;
  };

  return {
    blockedFor(address) {
      const window = current(address);
      if (window === undefined || window.count <= options.limit) return undefined;
      return Math.max(1, Math.ceil((window.startedAt + options.windowMs - now()) / 1000));
    },
    refused(address) {
      let window = current(address);
      if (window === undefined) {
        if (windows.size >= maxAddresses) windows.delete(windows.keys().next().value!);
        window = { startedAt: now(), count: 0, previousCount: 0 };
        windows.set(address, window);
      }
      window.count += 1;
      return { log: window.count === 1, refusedInPreviousWindow: window.previousCount };
    },
  };
}
