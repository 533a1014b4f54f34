/**
 * A federation gateway's own credential, sent beside the caller's: `X-Gateway-Authorization:
 * Bearer <token>`, a token of the configured issuer for the facade's audience whose roles hold
 * {@link GATEWAY_ROLE}. It proves the request came through a trusted gateway, which is what the
 * facade's inline traces (`ftv1`, src/http/gateway-inline-trace.ts) are given to, while the
 * caller's own `Authorization` still decides everything the request may read. It grants nothing
 * else: no customer, no operation, no budget.
 */
import type { AuthConfig } from './config.ts';
import { bearerToken } from './authenticate.ts';
import type { Caller } from './caller.ts';
import { createTokenVerifier } from './token-verifier.ts';

/** The request header a gateway sends its own token in (what deploy/gateway.config.ts sends). */
export const GATEWAY_AUTHORIZATION_HEADER = 'x-gateway-authorization';

/** The role (in `AUTH_ROLES_CLAIM`) of a trusted gateway's token. */
const GATEWAY_ROLE = 'gateway';

/** Whether `caller`'s token holds the gateway role. */
export function holdsGatewayRole(caller: Pick<Caller, 'roles'> | undefined): boolean {
  return caller?.roles.includes(GATEWAY_ROLE) === true;
}

/**
 * Checks an `X-Gateway-Authorization` value: true only for a valid bearer token of the issuer, for
 * the facade's audience, holding the gateway role. Never throws; false without an issuer
 * (`AUTH_MODE` other than `oidc`), for a missing, malformed, expired or foreign token, and while the
 * issuer's keys cannot be fetched.
 */
export function createGatewayCredentialCheck(
  auth: AuthConfig,
): (header: string | undefined) => Promise<boolean> {
  // A verifier of its own (its own key-set cache): the caller's verifier belongs to the door.
  const verifier =
    auth.mode === 'oidc' && auth.oidc !== undefined ? createTokenVerifier(auth.oidc) : undefined;
  return async (header) => {
    if (verifier === undefined || header === undefined) return false;
    const bearer = bearerToken(header);
    if (bearer?.kind !== 'token') return false;
    try {
      return holdsGatewayRole(await verifier.verify(bearer.token));
    } catch {
      return false;
    }
  };
}
