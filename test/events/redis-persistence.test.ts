/**
 * A Redis restarted from its persistence (AOF `everysec`, as compose and Kubernetes run it): the
 * event log and the cursors into it survive a restart and a crash a second after the last write,
 * and a subscriber keeps its stream across them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import type { PlatformEvent } from '../../src/events/event-types.ts';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server.ts';
import { globexCapabilityChanged, postSignedEvent } from '../support/harness/events.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';

/** Redis is stopped and started twice, and the facade reconnects each time. */
const RESTART_TEST_TIMEOUT_MS = 60_000;

const secret = generateWebhookSecret();
const dir = mkdtempSync(join(tmpdir(), 'redis-aof-'));
let redis: RedisServer;
let stack: Stack;

beforeAll(async () => {
  redis = await startRedisServer({ appendOnlyDir: dir });
  stack = await startStack({ env: { REDIS_URL: redis.url, WEBHOOK_SECRETS: secret } });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const SUBSCRIPTION = `subscription ($after: String) {
  events(customerId: "cus_globex", after: $after) { eventId cursor }
}`;

type Received = { data: { events: { eventId: string; cursor: string } }[] };
const eventIds = (received: Received): string[] => received.data.map((data) => data.events.eventId);

/** Posts `event` until it is acknowledged (the facade reconnects to the restarted Redis meanwhile). */
async function deliver(event: PlatformEvent): Promise<void> {
  let status = 0;
  await waitFor(
    () => status === 200,
    `an acknowledgement of ${event.id}`,
    15_000,
    async () => {
      status = (await postSignedEvent(stack.facade.webhookUrl, secret, event)).status;
    },
  );
}

/** Stops Redis (`SIGTERM`, its last write flushed, or `SIGKILL`, a crash) and starts it again from its files. */
async function restartRedis(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  if (signal === 'SIGKILL') {
    const exited = new Promise((resolve) => redis.child.once('exit', resolve));
    redis.child.kill('SIGKILL');
    await exited;
  } else {
    await redis.stop();
  }
  redis = await startRedisServer({ appendOnlyDir: dir, port: redis.port });
}

describe('the event log on a Redis restarted from its AOF', () => {
  test(
    'the log and its cursors survive a restart and a crash; a subscriber keeps its stream',
    async () => {
      const live = stack.connect().subscribe(SUBSCRIPTION);
      await stack.subscriptionsStarted(1);
      const [first, second, third, fourth] = [
        globexCapabilityChanged(),
        globexCapabilityChanged(),
        globexCapabilityChanged(),
        globexCapabilityChanged(),
      ];
      await deliver(first);
      await deliver(second);
      await waitFor(() => eventIds(live).length === 2, 'the events before the restart');
      const cursorOfFirst = live.data[0]!.events.cursor;

      await restartRedis('SIGTERM');
      await deliver(third);
      await waitFor(() => eventIds(live).length === 3, 'the event after the restart');
      // `everysec`: a crash loses at most the last second of writes; past it, nothing.
      await sleep(1_200);
      await restartRedis('SIGKILL');
      await deliver(fourth);
      await waitFor(() => eventIds(live).length === 4, 'the event after the crash');

      // A subscriber resuming from a cursor handed out before both reads the log from before them.
      const resumed = stack.connect().subscribe(SUBSCRIPTION, { after: cursorOfFirst });
      await waitFor(() => eventIds(resumed).length >= 3 || resumed.errors.length > 0, 'the resumed replay');
      const ids = [first.id, second.id, third.id, fourth.id];
      expect(eventIds(resumed)).toEqual(ids.slice(1));
      expect(resumed.errors).toEqual([]);
      expect(eventIds(live)).toEqual(ids);
      live.stop();
      resumed.stop();
    },
    RESTART_TEST_TIMEOUT_MS,
  );
});
