/**
 * The door's `connect` step: who is calling (the credential verified, a failing one spending its
 * address's budget), whether an anonymous request may go on, and for a live connection its scope,
 * its connection budget and its key's environment; then how long the credential holds. The budgets
 * it and the operation budget spend: `budgets.ts`.
 */
import type { GraphQLSchema } from 'graphql';
import type { Authenticator } from '../../auth/authenticate.ts';
import type { VerifiedGateway } from '../../auth/gateway-credential.ts';
import type { Caller } from '../../auth/caller.ts';
import type { PlatformEnvironment } from '../../platform-environment.ts';
import type { Logger } from '../../logger.ts';
import { boundEnvironment } from '../../upstream/environment-keys.ts';
import type { UpstreamProbe } from '../../upstream/probe.ts';
import { isAnonymousDocument } from '../anonymous-documents.ts';
import type { RateBucket, RateLimits } from '../rate-limits.ts';
import { refuse, type Refusal } from '../refusal.ts';
import type { Connection, ConnectRequest } from './door.ts';
import { UNAUTHENTICATED_MESSAGE, type DoorBudgets } from './budgets.ts';

/** What the `connect` step is built from (the door's options). */
export interface ConnectOptions {
  authenticator: Authenticator;
  rateLimits: RateLimits;
  /** `INTROSPECTION=public`: anonymous callers may introspect. */
  publicIntrospection: boolean;
  /** The upstream environment of a key (the facade's own when undefined), remembered per key. */
  environmentOf(
    apiKey: string | undefined,
    environment: PlatformEnvironment | undefined,
  ): Promise<UpstreamProbe>;
  /** The environments the facade holds a key of its own for; absent with `UPSTREAM_API_KEY` alone. */
  environments?: readonly PlatformEnvironment[] | undefined;
  /** Told of every refusal by a rate limit, by bucket (metrics); must not throw. */
  onRateLimited?(bucket: RateBucket): void;
  /**
   * Verifies a federation gateway's own token (`X-Gateway-Authorization`) a live connection
   * presents; absent, no connection is a gateway's. Never throws.
   */
  verifyGateway?: (header: string | undefined) => Promise<VerifiedGateway | undefined>;
  /**
   * The schema `caller` is served (undefined: anonymous): its contract's (src/graph/audiences.ts),
   * against which its documents are parsed, validated, checked and executed. Undefined when its
   * token names a contract not served: `connect` refuses it. Absent: the whole schema, for all.
   */
  schemaOf?(caller: Caller | undefined): GraphQLSchema | undefined;
}

/**
 * Who is this (the `connect` step): the credential verified, a failing one spending the address's
 * budget; a live connection must act for some customer, spends its caller's connection budget and
 * learns its key's environment.
 */
