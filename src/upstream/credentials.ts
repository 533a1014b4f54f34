/**
 * The credentials one request uses upstream. Kept in one object so caller authentication and
 * customer scoping can later be added in one place, without touching resolvers.
 */
import { createHash } from 'node:crypto';
import { inspect } from 'node:util';

export interface UpstreamCredentials {
  /**
   * Sent as `X-API-Key`: for the facade's own key, the key in use at the moment it is read (it
   * rotates), so every attempt reads it anew. Never logged, echoed or put in an error.
   */
  readonly apiKey: string;
  /**
   * What caches keep answers under instead of the key: the same for every key of the facade's own
   * key source while they select one environment, so a rotation neither misses nor flushes; a
   * digest of a caller's own key otherwise.
   */
  readonly partition: string;
  /** Whether the key is the facade's configured one (not a caller's own). */
  readonly configured: boolean;
}

/**
 * The facade's own key where it can change while the process runs (see `key-source.ts`): read at
 * each use, never copied.
 */
export interface CurrentKey {
  /** The key in use now. */
  current(): string;
  /** See {@link UpstreamCredentials.partition}. */
  partition(): string;
}

/** A key as an upstream context is given it: a fixed key (a caller's own) or the facade's current one. */
export type UpstreamKey = string | CurrentKey;

const REDACTED = '[redacted]';

/**
 * Wraps an API key so that serialising or inspecting the credentials (a stray `JSON.stringify` of
 * a context, a debugger print) shows `[redacted]` instead of the key.
 */
export function createCredentials(apiKey: UpstreamKey): UpstreamCredentials {
  return new RedactedCredentials(apiKey);
}

/** The partition of a fixed key: a digest, so no key sits in a cache's map a heap dump could show. */
export function partitionOfKey(apiKey: string): string {
  return `key:${createHash('sha256').update(apiKey).digest('base64url')}`;
}

/**
 * The key (or its source) lives in a private field behind prototype getters, so the object has no
 * own enumerable property to leak, and one class shape serves every operation (no per-object
 * property definitions).
 */
class RedactedCredentials implements UpstreamCredentials {
  readonly #fixed: string | undefined;
  readonly #source: CurrentKey | undefined;
  #partition: string | undefined;

  constructor(key: UpstreamKey) {
    if (typeof key === 'string') this.#fixed = key;
    else this.#source = key;
  }

  get apiKey(): string {
    return this.#source === undefined ? (this.#fixed ?? '') : this.#source.current();
  }

  get partition(): string {
    if (this.#source !== undefined) return this.#source.partition();
    this.#partition ??= partitionOfKey(this.#fixed ?? '');
    return this.#partition;
  }

  get configured(): boolean {
    return this.#source !== undefined;
  }

  toJSON(): { apiKey: string } {
    return { apiKey: REDACTED };
  }

  [inspect.custom](): string {
    return `UpstreamCredentials { apiKey: '${REDACTED}' }`;
  }
}
