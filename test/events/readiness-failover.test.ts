/**
 * `/readyz` through a Sentinel failover (real `redis-server --sentinel`: a primary, a replica and
 * three Sentinels, with passwords): the replica's Redis calls fail while the Sentinels promote the
 * replica, and every replica meets that at the same moment. `/readyz`, asked every 100 ms as a prober
 * would, stays 200 throughout (`degraded`, with Redis out of reach, within
 * `READINESS_REDIS_GRACE_SECONDS` at its default), so the Service keeps its endpoints; webhooks are
 * refused meanwhile and taken on the platform's retry, and a subscriber receives every event once.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { DeliveryAttempt } from '../../emulator/webhooks/types.ts';
import { sampleReadiness } from '../support/harness/readiness-sampler.ts';
import { uniqueRedisPrefix } from '../support/harness/redis.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useRedisSentinel } from '../support/redis-sentinel.ts';

const redis = useRedisSentinel({
  password: `data-${generateWebhookSecret().slice(-12)}`,
  sentinelPassword: `sentinel-${generateWebhookSecret().slice(-12)}`,
});

let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    // Retries spread over about 25 s, so a delivery refused through the failover is retried after it.
    emulator: { webhookRetryBaseMs: 200 },
    env: {
      ...redis.env(),
      REDIS_KEY_PREFIX: uniqueRedisPrefix(),
      WEBHOOK_SECRETS: generateWebhookSecret(),
      WEBHOOK_REGISTER: 'true',
      // Every sample is a check of its own: none is an answer reused from before the kill.
      READINESS_CACHE_MS: '0',
    },
  });
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

const ACCOUNT_CHANGED = `subscription {
  accountChanged(customerId: "cus_ada", accountId: "acc_ada_polygon") { eventId }
}`;

/** Tops the account up at the emulator: one `account.updated` webhook each. */
async function topUps(count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) {
    const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
      body: { amount: '1.00', currency: 'USDC' },
    });
    expect(response.status).toBe(200);
  }
}

/** Every attempt the emulator made to deliver an `account.updated` webhook. */
async function accountDeliveries(): Promise<DeliveryAttempt[]> {
  const response = await fetch(`${stack.emulatorUrl}/_emulator/webhook-deliveries`);
  const { data } = (await response.json()) as { data: DeliveryAttempt[] };
  return data.filter((attempt) => attempt.eventType === 'account.updated');
}

test('/readyz stays 200 through a Sentinel failover; webhooks and subscriptions behave as before', async () => {
  const received = stack.connect().subscribe(ACCOUNT_CHANGED);
  await stack.subscriptionsStarted(1);
  const eventIds = (): string[] =>
    (received.data as { accountChanged: { eventId: string } }[]).map((data) => data.accountChanged.eventId);
  await topUps(2);
  await waitFor(() => eventIds().length === 2, 'the events before the failover');
  // Redis has answered this replica: a failover now is an outage within the grace.
  const before = await fetch(`${stack.facadeUrl}/readyz`);
  expect(before.status).toBe(200);
  expect(await before.json()).toMatchObject({ status: 'ready', redis: { reachable: true } });

  const sampler = sampleReadiness(stack.facadeUrl);
  const killed = await redis.killPrimary();
  const killedAt = performance.now();
  await topUps(2);
  const promoted = await redis.waitForPromotion(killed);
  // The old primary back as a replica, so the promoted one has a replica to acknowledge events.
  await redis.restartNode(killed.port);
  await topUps(2);

  const sent = async (): Promise<string[]> => [
    ...new Set((await accountDeliveries()).map((attempt) => attempt.eventId)),
  ];
  let sentIds: string[] = [];
  await waitFor(
    () => sentIds.length === 6 && eventIds().length >= 6,
    'all six events at the subscriber',
    40_000,
    async () => {
      sentIds = await sent();
    },
  );
  // Redis seen answering again after it was seen out of reach: the whole outage was sampled.
  await waitFor(() => {
    const outAt = sampler.samples.findIndex((sample) => sample.body.redis?.reachable === false);
    return outAt >= 0 && sampler.samples.slice(outAt).some((sample) => sample.body.redis?.reachable === true);
  }, 'Redis out of reach, then back, at /readyz');
  const samples = await sampler.stop();

  // Every sample ready: the replica never left the Service.
  expect(samples.filter((sample) => sample.status !== 200)).toEqual([]);
  // The replica's Redis calls did fail: /readyz saw Redis out of reach, and said so.
  const seenOut = samples.filter((sample) => sample.body.redis?.reachable === false);
  expect(seenOut.length).toBeGreaterThan(0);
  for (const sample of seenOut) {
    expect(sample.body).toMatchObject({ status: 'degraded', redis: { graceSeconds: 15 } });
  }
  // Asked on the beat throughout: no gap a spell of 503 could have hidden in.
  const askedAt = samples.map((sample) => sample.askedAt).sort((a, b) => a - b);
  const gaps = askedAt.slice(1).map((at, index) => at - askedAt[index]!);
  expect(Math.max(...gaps)).toBeLessThan(1_000);
  expect(askedAt[0]!).toBeLessThan(killedAt);
  expect(askedAt.at(-1)! - killedAt).toBeGreaterThan(promoted.elapsedMs);

  // Webhooks as before: refused while Redis could not take them, taken on a retry, each event once.
  const attempts = await accountDeliveries();
  expect(attempts.some((attempt) => attempt.outcome === 'failed')).toBe(true);
  for (const eventId of sentIds) {
    const delivered = attempts.filter(
      (attempt) => attempt.eventId === eventId && attempt.outcome === 'delivered',
    );
    expect(delivered).toHaveLength(1);
  }
  expect([...eventIds()].sort()).toEqual([...sentIds].sort());
  received.stop();
}, 120_000);
