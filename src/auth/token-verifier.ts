/**
 * Turns a caller's OpenID Connect access token into a Caller, or refuses it. The token is a JWT
 * signed by the configured issuer (RFC 9068 profile): its signature is checked against the issuer's
 * published keys (JWKS, fetched, cached and refreshed when an unknown key id appears), then its
 * issuer, audience, lifetime and type. Every refusal carries one generic message, so an answer
 * never helps to forge a token, and a machine-readable reason for debug logs; neither ever holds
 * the token or a piece of it. An issuer whose keys cannot be fetched is a distinct, retryable
 * failure: the token may well be good, so the caller is told to try again (503), not to log in (401).
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  type JWTVerifyResult,
} from 'jose';
import type { Caller, CustomerScope } from './caller.ts';
import { ASYMMETRIC_ALGORITHMS, AUTH_CONFIG_DEFAULTS, type OidcConfig } from './config.ts';
import { environmentOfClaim } from '../upstream/environment-keys.ts';

/** The one message of every refused token, whatever was wrong with it. */
export const AUTHENTICATION_FAILED_MESSAGE = 'The access token is missing, invalid or expired.';
/** The one message when the issuer's keys cannot be fetched. */
export const AUTHENTICATION_UNAVAILABLE_MESSAGE =
  'The access token cannot be checked right now; try again later.';

/** Longest token examined; longer ones are refused before any decoding or cryptography. */
export const DEFAULT_MAX_TOKEN_LENGTH = 8 * 1024;

/** Why a token was refused: for debug logs and tests, never for the caller. */
export type AuthenticationFailureReason =
  /** No credential at all (for the caller of the verifier, which itself always gets a token). */
  | 'missing'
  /** Not a compact JWS, undecodable header or claims, a claim of the wrong type. */
  | 'malformed'
  /** Longer than the limit; refused unread. */
  | 'too_large'
  | 'expired'
  /** `nbf` is in the future (beyond the clock tolerance). */
  | 'not_yet_valid'
  | 'wrong_issuer'
  | 'wrong_audience'
  /** A `typ` header other than `at+jwt` or `JWT` (e.g. a DPoP proof or a logout token). */
  | 'wrong_type'
  /** `exp` or `sub` absent. */
  | 'missing_claim'
  | 'bad_signature'
  /** `none`, HS*, or an asymmetric algorithm not configured. */
  | 'disallowed_algorithm'
  /** No key of the issuer's set has the token's `kid` (or fits its algorithm). */
  | 'unknown_key'
  /** Anything else the checks refused (e.g. an RSA key shorter than 2048 bits). */
  | 'unverifiable';

/** A refused token: answer 401 with {@link AUTHENTICATION_FAILED_MESSAGE}. */
export class AuthenticationError extends Error {
  override readonly name = 'AuthenticationError';
  /** For debug logs only; never show it to the caller. */
  readonly reason: AuthenticationFailureReason;

  constructor(reason: AuthenticationFailureReason) {
    super(AUTHENTICATION_FAILED_MESSAGE);
    this.reason = reason;
  }
}

/** Why a token could not be checked at all. */
export type AuthenticationUnavailableReason =
  /** The issuer's discovery document could not be fetched or is unusable (e.g. another `issuer`). */
  | 'discovery_unavailable'
  /** The key set could not be fetched, timed out, or is not a usable JWKS. */
  | 'jwks_unavailable';

/**
 * The issuer's keys cannot be had right now, so the token is neither accepted nor known to be bad:
 * answer 503 (with `Retry-After`) rather than 401. `cause` holds the network or parsing error,
 * which names the issuer's URLs but never the token.
 */
export class AuthenticationUnavailableError extends Error {
  override readonly name = 'AuthenticationUnavailableError';
  readonly reason: AuthenticationUnavailableReason;
  /** Always true: the same token may be accepted once the issuer answers again. */
  readonly retryable = true;

  constructor(reason: AuthenticationUnavailableReason, options?: { cause?: unknown }) {
    super(AUTHENTICATION_UNAVAILABLE_MESSAGE, options);
    this.reason = reason;
  }
}

export interface TokenVerifierOptions extends Pick<OidcConfig, 'issuer' | 'audience'> {
  /** The issuer's key set; unset: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`. */
  jwksUrl?: string | undefined;
  /** Default `RS256, PS256, ES256, EdDSA`; symmetric algorithms and `none` throw here. */
  algorithms?: OidcConfig['algorithms'];
  /** Default 5. */
  clockToleranceSeconds?: number;
  /** Default `customer_ids`. A name with dots that is not itself a claim is read as a path (`realm_access.roles`). */
  customerIdsClaim?: string;
  /** Default `roles`; read like {@link customerIdsClaim}. */
  rolesClaim?: string;
  /** Default `operator`. */
  operatorRole?: string;
  /** Default `environment`; read like {@link customerIdsClaim}. */
  environmentClaim?: string;
  /** Default `contract`; read like {@link customerIdsClaim}. */
  contractClaim?: string;
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
  /** Longest token examined (default {@link DEFAULT_MAX_TOKEN_LENGTH}). */
  maxTokenLength?: number;
  /** The clock `exp` and `nbf` are compared with (ms since the epoch); default `Date.now`. */
  now?: () => number;
}

