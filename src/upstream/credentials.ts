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
  const credentials = { apiKey };
  Object.defineProperties(credentials, {
    apiKey: { value: apiKey, enumerable: false },
    toJSON: { value: () => ({ apiKey: REDACTED }), enumerable: false },
    [inspect.custom]: { value: () => `UpstreamCredentials { apiKey: '${REDACTED}' }`, enumerable: false },
  });
  return credentials;
}