export async function connectCaller(
  options: ConnectOptions,
  budgets: DoorBudgets,
  logger: Logger,
  { credentials, address, kind }: ConnectRequest,
): Promise<Connection | Refusal> {
  const authentication = await options.authenticator.authenticate(credentials, {
    // A caller's own key costs an upstream check: an address that has failed too often pays
    // with a refusal instead (a bearer token is checked locally and never asks).
    mayCheckApiKey: () => budgets.mayFail(address),
  });
  switch (authentication.outcome) {
    case 'unavailable':
      logger.warn('could not check a credential: the issuer keys or the upstream are unavailable');
      return refuse(
        'credentials-unavailable',
        'The access token cannot be checked right now; try again shortly.',
        {
          retryAfterSeconds: 5,
        },
      );
    case 'invalid':
      logger.debug('refused a credential', { reason: authentication.reason });
      return budgets.failed(address);
    case 'anonymous':
      // A long-lived connection without a credential is a failing attempt like a bad one.
      if (kind === 'live') return budgets.failed(address);
      return { caller: undefined, apiKey: undefined, address };
    case 'authenticated':
      break;
  }
  const { caller, apiKey } = authentication;
  // Never the whole schema in place of a contract the token names: such a caller is served none.
  if (options.schemaOf !== undefined && options.schemaOf(caller) === undefined) {
    return refuse('forbidden', 'This token names a contract this service does not serve.');
  }
  const bound =
    options.environments === undefined
      ? undefined
      : boundEnvironment(caller.environment, options.environments);
  if (options.environments !== undefined && bound === undefined) {
    return refuse('forbidden', noEnvironmentMessage(caller.environment, options.environments));
  }
  if (kind === 'request')
    return { caller, apiKey, address, ...(bound === undefined ? {} : { environment: bound }) };
  if (!caller.operator && caller.scope.kind === 'customers' && caller.scope.customerIds.size === 0) {
    return refuse('forbidden', 'This caller may act for no customer: there is nothing to hear.');
  }
  const limited = await budgets.spend('ws-connect', budgets.subjectKey(caller, bound));
  if (limited !== undefined) return limited;
  const probe = await options.environmentOf(apiKey, bound);
  if (probe.outcome === 'refused' && apiKey === undefined) {
    // The facade's own key, not the caller's: the caller's token is valid, and is told to come back.
    logger.warn('the upstream refuses the facade’s own key: a live connection was asked to retry', {
      ...(bound === undefined ? {} : { environment: bound }),
    });
    return refuse(
      'credentials-unavailable',
      "The upstream refuses this service's own credential now; try again shortly.",
      { retryAfterSeconds: 5 },
    );
  }
  if (probe.outcome === 'refused') {
    return probe.problem.status === 401
      ? refuse('invalid-credentials', UNAUTHENTICATED_MESSAGE)
      : refuse('forbidden', 'The upstream refuses this key.');
  }
  if (probe.outcome !== 'ready') {
    logger.warn('could not learn the upstream environment of a live connection', { outcome: probe.outcome });
    return refuse('credentials-unavailable', 'The upstream cannot be reached now; try again shortly.', {
      retryAfterSeconds: 5,
    });
  }
  const gateway = await gatewayOf(options, logger, credentials.gatewayAuthorization);
  return {
    caller,
    apiKey,
    address,
    environment: probe.discovery.environment,
    ...(gateway === undefined ? {} : { gateway }),
  };
}

/**
 * The gateway a live connection comes through, when it presents a gateway credential that holds. One
 * that does not (no gateway role, expired, foreign, unreadable) makes no gateway's connection of it,
 * and refuses nothing: the caller is who its own token says, under every cap of a direct client.
 */
async function gatewayOf(
  options: ConnectOptions,
  logger: Logger,
  header: string | undefined,
): Promise<VerifiedGateway | undefined> {
  if (header === undefined || header === '' || options.verifyGateway === undefined) return undefined;
  const gateway = await options.verifyGateway(header);
  if (gateway === undefined) {
    logger.info(
      'a live connection presented a gateway credential that does not hold: served as a direct client',
    );
  }
  return gateway;
}

/**
 * The rule for anonymous requests, part of `connect`: one without a credential goes on only for the
 * landing page (which holds no data) or a document an anonymous caller may run (`_service`, or
 * introspection when it is public), decided before anything is parsed with the schema.
 */
export function refuseAnonymous(
  connection: Connection,
  ask: { page?: boolean; ownQuery?: unknown },
  publicIntrospection: boolean,
): Refusal | undefined {
  if (connection.caller !== undefined || ask.page === true) return undefined;
  if (isAnonymousDocument(ask.ownQuery, publicIntrospection)) return undefined;
  return refuse('unauthenticated', UNAUTHENTICATED_MESSAGE);
}

/** How long a connection's credential holds: its `exp` with the verifier's clock tolerance. */
export function createExpiry(clockToleranceSeconds: number, now: () => number) {
  const toleranceMs = clockToleranceSeconds * 1000;
  const expiresAt = (connection: Connection): number | undefined => {
    const exp = connection.caller?.expiresAt;
    return exp === undefined ? undefined : exp + toleranceMs;
  };
  const checkCurrent = (connection: Connection): Refusal | undefined => {
    const at = expiresAt(connection);
    if (at === undefined || now() < at) return undefined;
    return refuse('credentials-expired', 'The access token has expired: connect again with a fresh one.');
  };
  return { expiresAt, checkCurrent };
}

/** Why a valid token is refused where every caller must be in one of `configured`. */
function noEnvironmentMessage(
  claimed: PlatformEnvironment | undefined,
  configured: readonly PlatformEnvironment[],
): string {
  const served = configured.join(' or ');
  return claimed === undefined
    ? `This token names no upstream environment: its environment claim must be ${served}.`
    : `This facade serves no ${claimed} environment: the token's environment claim must be ${served}.`;
}
