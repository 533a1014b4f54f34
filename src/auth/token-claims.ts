/**
 * The Caller an accepted token stands for, read from its claims: its subject, roles, customers and
 * environment and contract, each claim found by its configured name. A claim that cannot be read grants nothing.
 */
import type { JWTPayload } from 'jose';
import type { Caller, CustomerScope } from './caller.ts';
import { AuthenticationError } from './authentication-errors.ts';
import { environmentOfClaim } from '../upstream/environment-keys.ts';

/** The configured names of the claims a Caller is read from, and the role that makes an operator. */
export interface ClaimNames {
  rolesClaim: string;
  customerIdsClaim: string;
  operatorRole: string;
  environmentClaim: string;
  contractClaim: string;
}

/** The Caller of a verified token's `payload`. */
export function toCaller(payload: JWTPayload, names: ClaimNames): Caller {
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
