/**
 * A federation gateway's own credential, sent beside the caller's: `X-Gateway-Authorization:
 * Bearer <token>`, a token of the configured issuer for the facade's audience whose roles hold
 * {@link GATEWAY_ROLE}. It proves the request came through a trusted gateway, which is what the
 * facade's inline traces (`ftv1`, src/http/gateway-inline-trace.ts) are given to, while the
 * caller's own `Authorization` still decides everything the request may read. Over graphql-ws it
 * also makes the connection a gateway's multiplexer of its caller's operations, to which the
 * per-connection cap does not apply (src/edge/graphql-ws.ts). It grants nothing else: no customer,
 * no operation, no budget.
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

/** A verified gateway credential: until when it holds (ms since the epoch, clock tolerance included). */
export interface VerifiedGateway {
  readonly expiresAt: number | undefined;
}

/** Whether a connection's verified gateway credential (if any) still holds at `now`. */
export function gatewayStillHolds(gateway: VerifiedGateway | undefined, now: number = Date.now()): boolean {
  return gateway !== undefined && (gateway.expiresAt === undefined || now < gateway.expiresAt);
}

/**
 * Verifies an `X-Gateway-Authorization` value: a valid bearer token of the issuer, for the facade's
 * audience, holding the gateway role, with until when it holds. Never throws; undefined without an
 * issuer (`AUTH_MODE` other than `oidc`), for a missing, malformed, expired or foreign token, a
 * token without the role, and while the issuer's keys cannot be fetched.
 */
export function createGatewayVerifier(
  auth: AuthConfig,
): (header: string | undefined) => Promise<VerifiedGateway | undefined> {
  // A verifier of its own (its own key-set cache): the caller's verifier belongs to the door.
  const oidc = auth.mode === 'oidc' ? auth.oidc : undefined;
  const verifier = oidc === undefined ? undefined : createTokenVerifier(oidc);
  const toleranceMs = (oidc?.clockToleranceSeconds ?? 0) * 1000;
  return async (header) => {
    if (verifier === undefined || header === undefined) return undefined;
    const bearer = bearerToken(header);
    if (bearer?.kind !== 'token') return undefined;
    try {
      const caller = await verifier.verify(bearer.token);
      if (!holdsGatewayRole(caller)) return undefined;
      return { expiresAt: caller.expiresAt === undefined ? undefined : caller.expiresAt + toleranceMs };
    } catch {
      return undefined;
    }
  };
}

/**
 * Checks an `X-Gateway-Authorization` value: true only for a valid bearer token of the issuer, for
 * the facade's audience, holding the gateway role ({@link createGatewayVerifier}). Never throws.
 */
export function createGatewayCredentialCheck(
  auth: AuthConfig,
): (header: string | undefined) => Promise<boolean> {
  const verify = createGatewayVerifier(auth);
  return async (header) => (await verify(header)) !== undefined;
}
