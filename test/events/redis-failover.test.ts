/**
 * The event pipeline on a Redis that fails over: a primary, a replica and three Sentinels (real
 * `redis-server --sentinel`, with passwords), two facades finding the primary through the
 * Sentinels. A webhook is acknowledged only once the replica holds its event; subscribers keep
 * their streams through a failover; no password reaches a log line.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import {
  adaPolygonAccountUpdated,
  globexCapabilityChanged,
  postSignedEvent,
} from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import type { LiveClient } from '../support/harness/live-client.ts';
import { uniqueRedisPrefix } from '../support/harness/redis.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useRedisSentinel } from '../support/redis-sentinel.ts';

/** A test of a failover or a restart: processes die and start, and the platform's retries back off. */
const FAILOVER_TEST_TIMEOUT_MS = 120_000;

const PASSWORD = `data-${generateWebhookSecret().slice(-12)}`;
const SENTINEL_PASSWORD = `sentinel-${generateWebhookSecret().slice(-12)}`;
const redis = useRedisSentinel({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });
const secret = generateWebhookSecret();

let stack: Stack;
let first: RunningFacade;
let second: RunningFacade;

beforeAll(async () => {
  stack = await startStack({
    facades: 2,
    // Retries spread over about 25 s, so a delivery refused through a failover is retried after it.
    emulator: { webhookRetryBaseMs: 200 },
    env: { ...redis.env(), REDIS_KEY_PREFIX: uniqueRedisPrefix(), WEBHOOK_SECRETS: secret },
    // Only the first registers with the upstream: the second hears events through Redis alone.
    facadeEnv: (index): Record<string, string> => (index === 0 ? { WEBHOOK_REGISTER: 'true' } : {}),
  });
  [first, second] = stack.facades as [RunningFacade, RunningFacade];
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

// Each test starts from a primary with its replica, whatever the test before it left.
beforeEach(async () => {
  await redis.heal();
}, 30_000);

const GLOBEX_EVENTS = `subscription ($after: String) {
  events(customerId: "cus_globex", after: $after) { eventId cursor }
}`;

/** Posts `event` to the first facade until it is acknowledged, as the platform's retries would. */
async function deliverUntilAcknowledged(event: PlatformEvent, budgetMs = 20_000): Promise<number> {
  const statuses: number[] = [];
  await waitFor(
    () => statuses.at(-1) === 200,
    `an acknowledgement of ${event.id} (answers so far: ${statuses.join(', ')})`,
    budgetMs,
    async () => {
      statuses.push((await postSignedEvent(first.webhookUrl, secret, event)).status);
    },
  );
  return statuses.length;
}

let startedOnSecond = 0;

/** Subscribes on the second facade (which hears events through Redis only), once it listens. */
async function subscribeOnSecond(after?: string): Promise<ReturnType<LiveClient['subscribe']>> {
  const received = second.connect().subscribe(GLOBEX_EVENTS, after === undefined ? {} : { after });
  startedOnSecond += 1;
  await second.subscriptionsStarted(startedOnSecond);
  return received;
}

type Received = { data: { events: { eventId: string; cursor: string } }[] };
const eventIds = (received: Received): string[] => received.data.map((data) => data.events.eventId);

describe('webhooks on a Redis that fails over', () => {
  test(
    'a webhook answered 200 just before the primary is killed reaches subscribers after the promotion, once',
    async () => {
      const live = await subscribeOnSecond();
      const before = globexCapabilityChanged();
      expect((await postSignedEvent(first.webhookUrl, secret, before)).status).toBe(200);
      await waitFor(() => eventIds(live).length === 1, 'the event before');
      const cursorBefore = live.data[0]!.events.cursor;

      const event = globexCapabilityChanged();
      // The replica applies and acknowledges nothing for 400 ms, and what it received by then is
      // dropped if the primary dies first: an answer given before it acknowledges is a promise broken.
      await redis.holdReplicaAcks(400);
      const posted = Date.now();
      const answer = await postSignedEvent(first.webhookUrl, secret, event);
      const answeredAfterMs = Date.now() - posted;
      const killed = await redis.killPrimary();
      expect(answer).toMatchObject({ status: 200, body: { eventId: event.id, duplicate: false } });

      await redis.waitForPromotion(killed);
      await redis.restartNode(killed.port);
      // A marker after the failover: once it arrives, a second copy of the event would have too.
      const marker = globexCapabilityChanged();
      await deliverUntilAcknowledged(marker);
      // A subscriber resuming after the promotion reads the promoted primary's log.
      const resumed = await subscribeOnSecond(cursorBefore);
      await waitFor(
        () => eventIds(live).includes(marker.id) && eventIds(resumed).includes(marker.id),
        'the marker, live and resumed',
        20_000,
      );
      expect(eventIds(resumed)).toEqual([event.id, marker.id]);
      expect(eventIds(live)).toEqual([before.id, event.id, marker.id]);
      // Acknowledged only once the replica held it: after the pause.
      expect(answeredAfterMs).toBeGreaterThanOrEqual(350);
      live.stop();
      resumed.stop();
    },
    FAILOVER_TEST_TIMEOUT_MS,
  );

  test(
    'with the replica unable to acknowledge, 503; the retry once it recovers, 200 and one delivery',
    async () => {
      const received = await subscribeOnSecond();
      const event = globexCapabilityChanged();
      await redis.holdReplicaAcks(1_600);
      const refused = await postSignedEvent(first.webhookUrl, secret, event);
      expect(refused).toMatchObject({ status: 503, body: { title: 'Event not yet durable' } });
      // Held back from subscribers too while no replica holds it.
      expect(eventIds(received)).toEqual([]);

      await waitFor(() => eventIds(received).length === 1, 'the event once the replica holds it', 10_000);
      // The platform's retry finds it appended and held: acknowledged, not appended again.
      expect(await postSignedEvent(first.webhookUrl, secret, event)).toMatchObject({
        status: 200,
        body: { eventId: event.id, duplicate: true },
      });
      const marker = globexCapabilityChanged();
      expect((await postSignedEvent(first.webhookUrl, secret, marker)).status).toBe(200);
      await waitFor(() => eventIds(received).includes(marker.id), 'the marker');
      expect(eventIds(received)).toEqual([event.id, marker.id]);
      received.stop();
    },
    FAILOVER_TEST_TIMEOUT_MS,
  );

  test(
    'subscribers keep their streams through a failover: events before, during and after, each once',
    async () => {
      const subscription = `subscription {
      accountChanged(customerId: "cus_ada", accountId: "acc_ada_polygon") { eventId }
    }`;
      const onFirst = first.connect().subscribe(subscription);
      await first.subscriptionsStarted(1);
      const onSecond = second.connect().subscribe(subscription);
      startedOnSecond += 1;
      await second.subscriptionsStarted(startedOnSecond);
      const topUp = async (): Promise<void> => {
        const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_ada_polygon/topup', {
          body: { amount: '1.00', currency: 'USDC' },
        });
        expect(response.status).toBe(200);
      };
      const ids = (received: { data: { accountChanged: { eventId: string } }[] }): string[] =>
        received.data.map((data) => data.accountChanged.eventId);

      for (let index = 0; index < 3; index += 1) await topUp();
      await waitFor(() => ids(onSecond).length === 3, 'the events before the failover');
      const killed = await redis.killPrimary();
      // During: the platform's deliveries are refused or unanswered until a primary takes them.
      for (let index = 0; index < 3; index += 1) await topUp();
      await redis.waitForPromotion(killed);
      await redis.restartNode(killed.port);
      for (let index = 0; index < 3; index += 1) await topUp();

      /** The ids of the events the emulator sent (its own record of every attempt). */
      const sent = async (): Promise<string[]> => {
        const deliveries = (await (
          await fetch(`${stack.emulatorUrl}/_emulator/webhook-deliveries`)
        ).json()) as {
          data: { eventId: string; eventType: string }[];
        };
        const topUps = deliveries.data.filter((delivery) => delivery.eventType === 'account.updated');
        return [...new Set(topUps.map((delivery) => delivery.eventId))];
      };
      await waitFor(() => ids(onFirst).length >= 9 && ids(onSecond).length >= 9, 'all nine events', 40_000);
      const marker = adaPolygonAccountUpdated();
      await deliverUntilAcknowledged(marker);
      await waitFor(
        () => ids(onSecond).includes(marker.id) && ids(onFirst).includes(marker.id),
        'the marker',
      );
      const expected = [...(await sent()), marker.id].sort();
      expect(expected).toHaveLength(10);
      // Each once (a retried delivery may be appended after a later event: the log's order is theirs).
      expect([...ids(onFirst)].sort()).toEqual(expected);
      expect(ids(onSecond)).toEqual(ids(onFirst));
      onFirst.stop();
      onSecond.stop();
    },
    FAILOVER_TEST_TIMEOUT_MS,
  );

  test('no password of the Redis nodes or the Sentinels reaches a log line', () => {
    const lines = [...first.logs(), ...second.logs()];
    expect(lines.some((line) => line.includes('redis'))).toBe(true);
    expect(lines.filter((line) => line.includes(PASSWORD) || line.includes(SENTINEL_PASSWORD))).toEqual([]);
  });
});

