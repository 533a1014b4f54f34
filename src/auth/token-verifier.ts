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
  decodeProtectedHeader,
  jwtVerify,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  type JWTVerifyResult,
} from 'jose';
import { AuthenticationError, joseCode, toAuthenticationError } from './authentication-errors.ts';
import type { Caller } from './caller.ts';
import { ASYMMETRIC_ALGORITHMS, AUTH_CONFIG_DEFAULTS, type OidcConfig } from './config.ts';
import { createIssuerKeySet, type IssuerKeySetOptions } from './issuer-key-set.ts';
import { toCaller } from './token-claims.ts';

export {
  AUTHENTICATION_FAILED_MESSAGE,
  AUTHENTICATION_UNAVAILABLE_MESSAGE,
  AuthenticationError,
  AuthenticationUnavailableError,
} from './authentication-errors.ts';

/** Longest token examined; longer ones are refused before any decoding or cryptography. */
export const DEFAULT_MAX_TOKEN_LENGTH = 8 * 1024;

export interface TokenVerifierOptions extends IssuerKeySetOptions, Pick<OidcConfig, 'issuer' | 'audience'> {
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
