/**
 * The emulator's API keys and who may do what with each (`X-API-Key`): the environment a key
 * belongs to, read-only keys, and the 401 and 403 problems of the assumptions doc.
 */
import { ProblemError } from './problem.ts';
import type { ApiKeyConfig, ApiKeyIdentity } from './types.ts';

/** The emulator's keys unless configured otherwise (`EMULATOR_API_KEYS`, `createEmulator({ apiKeys })`). */
export const DEFAULT_API_KEYS: readonly ApiKeyConfig[] = [
  { key: 'sk_sandbox_emulator', id: 'sandbox-read-write', environment: 'sandbox', scope: 'read_write' },
  {
    key: 'sk_sandbox_emulator_readonly',
    id: 'sandbox-read-only',
    environment: 'sandbox',
    scope: 'read_only',
  },
  { key: 'sk_live_emulator', id: 'live-read-write', environment: 'live', scope: 'read_write' },
];

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Authenticates `X-API-Key` and applies the permission rules of the assumptions doc. */
export type Authenticator = {
  /**
   * Returns the caller's key identity, or throws 401 `unauthorized` (missing or unknown key) or
   * 403 `forbidden` (a read-only key writing; a live key on `/v3/sandbox/*`). The key itself is
   * never part of an error.
   */
  authenticate(apiKey: string | string[] | undefined, method: string, path: string): ApiKeyIdentity;
  /**
   * Accepts `key` from now on: as one more key of the identity `id` when it exists (the same
   * environment, scope and idempotency scope, as a rotated key of one account), or as a new
   * identity (then `environment` and `scope` are required). Throws a problem for a key already
   * accepted, an unknown id without `environment` and `scope`, or a mismatch with the id's.
   */
  addKey(input: {
    key: string;
    id: string;
    environment?: ApiKeyIdentity['environment'];
    scope?: ApiKeyIdentity['scope'];
  }): KeySummary;
  /** Stops accepting `key` (401 from then on); throws a 404 problem for a key not accepted. */
  revokeKey(key: string): KeySummary;
  /** Each identity with how many keys it has now; never a key. */
  summaries(): KeySummary[];
};

/** An identity and how many keys it has now (never the keys themselves). */
export type KeySummary = ApiKeyIdentity & { keys: number };

/** Builds the authenticator over the configured keys; throws on a configuration that cannot work. */
export function createAuthenticator(keys: readonly ApiKeyConfig[]): Authenticator {
  const byKey = new Map<string, ApiKeyIdentity>();
  const ids = new Set<string>();
  for (const { key, ...identity } of keys) {
    if (typeof key !== 'string' || key.length === 0)
      throw new Error(`API key "${identity.id}" has an empty key.`);
    if (byKey.has(key))
      throw new Error(`API key "${identity.id}" repeats the key of another configured key.`);
    // Idempotency keys are scoped by this id: two keys sharing one would replay each other's responses.
    if (ids.has(identity.id)) throw new Error(`Two configured API keys share the id "${identity.id}".`);
    ids.add(identity.id);
    byKey.set(key, identity);
  }

  const identities = new Map<string, ApiKeyIdentity>(
    [...byKey.values()].map((identity) => [identity.id, identity]),
  );
  const summaryOf = (identity: ApiKeyIdentity): KeySummary => ({
    ...identity,
    keys: [...byKey.values()].filter((held) => held === identity).length,
  });

  return {
    addKey({ key, id, environment, scope }) {
      if (byKey.has(key)) throw new ProblemError(409, 'conflict', 'This key is already accepted.');
      let identity = identities.get(id);
      if (identity === undefined) {
        if (environment === undefined || scope === undefined) {
          throw new ProblemError(
            404,
            'not_found',
            `No key has the id "${id}"; give environment and scope to start a new one.`,
          );
        }
        identity = { id, environment, scope };
        identities.set(id, identity);
      } else if (
        (environment !== undefined && environment !== identity.environment) ||
        (scope !== undefined && scope !== identity.scope)
      ) {
        throw new ProblemError(
          409,
          'conflict',
          `The keys of "${id}" are ${identity.environment} ${identity.scope} keys; a new key of it is too.`,
        );
      }
      byKey.set(key, identity);
      return summaryOf(identity);
    },
    revokeKey(key) {
      const identity = byKey.get(key);
      if (identity === undefined) throw new ProblemError(404, 'not_found', 'This key is not accepted.');
      byKey.delete(key);
      return summaryOf(identity);
    },
    summaries: () => [...identities.values()].map(summaryOf),
    authenticate(apiKey, method, path) {
      const value = Array.isArray(apiKey) ? apiKey[0] : apiKey;
      if (value === undefined || value === '') {
        throw new ProblemError(401, 'unauthorized', 'Send your API key in the X-API-Key header.');
      }
      const identity = byKey.get(value);
      if (!identity) {
        throw new ProblemError(
          401,
          'unauthorized',
          'The API key in X-API-Key is not valid. Check that it was not rotated.',
        );
      }
      if (identity.scope === 'read_only' && WRITE_METHODS.has(method)) {
        throw new ProblemError(
          403,
          'forbidden',
          `This API key is read-only; it cannot make ${method} requests.`,
        );
      }
      if (identity.environment === 'live' && (path === '/v3/sandbox' || path.startsWith('/v3/sandbox/'))) {
        throw new ProblemError(
          403,
          'forbidden',
          'Sandbox operations need a sandbox API key; this key is a live key.',
        );
      }
      return identity;
    },
  };
}
