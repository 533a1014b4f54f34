/**
 * What a refused or uncheckable token is: one generic message for every refusal, so an answer never
 * helps to forge a token, with a machine-readable reason for debug logs; and the mapping of jose's
 * failures onto those reasons, which drops jose's own errors (they carry the token's claims).
 */

/** The one message of every refused token, whatever was wrong with it. */
export const AUTHENTICATION_FAILED_MESSAGE = 'The access token is missing, invalid or expired.';
/** The one message when the issuer's keys cannot be fetched. */
export const AUTHENTICATION_UNAVAILABLE_MESSAGE =
  'The access token cannot be checked right now; try again later.';

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

/** The `code` of a jose error, if `error` is one. */
export function joseCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}

/** One reason per jose failure; jose's own errors are dropped here, since they carry the claims. */
export function toAuthenticationError(error: unknown): AuthenticationError | AuthenticationUnavailableError {
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
