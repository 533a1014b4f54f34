/**
 * The event pipeline's part of the configuration: webhook reception and registration, Redis, and
 * subscriber queues. Read by `loadConfig` in `src/config.ts`, which reports every problem at once;
 * no message ever contains a secret or a Redis URL (it may hold a password).
 */
import { EnvReader, type Env, type ReportProblem } from '../env-reader.ts';
import { readRedisConfig, type RedisConfig } from '../redis-config.ts';
import { DEFAULT_SUBSCRIBER_QUEUE_LIMIT } from './delivery/subscriber-queue.ts';
import { DEFAULT_LOG_RETENTION, parseLogRetention, type LogRetention } from './log/event-log.ts';
import { DEFAULT_DEAD_LETTERS_MAX } from './receiving/dead-letters.ts';
import { isWebhookSecret, DEFAULT_WEBHOOK_TOLERANCE_SECONDS } from './receiving/verify-webhook.ts';
import type { WebhookBodyLimits } from './receiving/webhook-body.ts';
import {
  DEFAULT_WEBHOOK_BODY_LIMITS,
  DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  DEFAULT_WEBHOOK_REFUSALS,
} from './receiving/webhook-route.ts';

/** Where the facade's webhook route is mounted on its own HTTP server. */
export const WEBHOOK_PATH = '/webhooks/platform';

export interface WebhooksConfig {
  /**
   * The URL the upstream posts webhooks to (`WEBHOOK_PUBLIC_URL`). Unset: the facade's own loopback
   * address and {@link WEBHOOK_PATH}, right only when the upstream runs on the same machine (the
   * embedded emulator).
   */
  publicUrl: string | undefined;
  /**
   * Register (or reuse) the facade's endpoint with the upstream at start (`WEBHOOK_REGISTER`).
   * Off by default; `npm start` turns it on when it embeds the emulator.
   */
  register: boolean;
  /** Signing secrets accepted (`WEBHOOK_SECRETS`, comma separated, several during a rotation). Never logged. */
  secrets: readonly string[];
  /**
   * With a key per environment, each one's own secrets (`WEBHOOK_SECRETS_SANDBOX`,
   * `WEBHOOK_SECRETS_LIVE`), checked on that environment's route only; undefined when neither is
   * set. Never logged.
   */
  secretsByEnvironment?:
    { readonly sandbox: readonly string[]; readonly live: readonly string[] } | undefined;
  /** Accepted distance between a delivery's timestamp and the clock (`WEBHOOK_TOLERANCE_SECONDS`). */
  toleranceSeconds: number;
  /** Largest accepted webhook body (`WEBHOOK_MAX_BODY_BYTES`); larger ones are answered 413. */
  maxBodyBytes: number;
  /** Time a webhook's body has to arrive once read, and to wait for a slot (`WEBHOOK_BODY_TIMEOUT_MS`). */
  bodyTimeoutMs: number;
  /** Webhook bodies read at once (`WEBHOOK_MAX_CONCURRENT_BODIES`); a quarter of them per address. */
  maxConcurrentBodies: number;
  /** Refused deliveries one address may have per minute before 429 (`WEBHOOK_MAX_REFUSALS_PER_MINUTE`). */
  maxRefusalsPerMinute: number;
  /** How long a received event id is remembered to drop redeliveries (`WEBHOOK_DEDUP_RETENTION_SECONDS`). */
  dedupRetentionSeconds: number;
  /** Parked events kept per environment (`WEBHOOK_DEAD_LETTERS_MAX`); the oldest go first. */
  deadLettersMax: number;
}

/** Transport limits of graphql-ws connections (see docs/security.md, "Abuse limits"). */
export interface WebSocketLimits {
  /** Largest message a client may send (`GRAPHQL_WS_MAX_PAYLOAD_BYTES`); larger closes with 1009. */
  maxPayloadBytes: number;
  /** Subscriptions one connection may run at once (`GRAPHQL_WS_MAX_SUBSCRIPTIONS`). */
  maxSubscriptionsPerConnection: number;
  /** Time a connection has to send `connection_init` (`GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS`); then 4408. */
  connectionInitTimeoutMs: number;
  /** Interval of the server's keep-alive pings (`GRAPHQL_WS_KEEP_ALIVE_MS`). */
  keepAliveMs: number;
}

