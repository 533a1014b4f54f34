import { describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { EVENTS_CONFIG_DEFAULTS, readEventsConfig } from '../../src/events/config.ts';

function read(env: Record<string, string>) {
  const problems: string[] = [];
  const config = readEventsConfig(env, (name, problem) => problems.push(`${name}: ${problem}`));
  return { config, problems };
}

describe('readEventsConfig', () => {
  test('defaults: in-memory fan-out, no registration, no secrets', () => {
    expect(read({})).toEqual({
      problems: [],
      config: {
        webhooks: {
          publicUrl: undefined,
          register: false,
          secrets: [],
          toleranceSeconds: 300,
          maxBodyBytes: 64 * 1024,
          bodyTimeoutMs: 10_000,
          maxConcurrentBodies: 16,
          maxRefusalsPerMinute: 30,
          dedupRetentionSeconds: 86_400,
          deadLettersMax: 1_000,
        },
        redisUrl: undefined,
        redisKeyPrefix: EVENTS_CONFIG_DEFAULTS.REDIS_KEY_PREFIX,
        subscriberQueueLimit: EVENTS_CONFIG_DEFAULTS.SUBSCRIPTION_QUEUE_LIMIT,
        stalledWriteTimeoutMs: EVENTS_CONFIG_DEFAULTS.LIVE_STALLED_WRITE_TIMEOUT_MS,
        logRetention: { events: 10_000 },
        reconcile: { intervalSeconds: 60, graceSeconds: 150 },
        webSocket: {
          maxPayloadBytes: 64 * 1024,
          maxSubscriptionsPerConnection: 50,
          connectionInitTimeoutMs: 3_000,
          keepAliveMs: 12_000,
        },
      },
    });
  });

  test('reads every variable', () => {
    const [first, second] = [generateWebhookSecret(), generateWebhookSecret()];
    const { config, problems } = read({
      WEBHOOK_PUBLIC_URL: 'https://facade.example.test/webhooks/platform',
      WEBHOOK_REGISTER: 'false',
      WEBHOOK_SECRETS: ` ${first} ,${second}`,
      WEBHOOK_TOLERANCE_SECONDS: '60',
      WEBHOOK_DEAD_LETTERS_MAX: '50',
      REDIS_URL: 'redis://127.0.0.1:6390',
      SUBSCRIPTION_QUEUE_LIMIT: '5',
      EVENT_LOG_RETENTION: '24h',
      RECONCILE_INTERVAL_SECONDS: '5',
      RECONCILE_GRACE_SECONDS: '0',
    });
    expect(problems).toEqual([]);
    expect(config.webhooks).toMatchObject({
      publicUrl: 'https://facade.example.test/webhooks/platform',
      register: false,
      secrets: [first, second],
      toleranceSeconds: 60,
      deadLettersMax: 50,
    });
    expect(config.redisUrl).toBe('redis://127.0.0.1:6390');
    expect(config.subscriberQueueLimit).toBe(5);
    expect(config.logRetention).toEqual({ seconds: 86_400 });
    expect(config.reconcile).toEqual({ intervalSeconds: 5, graceSeconds: 0 });
    expect(read({ EVENT_LOG_RETENTION: '500' }).config.logRetention).toEqual({ events: 500 });
  });

  test('reports every bad variable once, without echoing a secret or a Redis URL', () => {
    const goodSecret = generateWebhookSecret();
    const { problems } = read({
      WEBHOOK_PUBLIC_URL: 'ftp://x',
      WEBHOOK_REGISTER: 'maybe',
      WEBHOOK_SECRETS: `${goodSecret},sk_not_a_webhook_secret`,
      WEBHOOK_DEDUP_RETENTION_SECONDS: '10',
      WEBHOOK_DEAD_LETTERS_MAX: '0',
      REDIS_URL: 'not a url with password hunter2',
      EVENT_LOG_RETENTION: '10 parsecs',
      SUBSCRIPTION_QUEUE_LIMIT: '0',
    });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual([
      'WEBHOOK_PUBLIC_URL',
      'WEBHOOK_REGISTER',
      'WEBHOOK_SECRETS',
      'WEBHOOK_DEDUP_RETENTION_SECONDS',
      'WEBHOOK_DEAD_LETTERS_MAX',
      'REDIS_URL',
      'EVENT_LOG_RETENTION',
      'SUBSCRIPTION_QUEUE_LIMIT',
    ]);
    const text = problems.join('\n');
    expect(text).not.toContain('sk_not_a_webhook_secret');
    expect(text).not.toContain(goodSecret.slice(6));
    expect(text).not.toContain('hunter2');
  });
});

describe('the Redis settings', () => {
  const SENTINELS = { REDIS_SENTINELS: '10.0.0.1:26379, sentinel-b.redis:26380,[fd00::3]:26381' };

  test('one Redis by URL waits for no replica unless told; the Sentinels for one by default', () => {
    expect(read({ REDIS_URL: 'redis://:pw@127.0.0.1:6390/2' }).config.redis).toEqual({
      target: { url: 'redis://:pw@127.0.0.1:6390/2' },
      password: undefined,
      sentinelPassword: undefined,
      acks: { replicas: 0, timeoutMs: 1_000 },
    });
    const { config, problems } = read({
      ...SENTINELS,
      REDIS_SENTINEL_MASTER: 'facade',
      REDIS_PASSWORD: ' data pass ',
      REDIS_SENTINEL_PASSWORD: 'sentinel-pass',
    });
    expect(problems).toEqual([]);
    expect(config.redisUrl).toBeUndefined();
    expect(config.redis).toEqual({
      target: {
        sentinels: [
          { host: '10.0.0.1', port: 26379 },
          { host: 'sentinel-b.redis', port: 26380 },
          { host: 'fd00::3', port: 26381 },
        ],
        masterName: 'facade',
      },
      // A password is taken as it is, spaces included.
      password: ' data pass ',
      sentinelPassword: 'sentinel-pass',
      acks: { replicas: 1, timeoutMs: 1_000 },
    });
    expect(
      read({
        ...SENTINELS,
        REDIS_SENTINEL_MASTER: 'facade',
        REDIS_MIN_REPLICAS_ACK: '0',
        REDIS_REPLICA_ACK_TIMEOUT_MS: '250',
      }).config.redis?.acks,
    ).toEqual({ replicas: 0, timeoutMs: 250 });
    expect(
      read({ REDIS_URL: 'redis://127.0.0.1:6390', REDIS_MIN_REPLICAS_ACK: '2' }).config.redis?.acks,
    ).toEqual({
      replicas: 2,
      timeoutMs: 1_000,
    });
    expect(read({}).config.redis).toBeUndefined();
  });

  test('refuses what cannot be meant, naming the variable and never a password', () => {
    const cases: [Record<string, string>, string][] = [
      [SENTINELS, 'REDIS_SENTINEL_MASTER: must be set with REDIS_SENTINELS and REDIS_SENTINEL_MASTER both'],
      [{ REDIS_SENTINEL_MASTER: 'facade' }, 'REDIS_SENTINELS: must be set with REDIS_SENTINELS'],
      [
        { ...SENTINELS, REDIS_SENTINEL_MASTER: 'facade', REDIS_URL: 'redis://:secret-in-url@h:6379' },
        'REDIS_URL: must not be set with REDIS_SENTINELS',
      ],
      [
        { REDIS_URL: 'redis://:secret-in-url@h:6379', REDIS_PASSWORD: 'secret-pass' },
        'REDIS_PASSWORD: REDIS_URL holds a password already',
      ],
      [
        { REDIS_URL: 'redis://h:6379', REDIS_SENTINEL_PASSWORD: 'secret-pass' },
        'REDIS_SENTINEL_PASSWORD: is only used',
      ],
      [{ REDIS_PASSWORD: 'secret-pass' }, 'REDIS_PASSWORD: needs REDIS_URL or REDIS_SENTINELS'],
      [{ REDIS_MIN_REPLICAS_ACK: '1' }, 'REDIS_MIN_REPLICAS_ACK: needs REDIS_URL or REDIS_SENTINELS'],
      [{ REDIS_SENTINELS: 'h:0', REDIS_SENTINEL_MASTER: 'm' }, 'REDIS_SENTINELS: must be host:port entries'],
      [
        { REDIS_SENTINELS: 'h:1,:2', REDIS_SENTINEL_MASTER: 'm' },
        'REDIS_SENTINELS: must be host:port entries',
      ],
      [
        { REDIS_URL: 'redis://h', REDIS_MIN_REPLICAS_ACK: '-1' },
        'REDIS_MIN_REPLICAS_ACK: must be an integer',
      ],
      [
        { REDIS_URL: 'redis://h', REDIS_REPLICA_ACK_TIMEOUT_MS: '60000' },
        'REDIS_REPLICA_ACK_TIMEOUT_MS: must be an integer',
      ],
    ];
    for (const [env, problem] of cases) {
      const { problems } = read(env);
      expect(problems, JSON.stringify(env)).toHaveLength(1);
      expect(problems[0], JSON.stringify(env)).toContain(problem);
      expect(problems[0]).not.toMatch(/secret-(pass|in-url)/);
    }
  });
});
