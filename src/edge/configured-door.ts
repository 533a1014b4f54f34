/**
 * The door of an app, built from its configuration: the authenticator of `AUTH_*`, the rate limits
 * of `RATE_LIMIT_*` (shared through Redis when one is configured), the trusted documents of
 * `TRUSTED_DOCUMENTS` and the query limits of `QUERY_MAX_*`. `createApp` asks here, so no access
 * rule is assembled in the app itself.
 */
import { createHash } from 'node:crypto';
import type { GraphQLSchema } from 'graphql';
import { createAuthenticator, type Authenticator } from '../auth/authenticate.ts';
import { createGatewayVerifier } from '../auth/gateway-credential.ts';
import { createTokenVerifier } from '../auth/token-verifier.ts';
import type { Config } from '../config.ts';
import type { Audiences } from '../graph/audiences.ts';
import { openRedisConnection, whenRedisReady } from '../redis.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { KeyEnvironments } from '../upstream/key-environments.ts';
import { configuredEnvironments } from '../upstream/environment-keys.ts';
import { createDoor, type DoorOptions } from './door/create-door.ts';
import type { Door } from './door/audiences.ts';
import { createRateLimits } from './rate-limits.ts';
import { MCP_RESOURCE_DOCUMENTS } from './mcp/resources.ts';
import {
  createReloadableTrustedDocuments,
  withOwnDocuments,
  type ReloadableTrustedDocuments,
} from './trusted-documents.ts';

/** The door and what closes its connections. */
export interface ConfiguredDoor {
  readonly door: Door;
  /**
   * The manifest of `TRUSTED_DOCUMENTS`, when given (metrics label the operations it lists); its
   * `reload()` reads the file again (SIGHUP, src/main.ts).
   */
  readonly trustedDocuments: ReloadableTrustedDocuments | undefined;
  close(): Promise<void>;
}

/**
 * Builds the door of `config`; the schema is the whole one every transport serves, and each
 * caller is served its audience's (`audiences`: its contract's).
 */
export async function createConfiguredDoor(
  config: Config,
  parts: {
    schema: GraphQLSchema;
    audiences: Audiences;
    keyEnvironments: KeyEnvironments;
    metrics: Metrics;
    logger: Logger;
    /** Told of each step of the door's order an operation takes (`app.lifecycle`'s `admissionStep`). */
    onStep?: DoorOptions['onStep'];
  },
): Promise<ConfiguredDoor> {
  const { logger } = parts;
  // Rate limits are shared by every replica through Redis when there is one.
  const redis =
    config.events.redis !== undefined && config.edge.rateLimits.enabled
      ? openRedisConnection(config.events.redis, 'rate-limits', logger)
      : undefined;
  // Counting starts shared: until the connection is ready each replica would count alone.
  if (redis !== undefined) await whenRedisReady(redis);
  const rateLimits = createRateLimits({
    config: config.edge.rateLimits,
    ...(redis === undefined ? {} : { redis }),
    keyPrefix: config.events.redisKeyPrefix,
    logger,
  });
  // With a manifest, callers other than operators run only the operations listed in it (or, in
  // log-only mode, are logged and counted when they run another). It is read again on reload.
  const trustedDocuments =
    config.edge.trustedDocumentsPath === undefined
      ? undefined
      : await createReloadableTrustedDocuments(
          config.edge.trustedDocumentsPath,
          logger.child({ component: 'trusted-documents' }),
        );
  if (trustedDocuments !== undefined && config.edge.trustedDocumentsMode === 'log-only') {
    logger.warn(
      'TRUSTED_DOCUMENTS_MODE=log-only: operations missing from the manifest run, logged and counted',
    );
  }
  const door = createDoor({
    schema: parts.schema,
    schemaOf: (caller) => parts.audiences.of(caller)?.schema,
    authenticator: createConfiguredAuthenticator(config, parts.keyEnvironments, logger),
    rateLimits,
    maxOperationsPerCaller: config.edge.rateLimits.enabled ? config.edge.rateLimits.subscriptions : undefined,
    // The MCP resources' reads are the facade's own documents, admitted as listed ones.
    trustedDocuments: withOwnDocuments(trustedDocuments, MCP_RESOURCE_DOCUMENTS),
    trustedDocumentsMode: config.edge.trustedDocumentsMode,
    onUntrustedDocument: (reason, action) => parts.metrics.untrustedOperations.inc({ reason, action }),
    queryLimits: config.queryLimits,
    clockToleranceSeconds: config.auth.mode === 'oidc' ? (config.auth.oidc?.clockToleranceSeconds ?? 0) : 0,
    allowedOrigins: config.edge.corsOrigins,
    publicIntrospection: config.introspection === 'public',
    introspectionOff: config.introspection === 'off',
    maxCallsPerOperation: config.upstream.maxCallsPerOperation,
    retriesPerOperation: config.upstream.retry.budget,
    environmentOf: (apiKey, environment) => parts.keyEnvironments.probe(apiKey, environment),
    environments: configuredEnvironments(config.upstream.environmentKeys),
    onRateLimited: (bucket) => parts.metrics.rateLimitRefusals.inc({ bucket }),
    verifyGateway: createGatewayVerifier(config.auth),
    ...(parts.onStep === undefined ? {} : { onStep: parts.onStep }),
    logger,
  });
  return {
    door,
    trustedDocuments,
    async close() {
      await rateLimits.close();
      redis?.disconnect();
    },
  };
}

/**
 * The authenticator of `config.auth`: bearer tokens verified against the issuer's keys, a caller's
 * own platform key where allowed (checked with the upstream once per key), or no check at all
 * (`AUTH_MODE=none`, warned about at start).
 */
function createConfiguredAuthenticator(
  config: Config,
  keyEnvironments: KeyEnvironments,
  logger: Logger,
): Authenticator {
  const auth = config.auth;
  if (auth.mode === 'none') {
    logger.warn('AUTH_MODE=none: the facade is open, every caller acts with the configured upstream key');
  }
  const verifier =
    auth.mode === 'oidc' && auth.oidc !== undefined ? createTokenVerifier(auth.oidc) : undefined;
  // Digests of the callers' own keys the upstream accepted: checking them again costs no call.
  const validKeys = new Set<string>();
  const digest = (apiKey: string) => createHash('sha256').update(apiKey).digest('base64url');
  return createAuthenticator({
    mode: auth.mode === 'oidc' && verifier === undefined ? 'api-key-only' : auth.mode,
    verifier,
    allowCallerApiKey: auth.allowCallerApiKey,
    async checkApiKey(apiKey) {
      const probe = await keyEnvironments.probe(apiKey);
      if (probe.outcome === 'ready') validKeys.add(digest(apiKey));
      return probe.outcome === 'ready' ? 'valid' : probe.outcome === 'refused' ? 'invalid' : 'unavailable';
    },
    isKnownApiKey: (apiKey) => validKeys.has(digest(apiKey)),
  });
}
