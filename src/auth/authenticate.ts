/**
 * From what a request or connection presents to a {@link Caller}: a bearer token verified against
 * the issuer, a caller's own platform key where that is allowed, or nothing. The HTTP middleware
 * and the graphql-ws `onConnect` both ask here, so the two doors answer alike.
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
  authenticate(credentials: Credentials): Promise<Authentication>;
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
}

/** A bearer token is a token68 (RFC 7235); anything longer than this is refused before any crypto. */
const MAX_TOKEN_LENGTH = 8_192;
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** Builds the authenticator of one app. */
export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  if (options.mode === 'oidc' && options.verifier === undefined) {
    throw new Error('AUTH_MODE=oidc needs a token verifier');
  }
  return {
    async authenticate({ authorization, apiKey }) {
      if (options.mode === 'none') return { outcome: 'authenticated', caller: OPEN_CALLER };
      if (authorization !== undefined && authorization.trim() !== '') {
        if (options.verifier === undefined) return { outcome: 'invalid', reason: 'no_issuer_configured' };
        const match = BEARER.exec(authorization);
        const token = match?.[1];
        if (token === undefined || token.length > MAX_TOKEN_LENGTH) {
          return { outcome: 'invalid', reason: 'malformed_authorization' };
        }
        try {
          return { outcome: 'authenticated', caller: await options.verifier.verify(token) };
        } catch (error) {
          if (isUnavailable(error)) return { outcome: 'unavailable' };
          return { outcome: 'invalid', reason: reasonOf(error) };
        }
      }
      if (apiKey !== undefined && apiKey.trim() !== '') {
        if (!options.allowCallerApiKey) return { outcome: 'invalid', reason: 'api_key_not_accepted' };
        const key = apiKey.trim();
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
