/**
 * The credentials one request uses upstream. Kept in one object so caller authentication and
 * customer scoping can later be added in one place, without touching resolvers.
 */
import { inspect } from 'node:util';

export interface UpstreamCredentials {
  /** Sent as `X-API-Key`. Never logged, echoed or put in an error. */
  readonly apiKey: string;
}

const REDACTED = '[redacted]';

/**
 * Wraps an API key so that serialising or inspecting the credentials (a stray `JSON.stringify` of
 * a context, a debugger print) shows `[redacted]` instead of the key.
 */
export function createCredentials(apiKey: string): UpstreamCredentials {
  return new RedactedCredentials(apiKey);
}

/**
 * The key lives in a private field behind a prototype getter, so the object has no own enumerable
 * property to leak, and one class shape serves every operation (no per-object property definitions).
 */
class RedactedCredentials implements UpstreamCredentials {
  readonly #apiKey: string;

  constructor(apiKey: string) {
    this.#apiKey = apiKey;
  }

  get apiKey(): string {
    return this.#apiKey;
  }

  toJSON(): { apiKey: string } {
    return { apiKey: REDACTED };
  }

  [inspect.custom](): string {
    return `UpstreamCredentials { apiKey: '${REDACTED}' }`;
  }
}
