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