export interface ReconcileConfig {
  /** Seconds between two reconciliations (`RECONCILE_INTERVAL_SECONDS`); 0 turns it off. */
  intervalSeconds: number;
  /**
   * How old a change must be before a missing webhook is called missed (`RECONCILE_GRACE_SECONDS`):
   * the upstream retries a delivery for about two minutes, and a change recovered before its own
   * webhook arrives would reach subscribers twice.
   */
  graceSeconds: number;
}

export interface EventsConfig {
  webhooks: WebhooksConfig;
  /** `REDIS_URL` as given: one Redis (undefined with Sentinel; {@link redis} says where Redis is). */
  redisUrl: string | undefined;
  /**
   * The facade's Redis (`REDIS_URL`, or `REDIS_SENTINELS` and `REDIS_SENTINEL_MASTER`, with
   * `REDIS_PASSWORD`, `REDIS_SENTINEL_PASSWORD`, `REDIS_MIN_REPLICAS_ACK`,
   * `REDIS_REPLICA_ACK_TIMEOUT_MS`): when set, the event log, de-duplication, reconciliation, rate
   * limits and invalidations go through it, shared by every replica. Undefined: all in memory.
   */
  redis: RedisConfig | undefined;
  /** Prefix of every Redis key and channel (`REDIS_KEY_PREFIX`), so deployments can share a Redis. */
  redisKeyPrefix: string;
  /** Events one subscriber may let wait before it is ended (`SUBSCRIPTION_QUEUE_LIMIT`); see docs/events.md. */
  subscriberQueueLimit: number;
  /**
   * Longest a live stream or socket (SSE, graphql-ws) may wait for its reader to take one write
   * (`LIVE_STALLED_WRITE_TIMEOUT_MS`); then it is cut. A reader that stopped reading holds its socket, its subscription slot
   * and its queue's notice otherwise, for as long as its token lasts.
   */
  stalledWriteTimeoutMs: number;
  /** How much of the event log is kept (`EVENT_LOG_RETENTION`): a count of events or an age. */
  logRetention: LogRetention;
  /** The reconciliation of missed webhooks (docs/events.md, "Missed webhooks"). */
  reconcile: ReconcileConfig;
  webSocket: WebSocketLimits;
}

export const EVENTS_CONFIG_DEFAULTS = {
  WEBHOOK_TOLERANCE_SECONDS: DEFAULT_WEBHOOK_TOLERANCE_SECONDS,
  WEBHOOK_MAX_BODY_BYTES: DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  WEBHOOK_BODY_TIMEOUT_MS: DEFAULT_WEBHOOK_BODY_LIMITS.receiveTimeoutMs,
  WEBHOOK_MAX_CONCURRENT_BODIES: DEFAULT_WEBHOOK_BODY_LIMITS.maxConcurrentReads,
  WEBHOOK_MAX_REFUSALS_PER_MINUTE: DEFAULT_WEBHOOK_REFUSALS.limit,
  // The upstream retries for about two minutes; a day also covers manual resends.
  WEBHOOK_DEDUP_RETENTION_SECONDS: 24 * 60 * 60,
  WEBHOOK_DEAD_LETTERS_MAX: DEFAULT_DEAD_LETTERS_MAX,
  REDIS_KEY_PREFIX: 'facade:',
  SUBSCRIPTION_QUEUE_LIMIT: DEFAULT_SUBSCRIBER_QUEUE_LIMIT,
  // A reader on a slow network takes a write in seconds; one that stopped reading never does.
  LIVE_STALLED_WRITE_TIMEOUT_MS: 30_000,
  RECONCILE_INTERVAL_SECONDS: 60,
  // Beyond the upstream's retries (about 127 s), so a webhook that is only late arrives first.
  RECONCILE_GRACE_SECONDS: 150,
  // A subscribe message is one document of at most QUERY_MAX_TOKENS tokens and its variables.
  GRAPHQL_WS_MAX_PAYLOAD_BYTES: 64 * 1024,
  GRAPHQL_WS_MAX_SUBSCRIPTIONS: 50,
  GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS: 3_000,
  GRAPHQL_WS_KEEP_ALIVE_MS: 12_000,
} as const;

