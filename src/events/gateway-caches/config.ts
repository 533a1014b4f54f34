/**
 * Which gateways' response caches the facade invalidates, and how (`GATEWAY_CACHE_*`,
 * `ROUTER_INVALIDATION_*`, `GATEWAY_INVALIDATION_*`). Read by `loadConfig` in `src/config.ts`; no
 * message ever quotes the Redis URL (it may hold a password) or the Router's shared key.
 */
import { EnvReader, type Env, type ReportProblem } from '../../env-reader.ts';

/** The Hive Gateways' shared response cache (deploy/gateway.config.ts), in Redis. */
export interface HiveGatewayCacheConfig {
  /** `GATEWAY_CACHE_REDIS_URL`: the Redis the gateways keep their answers in. Never logged. */
  readonly redisUrl: string;
  /** `GATEWAY_CACHE_KEY_PREFIX`: the gateways' own (`GATEWAY_CACHE_KEY_PREFIX` of their config). */
  readonly keyPrefix: string;
}

/** Apollo Router's invalidation endpoint (`response_cache.invalidation` of router.yaml). */
export interface RouterInvalidationConfig {
  /** `ROUTER_INVALIDATION_URL`: its listen address and path, e.g. `http://router:4090/invalidation`. */
  readonly url: string;
  /** `ROUTER_INVALIDATION_SHARED_KEY`: the `shared_key` router.yaml names. Never logged. */
  readonly sharedKey: string;
  /** `ROUTER_INVALIDATION_SUBGRAPH`: the facade's subgraph name in the supergraph. */
  readonly subgraph: string;
}

export interface GatewayCachesConfig {
  readonly hive: HiveGatewayCacheConfig | undefined;
  readonly router: RouterInvalidationConfig | undefined;
  /**
   * `GATEWAY_INVALIDATION_WAIT_MS`: how long a webhook's acknowledgement, and a write's answer, wait
   * for the gateways' invalidation (it goes on, retried, after that).
   */
  readonly waitMs: number;
  /** `GATEWAY_INVALIDATION_ATTEMPTS`: tries per gateway and invalidation, the first included. */
  readonly attempts: number;
}

export const GATEWAY_CACHES_CONFIG_DEFAULTS = {
  GATEWAY_CACHE_KEY_PREFIX: 'gateway-cache:',
  ROUTER_INVALIDATION_SUBGRAPH: 'platform',
  GATEWAY_INVALIDATION_WAIT_MS: 1_000,
  GATEWAY_INVALIDATION_ATTEMPTS: 5,
} as const;

/** Reads the variables; every problem goes to `report`, never with a URL or a key in it. */
export function readGatewayCachesConfig(env: Env, report: ReportProblem): GatewayCachesConfig {
  const reader = new EnvReader(env, report);
  const redisUrl = readRedisUrl(reader);
  const routerUrl = reader.httpUrl('ROUTER_INVALIDATION_URL', { refuseQueryAndFragment: true });
  const sharedKey = reader.verbatim('ROUTER_INVALIDATION_SHARED_KEY');
  if (routerUrl !== undefined && (sharedKey === undefined || sharedKey.trim() === '')) {
    report('ROUTER_INVALIDATION_SHARED_KEY', 'must be set with ROUTER_INVALIDATION_URL');
  }
  if (
    routerUrl === undefined &&
    sharedKey !== undefined &&
    reader.trimmed('ROUTER_INVALIDATION_URL') === undefined
  ) {
    report('ROUTER_INVALIDATION_URL', 'must be set with ROUTER_INVALIDATION_SHARED_KEY');
  }
  return {
    hive:
      redisUrl === undefined
        ? undefined
        : {
            redisUrl,
            keyPrefix: reader.string(
              'GATEWAY_CACHE_KEY_PREFIX',
              GATEWAY_CACHES_CONFIG_DEFAULTS.GATEWAY_CACHE_KEY_PREFIX,
            ),
          },
    router:
      routerUrl === undefined || sharedKey === undefined || sharedKey.trim() === ''
        ? undefined
        : {
            url: routerUrl.href,
            sharedKey,
            subgraph: reader.string(
              'ROUTER_INVALIDATION_SUBGRAPH',
              GATEWAY_CACHES_CONFIG_DEFAULTS.ROUTER_INVALIDATION_SUBGRAPH,
            ),
          },
    waitMs: reader.integer(
      'GATEWAY_INVALIDATION_WAIT_MS',
      GATEWAY_CACHES_CONFIG_DEFAULTS.GATEWAY_INVALIDATION_WAIT_MS,
      0,
      10_000,
    ),
    attempts: reader.integer(
      'GATEWAY_INVALIDATION_ATTEMPTS',
      GATEWAY_CACHES_CONFIG_DEFAULTS.GATEWAY_INVALIDATION_ATTEMPTS,
      1,
      20,
    ),
  };
}

function readRedisUrl(reader: EnvReader): string | undefined {
  const value = reader.trimmed('GATEWAY_CACHE_REDIS_URL');
  if (value === undefined) return undefined;
  const protocol = URL.canParse(value) ? new URL(value).protocol : undefined;
  if (protocol !== 'redis:' && protocol !== 'rediss:') {
    reader.report(
      'GATEWAY_CACHE_REDIS_URL',
      'must be a redis:// or rediss:// URL (the value is not shown: it may hold a password)',
    );
    return undefined;
  }
  return value;
}