export interface TokenVerifier {
  /**
   * The caller a token stands for. Rejects with {@link AuthenticationError} when the token is
   * refused, and with {@link AuthenticationUnavailableError} when the issuer's keys cannot be fetched;
   * never with anything else.
   */
  verify(token: string): Promise<Caller>;
}

// Three base64url segments, none empty: an unsigned token (`alg: none`, empty signature) ends here.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * `typ` values accepted: RFC 9068's `at+jwt` (and its media-type spelling), and plain `JWT`, which
 * Keycloak, Microsoft Entra ID and older Auth0 tenants put on access tokens. An absent `typ` is
 * accepted too: Okta and Amazon Cognito access tokens carry none. Any other value names another
 * kind of token (DPoP proof, logout token, security event) and is refused.
 */
const ACCEPTED_TYPES = new Set(['at+jwt', 'application/at+jwt', 'jwt', 'application/jwt']);

/** Builds a verifier; nothing is fetched until the first token arrives. */
export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const algorithms = [...(options.algorithms ?? AUTH_CONFIG_DEFAULTS.AUTH_ALGORITHMS)];
  const symmetric = algorithms.filter((alg) => !(ASYMMETRIC_ALGORITHMS as readonly string[]).includes(alg));
  if (symmetric.length > 0 || algorithms.length === 0) {
    throw new TypeError(
      `createTokenVerifier: algorithms must be a non-empty list of ${ASYMMETRIC_ALGORITHMS.join(', ')}; got ${JSON.stringify(algorithms)}`,
    );
  }
  const maxTokenLength = options.maxTokenLength ?? DEFAULT_MAX_TOKEN_LENGTH;
  const rolesClaim = options.rolesClaim ?? AUTH_CONFIG_DEFAULTS.AUTH_ROLES_CLAIM;
  const customerIdsClaim = options.customerIdsClaim ?? AUTH_CONFIG_DEFAULTS.AUTH_CUSTOMER_IDS_CLAIM;
  const operatorRole = options.operatorRole ?? AUTH_CONFIG_DEFAULTS.AUTH_OPERATOR_ROLE;
  const environmentClaim = options.environmentClaim ?? AUTH_CONFIG_DEFAULTS.AUTH_ENVIRONMENT_CLAIM;
  const contractClaim = options.contractClaim ?? AUTH_CONFIG_DEFAULTS.AUTH_CONTRACT_CLAIM;
  const now = options.now ?? Date.now;
  const keySet = createIssuerKeySet(options);

  const verifyOptions = (): JWTVerifyOptions => ({
    issuer: options.issuer,
    audience: options.audience,
    algorithms,
    clockTolerance: options.clockToleranceSeconds ?? AUTH_CONFIG_DEFAULTS.AUTH_CLOCK_TOLERANCE_SECONDS,
    requiredClaims: ['exp', 'sub'],
    currentDate: new Date(now()),
  });

  return {
    async verify(token) {
      // Cheap checks first: nothing oversized or oddly shaped reaches a decoder, let alone crypto.
      if (typeof token !== 'string') throw new AuthenticationError('malformed');
      if (token.length > maxTokenLength) throw new AuthenticationError('too_large');
      if (!COMPACT_JWS.test(token)) throw new AuthenticationError('malformed');
      let header: ReturnType<typeof decodeProtectedHeader>;
      try {
        header = decodeProtectedHeader(token);
      } catch {
        throw new AuthenticationError('malformed');
      }
      // The header is the token's own JSON, whatever jose's types say: `typ` may be any value.
      const type: unknown = header.typ;
      if (type !== undefined && (typeof type !== 'string' || !ACCEPTED_TYPES.has(type.toLowerCase()))) {
        throw new AuthenticationError('wrong_type');
      }

      let verified: JWTVerifyResult;
      try {
        verified = await verifyJwt(token, keySet, verifyOptions());
      } catch (error) {
        throw toAuthenticationError(error);
      }
      return toCaller(verified.payload, {
        rolesClaim,
        customerIdsClaim,
        operatorRole,
        environmentClaim,
        contractClaim,
      });
    },
  };
}

/**
 * jwtVerify, plus the case jose leaves to its user: several keys fit a token (no `kid`, or a set
 * that repeats one), each tried in turn. jose checks the algorithm against the allowed list before
 * asking for a key, so `none` and HS* tokens never cause a key-set fetch.
 */
