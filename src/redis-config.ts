/**
 * Where the facade's Redis is and what a write must reach before it counts (`REDIS_*`): one Redis
 * (`REDIS_URL`), or the Sentinels that name the primary of a replicated one (`REDIS_SENTINELS`,
 * `REDIS_SENTINEL_MASTER`); the passwords; and how many replicas must acknowledge an event before
 * its webhook is answered 2xx (`REDIS_MIN_REPLICAS_ACK`, `REDIS_REPLICA_ACK_TIMEOUT_MS`). Read by
 * `readEventsConfig`; no message ever quotes a password or a URL (it may hold one).
 */
import type { EnvReader } from './env-reader.ts';

/** A Sentinel's (or a node's) address. */
export interface RedisAddress {
  readonly host: string;
  readonly port: number;
}

/** How many replicas must hold a write before it counts, and how long one wait for them lasts. */
export interface ReplicaAckPolicy {
  /** `REDIS_MIN_REPLICAS_ACK`: 0 takes the primary's answer alone. */
  readonly replicas: number;
  /** `REDIS_REPLICA_ACK_TIMEOUT_MS`: the longest one `WAIT` blocks. */
  readonly timeoutMs: number;
}

/** The facade's Redis, as every connection to it is opened (`src/redis.ts`). */
export interface RedisConfig {
  /** One Redis by URL, or the primary the Sentinels name under `masterName`. */
  readonly target:
    { readonly url: string } | { readonly sentinels: readonly RedisAddress[]; readonly masterName: string };
  /** `REDIS_PASSWORD`: the data nodes' password (a password inside `REDIS_URL` works too). Never logged. */
  readonly password: string | undefined;
  /** `REDIS_SENTINEL_PASSWORD`: the Sentinels' own password. Never logged. */
  readonly sentinelPassword: string | undefined;
  readonly acks: ReplicaAckPolicy;
}

const REDIS_CONFIG_DEFAULTS = {
  /** With Sentinel there are replicas to wait for; one Redis alone has none unless told. */
  REDIS_MIN_REPLICAS_ACK_SENTINEL: 1,
  REDIS_MIN_REPLICAS_ACK_URL: 0,
  // Well inside the sender's 5 s per attempt: a webhook waits at most about two of these.
  REDIS_REPLICA_ACK_TIMEOUT_MS: 1_000,
} as const;

/**
 * Reads the `REDIS_*` variables; undefined without a Redis (the facade then keeps its log in
 * memory). Each problem goes to `reader.report`; a password is never quoted.
 */
export function readRedisConfig(reader: EnvReader, url: string | undefined): RedisConfig | undefined {
  const sentinels = reader.trimmed('REDIS_SENTINELS');
  const masterName = reader.trimmed('REDIS_SENTINEL_MASTER');
  const password = secret(reader, 'REDIS_PASSWORD');
  const sentinelPassword = secret(reader, 'REDIS_SENTINEL_PASSWORD');
  if ((sentinels === undefined) !== (masterName === undefined)) {
    const missing = sentinels === undefined ? 'REDIS_SENTINELS' : 'REDIS_SENTINEL_MASTER';
    reader.report(missing, 'must be set with REDIS_SENTINELS and REDIS_SENTINEL_MASTER both, or neither');
  }
  const sentinel = sentinels !== undefined && masterName !== undefined;
  if (sentinel && url !== undefined) {
    // Two answers to "where is Redis" would leave one of them silently unused.
    reader.report('REDIS_URL', 'must not be set with REDIS_SENTINELS: give the password as REDIS_PASSWORD');
  }
  if (url !== undefined && password !== undefined && new URL(url).password !== '') {
    reader.report('REDIS_PASSWORD', 'REDIS_URL holds a password already: set one of them');
  }
  if (sentinelPassword !== undefined && !sentinel) {
    reader.report('REDIS_SENTINEL_PASSWORD', 'is only used with REDIS_SENTINELS');
  }
  const acks: ReplicaAckPolicy = {
    replicas: reader.integer(
      'REDIS_MIN_REPLICAS_ACK',
      sentinel
        ? REDIS_CONFIG_DEFAULTS.REDIS_MIN_REPLICAS_ACK_SENTINEL
        : REDIS_CONFIG_DEFAULTS.REDIS_MIN_REPLICAS_ACK_URL,
      0,
      16,
    ),
    timeoutMs: reader.integer(
      'REDIS_REPLICA_ACK_TIMEOUT_MS',
      REDIS_CONFIG_DEFAULTS.REDIS_REPLICA_ACK_TIMEOUT_MS,
      10,
      10_000,
    ),
  };
  if (!sentinel && url === undefined) {
    for (const name of ['REDIS_PASSWORD', 'REDIS_MIN_REPLICAS_ACK'] as const) {
      if (reader.trimmed(name) !== undefined) reader.report(name, 'needs REDIS_URL or REDIS_SENTINELS');
    }
    return undefined;
  }
  const target = sentinel ? { sentinels: readSentinels(reader, sentinels), masterName } : { url: url! };
  return { target, password, sentinelPassword, acks };
}

/** A password: taken as it is (never trimmed or quoted); blank is unset. */
function secret(reader: EnvReader, name: string): string | undefined {
  const value = reader.verbatim(name);
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** `host:port,host:port,...` (`[v6]:port` for IPv6 literals); each bad entry reported. */
function readSentinels(reader: EnvReader, value: string): RedisAddress[] {
  const addresses: RedisAddress[] = [];
  for (const entry of value.split(',').map((part) => part.trim())) {
    const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
    const port = Number(match?.[2]);
    if (match === null || port < 1 || port > 65_535) {
      reader.report(
        'REDIS_SENTINELS',
        `must be host:port entries separated by commas, got ${JSON.stringify(entry)}`,
      );
      continue;
    }
    addresses.push({ host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port });
  }
  return addresses;
}