describe('rate limits on a Redis that fails over', () => {
  let limited: Stack;
  beforeAll(async () => {
    limited = await startStack({
      facades: 2,
      env: {
        ...redis.env(),
        REDIS_KEY_PREFIX: uniqueRedisPrefix(),
        RATE_LIMIT_REQUESTS: '4',
        RATE_LIMIT_WINDOW_SECONDS: '60',
      },
    });
  }, 60_000);
  afterAll(async () => {
    await limited?.close();
  });

  /** How many connections named `name` the primary has (the names the facade gives its connections). */
  async function connectionsNamed(name: string): Promise<number> {
    const primary = redis.connectTo((await redis.primaryAddress()).port);
    try {
      const clients = (await primary.call('CLIENT', 'LIST')) as string;
      return clients.split('\n').filter((line) => line.includes(` name=${name} `)).length;
    } finally {
      primary.disconnect();
    }
  }

  /** The statuses of `count` operations of `caller` on `facade`, one after the other, and the slowest. */
  async function operations(
    facade: RunningFacade,
    caller: 'globex' | 'acme',
    count: number,
  ): Promise<{ statuses: number[]; slowestMs: number }> {
    const statuses: number[] = [];
    let slowestMs = 0;
    for (let index = 0; index < count; index += 1) {
      const started = Date.now();
      statuses.push((await facade.queryAs(caller, '{ __typename }')).status);
      slowestMs = Math.max(slowestMs, Date.now() - started);
    }
    return { statuses, slowestMs };
  }

  test(
    'during the failover each replica counts alone, with the whole budget and no wait; then they share counts again',
    async () => {
      const [a, b] = limited.facades as [RunningFacade, RunningFacade];
      // Shared through Redis: two on each replica spend the budget of four.
      expect((await operations(a, 'globex', 2)).statuses).toEqual([200, 200]);
      expect((await operations(b, 'globex', 2)).statuses).toEqual([200, 200]);
      expect((await operations(a, 'globex', 1)).statuses).toEqual([429]);
      const rateLimitConnections = await connectionsNamed('facade-rate-limits');

      const killed = await redis.killPrimary();
      // No primary: each replica counts in its own memory, from nothing, with the same budget. The
      // gate stays shut past it (at most one budget per replica, never unlimited), and no operation
      // waits for Redis (the rate limits' 500 ms at most).
      const duringA = await operations(a, 'globex', 5);
      const duringB = await operations(b, 'globex', 5);
      expect(duringA.statuses).toEqual([200, 200, 200, 200, 429]);
      expect(duringB.statuses).toEqual([200, 200, 200, 200, 429]);
      expect(Math.max(duringA.slowestMs, duringB.slowestMs)).toBeLessThan(1_000);
      expect(a.logs().some((line) => line.includes('rate limits counted in memory'))).toBe(true);

      await redis.waitForPromotion(killed);
      await redis.heal();
      // Shared again once every replica's rate-limit connection found the promoted primary: another
      // caller's budget is one across both replicas.
      let connected = 0;
      await waitFor(
        () => connected === rateLimitConnections,
        'the rate limits back on Redis',
        10_000,
        async () => {
          connected = await connectionsNamed('facade-rate-limits');
        },
      );
      expect((await operations(a, 'acme', 2)).statuses).toEqual([200, 200]);
      expect((await operations(b, 'acme', 2)).statuses).toEqual([200, 200]);
      expect((await operations(a, 'acme', 1)).statuses).toEqual([429]);
    },
    FAILOVER_TEST_TIMEOUT_MS,
  );
});