/**
 * Reads the event pipeline's variables from `env`, calling `report(name, problem)` once per bad
 * variable and using the default for it, so the caller can list every problem together.
 */
export function readEventsConfig(env: Env, report: ReportProblem): EventsConfig {
  const reader = new EnvReader(env, report);

  return {
    webhooks: {
      publicUrl: reader.httpUrl('WEBHOOK_PUBLIC_URL')?.href,
      register: reader.optionalBoolean('WEBHOOK_REGISTER') ?? false,
      secrets: readSecrets('WEBHOOK_SECRETS', env, report),
      secretsByEnvironment: readSecretsByEnvironment(env, report),
      toleranceSeconds: reader.integer(
        'WEBHOOK_TOLERANCE_SECONDS',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_TOLERANCE_SECONDS,
        1,
        3600,
      ),
      maxBodyBytes: reader.integer(
        'WEBHOOK_MAX_BODY_BYTES',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_MAX_BODY_BYTES,
        1024,
        16 * 1024 * 1024,
      ),
      bodyTimeoutMs: reader.integer(
        'WEBHOOK_BODY_TIMEOUT_MS',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_BODY_TIMEOUT_MS,
        100,
        120_000,
      ),
      maxConcurrentBodies: reader.integer(
        'WEBHOOK_MAX_CONCURRENT_BODIES',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_MAX_CONCURRENT_BODIES,
        1,
        1_024,
      ),
      maxRefusalsPerMinute: reader.integer(
        'WEBHOOK_MAX_REFUSALS_PER_MINUTE',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_MAX_REFUSALS_PER_MINUTE,
        1,
        1_000_000,
      ),
      dedupRetentionSeconds: reader.integer(
        'WEBHOOK_DEDUP_RETENTION_SECONDS',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_DEDUP_RETENTION_SECONDS,
        // Shorter than the upstream's retry window would let a retry through as a new event.
        300,
        30 * 24 * 60 * 60,
      ),
      deadLettersMax: reader.integer(
        'WEBHOOK_DEAD_LETTERS_MAX',
        EVENTS_CONFIG_DEFAULTS.WEBHOOK_DEAD_LETTERS_MAX,
        1,
        100_000,
      ),
    },
    ...readRedis(reader, report),
    redisKeyPrefix: reader.trimmed('REDIS_KEY_PREFIX') ?? EVENTS_CONFIG_DEFAULTS.REDIS_KEY_PREFIX,
    logRetention: readLogRetention(reader.trimmed('EVENT_LOG_RETENTION'), report),
    reconcile: {
      intervalSeconds: reader.integer(
        'RECONCILE_INTERVAL_SECONDS',
        EVENTS_CONFIG_DEFAULTS.RECONCILE_INTERVAL_SECONDS,
        0,
        86_400,
      ),
      graceSeconds: reader.integer(
        'RECONCILE_GRACE_SECONDS',
        EVENTS_CONFIG_DEFAULTS.RECONCILE_GRACE_SECONDS,
        0,
        86_400,
      ),
    },
    subscriberQueueLimit: reader.integer(
      'SUBSCRIPTION_QUEUE_LIMIT',
      EVENTS_CONFIG_DEFAULTS.SUBSCRIPTION_QUEUE_LIMIT,
      1,
      1_000_000,
    ),
    stalledWriteTimeoutMs: reader.integer(
      'LIVE_STALLED_WRITE_TIMEOUT_MS',
      EVENTS_CONFIG_DEFAULTS.LIVE_STALLED_WRITE_TIMEOUT_MS,
      1_000,
      600_000,
    ),
    webSocket: {
      maxPayloadBytes: reader.integer(
        'GRAPHQL_WS_MAX_PAYLOAD_BYTES',
        EVENTS_CONFIG_DEFAULTS.GRAPHQL_WS_MAX_PAYLOAD_BYTES,
        1024,
        16 * 1024 * 1024,
      ),
      maxSubscriptionsPerConnection: reader.integer(
        'GRAPHQL_WS_MAX_SUBSCRIPTIONS',
        EVENTS_CONFIG_DEFAULTS.GRAPHQL_WS_MAX_SUBSCRIPTIONS,
        1,
        10_000,
      ),
      connectionInitTimeoutMs: reader.integer(
        'GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS',
        EVENTS_CONFIG_DEFAULTS.GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS,
        100,
        60_000,
      ),
      keepAliveMs: reader.integer(
        'GRAPHQL_WS_KEEP_ALIVE_MS',
        EVENTS_CONFIG_DEFAULTS.GRAPHQL_WS_KEEP_ALIVE_MS,
        1_000,
        300_000,
      ),
    },
  };
}

