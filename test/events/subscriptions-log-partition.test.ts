/**
 * A replica that loses Redis for a while misses nothing: its subscribers stay connected, and once
 * its connection is back it reads the event log on from its own position, delivering what it
 * missed in order, once. Replica B reaches the run's real Redis through a TCP proxy the test cuts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import type { RunningFacade } from '../support/harness/facade.ts';
import { requireRedisUrl } from '../support/harness/redis.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/harness/tcp-proxy.ts';
import { waitFor } from '../support/harness/wait.ts';

const secret = generateWebhookSecret();
let proxy: TcpProxy;
let stack: Stack;
let replicaA: RunningFacade;
let replicaB: RunningFacade;

beforeAll(async () => {
  const redis = new URL(requireRedisUrl());
  proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port) });
  const throughProxy = new URL(redis.href);
  throughProxy.port = String(proxy.port);
  stack = await startStack({
    facades: 2,
    redis: true,
    env: { WEBHOOK_SECRETS: secret },
    facadeEnv: (index): Record<string, string> => (index === 1 ? { REDIS_URL: throughProxy.href } : {}),
  });
  [replicaA, replicaB] = stack.facades as [RunningFacade, RunningFacade];
});

afterAll(async () => {
  await stack?.close();
  await proxy?.close();
});

const ACCOUNT = `subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId cursor } }`;

describe('a replica cut off from Redis while events flow', () => {
  test(
    'its subscribers receive every event, in order, once, after it is back',
    { timeout: 60_000 },
    async () => {
      const onA = replicaA.connect().subscribe(ACCOUNT);
      const onB = [replicaB.connect().subscribe(ACCOUNT), replicaB.connect().subscribe(ACCOUNT)];
      await replicaA.subscriptionsStarted(1);
      await replicaB.subscriptionsStarted(2);

      const sent: string[] = [];
      const send = async (): Promise<void> => {
        const event = acmeAccountUpdated();
        // Received by replica A, whose Redis link stays up: the log holds every one.
        expect((await postSignedEvent(replicaA.webhookUrl, secret, event)).status).toBe(200);
        sent.push(event.id);
      };

      for (let index = 0; index < 5; index += 1) await send();
      await waitFor(() => onB.every((received) => received.data.length === 5), 'B before the cut');

      proxy.cut();
      const cutAt = Date.now();
      // Events keep flowing for a few seconds while B cannot reach Redis.
      while (Date.now() - cutAt < 3_000) {
        await send();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const sentDuringCut = sent.length - 5;
      expect(sentDuringCut).toBeGreaterThan(5);
      // B's subscribers are still connected, and have heard none of them.
      expect(onB.every((received) => received.data.length === 5 && !received.completed)).toBe(true);
      proxy.restore();
      for (let index = 0; index < 5; index += 1) await send();

      await waitFor(() => onA.data.length === sent.length, 'A to receive everything');
      await waitFor(
        () => onB.every((received) => received.data.length >= sent.length),
        'B to catch up after the cut',
        30_000,
      );
      // One more: anything duplicated would have arrived before it.
      await send();
      await waitFor(
        () => [onA, ...onB].every((received) => received.data.length >= sent.length),
        'the last one, on both replicas',
      );

      for (const received of [onA, ...onB]) {
        expect(received.errors).toEqual([]);
        expect(received.data.map((data) => data.accountChanged.eventId)).toEqual(sent);
      }
      // Both replicas read one log: the same cursors everywhere.
      expect(onB[0]!.data.map((data) => data.accountChanged.cursor)).toEqual(
        onA.data.map((data) => data.accountChanged.cursor),
      );
    },
  );
});
