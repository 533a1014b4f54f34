/**
 * Who is calling: the one shape every layer sees once a request or connection is authenticated.
 * Built from verified token claims (src/auth/token-verifier.ts); read by upstream/ to scope every
 * request it sends, by the rate limiter to key its counters, and by the audit trail.
 */
import type { PlatformEnvironment } from '../platform-environment.ts';

/** Which customers a caller may act for: every one (operators), or a fixed set. */
export type CustomerScope =
  { readonly kind: 'all' } | { readonly kind: 'customers'; readonly customerIds: ReadonlySet<string> };

export interface Caller {
  /** How the caller proved who it is. */
  readonly via: 'token' | 'api-key' | 'open';
  /** The token's `sub` (`key:<id>` for a pass-through API key, `anonymous` when auth is off). */
  readonly subject: string;
  /** The token's `client_id` or `azp`, when present. */
  readonly clientId: string | undefined;
  /** Roles from the configured claim. */
  readonly roles: readonly string[];
  /** Holds the operator role: sees every customer and manages platform-wide resources. */
  readonly operator: boolean;
  readonly scope: CustomerScope;
  /** When the credential stops being valid (ms since the epoch); undefined when it never expires. */
  readonly expiresAt: number | undefined;
  /**
   * The upstream environment the token's environment claim (`AUTH_ENVIRONMENT_CLAIM`) names;
   * absent when it names none. Read only when the facade holds a key per environment.
   */
  readonly environment?: PlatformEnvironment;
  /**
   * The contract the token's contract claim (`AUTH_CONTRACT_CLAIM`) names: the filtered schema this
   * caller is served (src/graph/audiences.ts); absent when it names none.
   */
  readonly contract?: string;
}

/** True when `caller` may read or change anything of `customerId`. */
export function mayActFor(caller: Pick<Caller, 'scope'>, customerId: string): boolean {
  return caller.scope.kind === 'all' || caller.scope.customerIds.has(customerId);
}

/** The caller when authentication is switched off (`AUTH_MODE=none`): the facade is open. */
export const OPEN_CALLER: Caller = Object.freeze({
  via: 'open',
  subject: 'anonymous',
  clientId: undefined,
  roles: Object.freeze(['operator']),
  operator: true,
  scope: Object.freeze({ kind: 'all' }),
  expiresAt: undefined,
});
