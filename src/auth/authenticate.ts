/**
 * From what a request or connection presents to a {@link Caller}: a bearer token verified against
 * the issuer, a caller's own platform key where that is allowed, or nothing. The door
 * (src/edge/door.ts) asks here for every transport.
 */
import { createHash } from 'node:crypto';
import { OPEN_CALLER, type Caller } from './caller.ts';

/** Verifies one access token; see `token-verifier.ts`. */
export interface TokenVerifier {
  /** @throws when the token is not valid (the error never carries the token). */
  verify(token: string): Promise<Caller>;
}

/** What a request or connection presents. */
export interface Credentials {
  /** The `Authorization` header (or the graphql-ws `connection_init` payload's). */
  authorization?: string | undefined;
  /** A caller's own platform key (`X-API-Key`); used only where `allowCallerApiKey` is on. */
  apiKey?: string | undefined;
  /**
   * A federation gateway's own token, beside the caller's (`X-Gateway-Authorization`): never who
   * the caller is; the door reads it for a live connection (see `gateway-credential.ts`).
   */
  gatewayAuthorization?: string | undefined;
}

export type Authentication =
  /** `apiKey`: the caller's own platform key, which its upstream calls then use. */
  | { outcome: 'authenticated'; caller: Caller; apiKey?: string }
  /** Nothing was presented. */
  | { outcome: 'anonymous' }
  /** Something was presented and it is not valid. `reason` is for debug logs only. */
  | { outcome: 'invalid'; reason: string }
  /** The token could not be checked now (the issuer's keys are unreachable): try again later. */
  | { outcome: 'unavailable' };

export interface Authenticator {
  /**
   * Who `credentials` are. `mayCheckApiKey` is asked before a caller's own key costs an upstream
   * check: answering false makes the key a failed authentication without the call (the door answers
   * false for an address over its failed-authentication budget, so guessing keys costs nothing
   * upstream). A bearer token is checked locally and never asks.
   */
  authenticate(
    credentials: Credentials,
    options?: { mayCheckApiKey?: () => Promise<boolean> },
  ): Promise<Authentication>;
}

export interface AuthenticatorOptions {
  /**
   * `oidc`: bearer tokens (and callers' own keys where allowed); `api-key-only`: no issuer, callers'
   * own keys alone; `none`: every caller is {@link OPEN_CALLER}.
   */
  mode: 'oidc' | 'api-key-only' | 'none';
  /** Required in `oidc` mode. */
  verifier?: TokenVerifier;
  /** Accept a caller's own `X-API-Key` (AUTH_ALLOW_CALLER_API_KEY). */
  allowCallerApiKey: boolean;
  /**
   * Asks the upstream whether a caller's own key is valid (remembered per key): a refused key is a
   * failed authentication here, counted against the caller's address like a bad token.
   */
  checkApiKey?: (apiKey: string) => Promise<'valid' | 'invalid' | 'unavailable'>;
  /** Whether `checkApiKey` already found `apiKey` valid (then checking it again costs nothing). */
  isKnownApiKey?: (apiKey: string) => boolean;
}

/** A bearer token is a token68 (RFC 7235); anything longer than this is refused before any crypto. */
const MAX_TOKEN_LENGTH = 8_192;

/** An `Authorization` value read by {@link bearerToken}. */
export type BearerCredential =
  | { readonly kind: 'token'; readonly token: string }
  /** Present but not `Bearer <token>` (another scheme, no token, stray spaces or characters). */
  | { readonly kind: 'malformed' };

// RFC 6750 §2.1: "Bearer", one space, a b64token (token68). The scheme is case-insensitive (RFC 9110).
const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * The one reader of `Authorization: Bearer <token>`, for every transport. Undefined when absent; a
 * malformed result when present but not a bearer token, which is refused (401), never treated as
 * anonymous. Tokens are only ever read from this header (or graphql-ws's `connection_init`
 * payload), never from a URL or a form body.
 */
export function bearerToken(header: string | undefined): BearerCredential | undefined {
  if (header === undefined) return undefined;
  const match = BEARER.exec(header);
  return match === null ? { kind: 'malformed' } : { kind: 'token', token: match[1]! };
}

/** Builds the authenticator of one app. */
export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  if (options.mode === 'oidc' && options.verifier === undefined) {
    throw new Error('AUTH_MODE=oidc needs a token verifier');
  }
  return {
    async authenticate({ authorization, apiKey }, checks = {}) {
      if (options.mode === 'none') return { outcome: 'authenticated', caller: OPEN_CALLER };
      if (authorization !== undefined && authorization.trim() !== '') {
        if (options.verifier === undefined) return { outcome: 'invalid', reason: 'no_issuer_configured' };
        const bearer = bearerToken(authorization);
        if (bearer?.kind !== 'token' || bearer.token.length > MAX_TOKEN_LENGTH) {
          return { outcome: 'invalid', reason: 'malformed_authorization' };
        }
        try {
          return { outcome: 'authenticated', caller: await options.verifier.verify(bearer.token) };
        } catch (error) {
          if (isUnavailable(error)) return { outcome: 'unavailable' };
          return { outcome: 'invalid', reason: reasonOf(error) };
        }
      }
      if (apiKey !== undefined && apiKey.trim() !== '') {
        if (!options.allowCallerApiKey) return { outcome: 'invalid', reason: 'api_key_not_accepted' };
        const key = apiKey.trim();
        const known = options.isKnownApiKey?.(key) ?? false;
        if (!known && checks.mayCheckApiKey !== undefined && !(await checks.mayCheckApiKey())) {
          return { outcome: 'invalid', reason: 'api_key_not_checked' };
        }
        const checked = (await options.checkApiKey?.(key)) ?? 'valid';
        if (checked === 'unavailable') return { outcome: 'unavailable' };
        if (checked === 'invalid') return { outcome: 'invalid', reason: 'api_key_refused' };
        return { outcome: 'authenticated', caller: apiKeyCaller(key), apiKey: key };
      }
      return { outcome: 'anonymous' };
    },
  };
}

/**
 * A caller with its own platform key acts with that key's rights, which the upstream enforces: the
 * facade scopes nothing more. Its subject is a digest, so logs can tell callers apart without the key.
 */
function apiKeyCaller(apiKey: string): Caller {
  const digest = createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
  return {
    via: 'api-key',
    subject: `key:${digest}`,
    clientId: undefined,
    roles: [],
    operator: true,
    scope: { kind: 'all' },
    expiresAt: undefined,
  };
}

/** The issuer's keys could not be fetched (`AuthenticationUnavailableError`): neither valid nor bad. */
function isUnavailable(error: unknown): boolean {
  return error instanceof Error && error.name === 'AuthenticationUnavailableError';
}

function reasonOf(error: unknown): string {
  const reason = (error as { reason?: unknown } | null)?.reason;
  return typeof reason === 'string' ? reason : 'invalid_token';
}
