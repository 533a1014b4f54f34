/**
 * The issuer's signing keys, as the verifier asks for them: fetched from its JWKS (found through
 * OpenID Connect Discovery unless configured), refreshed when a token names an unknown key, never
 * fetched more often than the cooldown allows, and kept verifying for a while when the issuer is down.
 */
import { createLocalJWKSet, createRemoteJWKSet, type JWTVerifyGetKey } from 'jose';
import { AuthenticationUnavailableError, joseCode } from './authentication-errors.ts';

/** Where the issuer's keys are, and how they are fetched and kept. */
export interface IssuerKeySetOptions {
  /** The issuer, exactly as its tokens' `iss` names it. */
  issuer: string;
  /** The issuer's key set; unset: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`. */
  jwksUrl?: string | undefined;
  /**
   * Least time between two key-set fetches triggered by unknown key ids (default 30 000 ms, jose's):
   * a token with a made-up `kid` cannot make the facade hammer the issuer. A token signed with a
   * key published less than this after the last fetch is refused until the period ends.
   */
  jwksCooldownMs?: number;
  /** How long a fetched key set is used before it is fetched again (default 600 000 ms, jose's). */
  jwksCacheMaxAgeMs?: number;
  /**
   * While the issuer's key set cannot be fetched, how long after the last verification with a fresh
   * set the keys already fetched go on verifying tokens (default 3 600 000 ms), so an outage of the
   * issuer does not turn away callers whose tokens are signed with keys the facade already holds.
   */
  jwksMaxStaleMs?: number;
  /** Timeout of the discovery and key-set requests (default 5000 ms). */
  httpTimeoutMs?: number;
}

/**
 * The issuer's keys as jose's remote key set: fetched on first use, kept for `jwksCacheMaxAgeMs`,
 * fetched again (at most once per `jwksCooldownMs`) when a token names a key id it lacks, which is
 * how a rotated-in key is picked up without a restart and a removed one stops being accepted.
 * Without `jwksUrl`, the URL comes from the discovery document, fetched once; a failed discovery
 * is retried by a later token, but not before the cooldown, so a down issuer is not hammered.
 * When a fetch fails, the issuer is not asked again before the cooldown either; meanwhile tokens
 * signed with keys of the last set fetched are still verified (for up to `jwksMaxStaleMs`), and any
 * other token is unavailable, not refused: its key may be one the issuer has just published.
 */
export function createIssuerKeySet(options: IssuerKeySetOptions): JWTVerifyGetKey {
  const cooldownMs = options.jwksCooldownMs ?? 30_000;
  const timeoutMs = options.httpTimeoutMs ?? 5000;
  const remoteOptions = {
    cooldownDuration: cooldownMs,
    cacheMaxAge: options.jwksCacheMaxAgeMs ?? 600_000,
    timeoutDuration: timeoutMs,
  };
  let remote: ReturnType<typeof createRemoteJWKSet> | undefined =
    options.jwksUrl === undefined ? undefined : createRemoteJWKSet(new URL(options.jwksUrl), remoteOptions);
  let discovery: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;
  let lastDiscoveryFailure: { at: number; error: AuthenticationUnavailableError } | undefined;

  const remoteKeySet = async (): Promise<ReturnType<typeof createRemoteJWKSet>> => {
    if (remote !== undefined) return remote;
    if (discovery === undefined) {
      if (lastDiscoveryFailure !== undefined && Date.now() - lastDiscoveryFailure.at < cooldownMs) {
        throw lastDiscoveryFailure.error;
      }
      discovery = discoverJwksUrl(options.issuer, timeoutMs).then(
        (jwksUrl) => {
          remote = createRemoteJWKSet(jwksUrl, remoteOptions);
          return remote;
        },
        (error: unknown) => {
          const unavailable = new AuthenticationUnavailableError('discovery_unavailable', { cause: error });
          lastDiscoveryFailure = { at: Date.now(), error: unavailable };
          discovery = undefined;
          throw unavailable;
        },
      );
    }
    return discovery;
  };

  const maxStaleMs = options.jwksMaxStaleMs ?? 3_600_000;
  // Time of the last key served by a fresh key set, and while the issuer fails, when to ask it again.
  let lastFreshAt: number | undefined;
  let failing: { retryAt: number; cause: unknown; stale: JWTVerifyGetKey | undefined } | undefined;

  /** The key from the last key set fetched, while the issuer cannot give a newer one. */
  const fromStaleKeySet = async (...args: Parameters<JWTVerifyGetKey>) => {
    const { cause, stale } = failing!;
    if (stale === undefined) throw new AuthenticationUnavailableError('jwks_unavailable', { cause });
    try {
      return await stale(...args);
    } catch (error) {
      if (joseCode(error) === 'ERR_JWKS_MULTIPLE_MATCHING_KEYS') throw error;
      // A key the old set lacks may be one the issuer has just published: no way to tell, so no 401.
      throw new AuthenticationUnavailableError('jwks_unavailable', { cause });
    }
  };

  return async (header, token) => {
    const keys = await remoteKeySet();
    if (failing !== undefined && Date.now() < failing.retryAt) return fromStaleKeySet(header, token);
    try {
      const key = await keys(header, token);
      lastFreshAt = Date.now();
      failing = undefined;
      return key;
    } catch (error) {
      const code = joseCode(error);
      // The token's own problems; everything else means the key set itself could not be had.
      if (
        code === 'ERR_JWKS_NO_MATCHING_KEY' ||
        code === 'ERR_JWKS_MULTIPLE_MATCHING_KEYS' ||
        code === 'ERR_JOSE_NOT_SUPPORTED'
      ) {
        failing = undefined;
        throw error;
      }
      const snapshot = keys.jwks();
      const usable =
        snapshot !== undefined && lastFreshAt !== undefined && Date.now() - lastFreshAt < maxStaleMs;
      failing = {
        retryAt: Date.now() + cooldownMs,
        cause: error,
        stale: usable ? (failing?.stale ?? createLocalJWKSet(snapshot)) : undefined,
      };
      return fromStaleKeySet(header, token);
    }
  };
}

/** OpenID Connect Discovery 1.0: the issuer's `jwks_uri`, from a document that names the same issuer. */
async function discoverJwksUrl(issuer: string, timeoutMs: number): Promise<URL> {
  const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const response = await fetch(url, {
    headers: { accept: 'application/json' },
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`${url} answered ${response.status}, expected 200`);
  }
  const document = (await response.json()) as unknown;
  if (typeof document !== 'object' || document === null) throw new Error(`${url} is not a JSON object`);
  const { issuer: declared, jwks_uri: jwksUri } = document as Record<string, unknown>;
  // §4.3: a document naming another issuer must not be used (it could hand out anyone's keys).
  if (declared !== issuer) {
    throw new Error(`${url} declares issuer ${JSON.stringify(declared)}, expected ${JSON.stringify(issuer)}`);
  }
  if (typeof jwksUri !== 'string' || !/^https?:\/\//.test(jwksUri)) {
    throw new Error(`${url} has no http(s) jwks_uri`);
  }
  return new URL(jwksUri);
}