async function verifyJwt(token: string, keySet: JWTVerifyGetKey, options: JWTVerifyOptions) {
  try {
    return await jwtVerify(token, keySet, options);
  } catch (error) {
    if (joseCode(error) !== 'ERR_JWKS_MULTIPLE_MATCHING_KEYS') throw error;
    let last: unknown = error;
    for await (const key of error as AsyncIterable<CryptoKey>) {
      try {
        return await jwtVerify(token, key, options);
      } catch (candidateError) {
        if (joseCode(candidateError) !== 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') throw candidateError;
        last = candidateError;
      }
    }
    throw last;
  }
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
function createIssuerKeySet(options: TokenVerifierOptions): JWTVerifyGetKey {
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

function joseCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/** One reason per jose failure; jose's own errors are dropped here, since they carry the claims. */
function toAuthenticationError(error: unknown): AuthenticationError | AuthenticationUnavailableError {
  if (error instanceof AuthenticationUnavailableError) return error;
  switch (joseCode(error)) {
    case 'ERR_JWT_EXPIRED':
      return new AuthenticationError('expired');
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      return new AuthenticationError(claimFailureReason(error as { claim?: unknown; reason?: unknown }));
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return new AuthenticationError('bad_signature');
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return new AuthenticationError('disallowed_algorithm');
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
    case 'ERR_JOSE_NOT_SUPPORTED':
      return new AuthenticationError('unknown_key');
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return new AuthenticationError('malformed');
    default:
      return new AuthenticationError('unverifiable');
  }
}

function claimFailureReason(error: { claim?: unknown; reason?: unknown }): AuthenticationFailureReason {
  if (error.reason === 'missing') return 'missing_claim';
  if (error.reason === 'invalid') return 'malformed';
  switch (error.claim) {
    case 'iss':
      return 'wrong_issuer';
    case 'aud':
      return 'wrong_audience';
    case 'nbf':
      return 'not_yet_valid';
    case 'typ':
      return 'wrong_type';
    default:
      return 'unverifiable';
  }
}

interface ClaimNames {
  rolesClaim: string;
  customerIdsClaim: string;
  operatorRole: string;
  environmentClaim: string;
  contractClaim: string;
}

function toCaller(payload: JWTPayload, names: ClaimNames): Caller {
  const { sub, exp } = payload;
  if (typeof sub !== 'string' || sub === '' || typeof exp !== 'number') {
    throw new AuthenticationError('malformed');
  }
  const roles = readRoles(readClaim(payload, names.rolesClaim));
  const operator = roles.includes(names.operatorRole);
  const scope: CustomerScope = operator
    ? Object.freeze({ kind: 'all' })
    : Object.freeze({
        kind: 'customers',
        customerIds: readCustomerIds(readClaim(payload, names.customerIdsClaim)),
      });
  const clientId = [payload['client_id'], payload['azp']].find((value) => typeof value === 'string');
  // Anything but exactly `sandbox` or `live` names no environment (refused where one is needed).
  const environment = environmentOfClaim(readClaim(payload, names.environmentClaim));
  const contract = readContract(readClaim(payload, names.contractClaim));
  return Object.freeze({
    via: 'token',
    subject: sub,
    clientId,
    roles: Object.freeze(roles),
    operator,
    scope,
    expiresAt: exp * 1000,
    ...(environment === undefined ? {} : { environment }),
    ...(contract === undefined ? {} : { contract }),
  });
}

/**
 * The contract a token names: a non-empty string, or none when the claim is absent. Any other
 * value is refused with the token (`malformed`): a claim the facade cannot read must never widen
 * what the caller is served to the default contract.
 */
function readContract(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new AuthenticationError('malformed');
  return value;
}

/**
 * A claim by its exact name (Auth0's namespaced claims are URLs, dots included), else, for a name
 * with dots, by path through nested objects (Keycloak's `realm_access.roles`). Own properties only.
 */
function readClaim(payload: JWTPayload, name: string): unknown {
  if (Object.hasOwn(payload, name)) return payload[name];
  if (!name.includes('.')) return undefined;
  let value: unknown = payload;
  for (const segment of name.split('.')) {
    if (
      typeof value !== 'object' ||
      value === null ||
      Array.isArray(value) ||
      !Object.hasOwn(value, segment)
    ) {
      return undefined;
    }
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

/**
 * Roles: an array of strings (RFC 9068 §2.2.3.1, and every common issuer). A single string is also
 * read as space-separated roles, the shape of `scope` that some issuers reuse for roles when a
 * mapper flattens them. Anything else, or an array with a non-string member, is no roles at all:
 * an unreadable claim must never grant the operator role.
 */
function readRoles(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter((role) => role !== '');
  if (Array.isArray(value) && value.every((role) => typeof role === 'string')) {
    return [...new Set(value.filter((role) => role !== ''))];
  }
  return [];
}

/** Customer ids: an array of strings; anything else (a bare string included) is the empty set. */
function readCustomerIds(value: unknown): ReadonlySet<string> {
  if (Array.isArray(value) && value.every((id) => typeof id === 'string')) {
    return new Set(value.filter((id) => id !== ''));
  }
  return new Set();
}