function readLogRetention(value: string | undefined, report: ReportProblem): LogRetention {
  if (value === undefined) return DEFAULT_LOG_RETENTION;
  const retention = parseLogRetention(value);
  if (retention === undefined) {
    report(
      'EVENT_LOG_RETENTION',
      `must be a count of events (e.g. 10000) or an age (e.g. 90s, 30m, 24h, 7d), got ${JSON.stringify(value)}`,
    );
    return DEFAULT_LOG_RETENTION;
  }
  return retention;
}

function readSecretsByEnvironment(
  env: Env,
  report: (name: string, problem: string) => void,
): EventsConfig['webhooks']['secretsByEnvironment'] {
  if (env['WEBHOOK_SECRETS_SANDBOX'] === undefined && env['WEBHOOK_SECRETS_LIVE'] === undefined)
    return undefined;
  return {
    sandbox: readSecrets('WEBHOOK_SECRETS_SANDBOX', env, report),
    live: readSecrets('WEBHOOK_SECRETS_LIVE', env, report),
  };
}

function readSecrets(name: string, env: Env, report: (name: string, problem: string) => void): string[] {
  const value = env[name];
  if (value === undefined || value.trim() === '') return [];
  const secrets = value.split(',').map((secret) => secret.trim());
  const bad = secrets.filter((secret) => !isWebhookSecret(secret)).length;
  if (bad > 0) {
    // Only a count: the values are secrets even when malformed.
    report(name, `${bad} of ${secrets.length} entries are not "whsec_" followed by base64`);
    return [];
  }
  return secrets;
}

function readRedis(reader: EnvReader, report: ReportProblem): Pick<EventsConfig, 'redisUrl' | 'redis'> {
  const redisUrl = readRedisUrl(reader.trimmed('REDIS_URL'), report);
  return { redisUrl, redis: readRedisConfig(reader, redisUrl) };
}

function readRedisUrl(
  value: string | undefined,
  report: (name: string, problem: string) => void,
): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    report(
      'REDIS_URL',
      'must be a redis:// or rediss:// URL (the value is not shown: it may hold a password)',
    );
    return undefined;
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    report('REDIS_URL', `must use redis: or rediss:, got ${JSON.stringify(url.protocol)}`);
    return undefined;
  }
  return value;
}

/**
 * The body-reading limits of `webhooks`: its cap, time and concurrency, a quarter of the slots per
 * sender address (one address cannot hold them all) and four times as many waiting.
 */
export function webhookBodyLimits(webhooks: WebhooksConfig): WebhookBodyLimits {
  return {
    maxBodyBytes: webhooks.maxBodyBytes,
    receiveTimeoutMs: webhooks.bodyTimeoutMs,
    maxConcurrentReads: webhooks.maxConcurrentBodies,
    maxConcurrentReadsPerAddress: Math.max(1, Math.ceil(webhooks.maxConcurrentBodies / 4)),
    maxWaiting: webhooks.maxConcurrentBodies * 4,
  };
}
