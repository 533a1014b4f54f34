/**
 * `Idempotency-Key`: the first request with a key runs, a concurrent one with the same key is
 * refused as in progress, a later identical one replays the stored response, and a different
 * request with the key is a conflict; keys are scoped to the API key and kept 24 hours.
 */
import { createHash } from 'node:crypto';
import { ProblemError } from './problem.ts';

/** A completed response kept for replay. */
export type StoredResponse = {
  status: number;
  /** The serialised body, so later changes to the records it came from cannot alter a replay. */
  payload: string | undefined;
  headers: Record<string, string>;
  /** Replays of a problem carry the replaying request's correlation id. */
  isProblem: boolean;
};

/** What the caller holds while the first request with a key runs. */
export type IdempotencyClaim = {
  /** Stores a response below 500 for replay; a 5xx releases the key so the identical retry runs again. */
  complete(response: StoredResponse): void;
  /** Forgets the key (the request never completed: a reset connection, a stalled response). */
  release(): void;
};

export type IdempotencyOutcome =
  { kind: 'proceed'; claim: IdempotencyClaim } | { kind: 'replay'; response: StoredResponse };

/** Idempotency keys scoped to the API key that sent them. */
export type IdempotencyStore = {
  /**
   * Starts a request with `key`. Throws 409 `idempotency_conflict` when the key was used with
   * another method, path or body, and 409 `idempotency_request_in_progress` while the first
   * request with the key still runs.
   */
  begin(input: {
    scope: string;
    key: string;
    method: string;
    path: string;
    rawBody: Buffer;
  }): IdempotencyOutcome;
  clear(): void;
  size(): number;
};

type Entry = {
  fingerprint: string;
  expiresAt: number;
  response?: StoredResponse;
};

/** 24 hours, the documented retention. */
export const DEFAULT_IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;

/** Creates an in-memory store; entries live `retentionMs` from the first request. */
export function createIdempotencyStore(
  retentionMs = DEFAULT_IDEMPOTENCY_RETENTION_MS,
  now: () => number = Date.now,
): IdempotencyStore {
  // Insertion order is expiry order (one retention for all), so expired entries sit at the front.
  const entries = new Map<string, Entry>();

  const purgeExpired = (time: number) => {
    for (const [id, entry] of entries) {
      if (entry.expiresAt > time) break;
      entries.delete(id);
    }
  };

  return {
    begin({ scope, key, method, path, rawBody }) {
      const time = now();
      purgeExpired(time);
      const id = `${scope}\n${key}`;
      const bodyHash = createHash('sha256').update(rawBody).digest('hex');
      const fingerprint = `${method} ${path} ${bodyHash}`;
      const existing = entries.get(id);

      if (existing) {
        if (existing.fingerprint !== fingerprint) {
          throw new ProblemError(
            409,
            'idempotency_conflict',
            'This Idempotency-Key was already used for another method, path or body. Use a new key for a new request.',
          );
        }
        if (!existing.response) {
          throw new ProblemError(
            409,
            'idempotency_request_in_progress',
            'A request with this Idempotency-Key is still in progress.',
          );
        }
        return { kind: 'replay', response: existing.response };
      }

      const entry: Entry = { fingerprint, expiresAt: time + retentionMs };
      entries.set(id, entry);
      let settled = false;
      return {
        kind: 'proceed',
        claim: {
          complete(response) {
            if (settled) return;
            settled = true;
            if (response.status >= 500) entries.delete(id);
            else entry.response = response;
          },
          release() {
            if (settled) return;
            settled = true;
            entries.delete(id);
          },
        },
      };
    },
    clear: () => entries.clear(),
    size: () => entries.size,
  };
}
