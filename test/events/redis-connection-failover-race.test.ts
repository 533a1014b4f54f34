/**
 * A Redis connection through the Sentinels (real `redis-server --sentinel`) that hears of a failover
 * while it is between reconnection attempts, asking a Sentinel for the primary. ioredis 5 gives such
 * a connection up for good: it stays `end` and every command fails, so a replica's rate limits stay
 * in memory and its event log out of reach until the process restarts. `openRedisConnection` opens it
 * again. The race is made certain here: the first Sentinel the connection asks sits behind a proxy
 * that keeps new connections waiting until the other Sentinels have announced the new primary.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.ts';
import { closeRedisConnection, openRedisConnection } from '../../src/redis.ts';
import type { RedisConfig } from '../../src/redis-config.ts';
import { startTcpProxy, type TcpProxy } from '../support/harness/tcp-proxy.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useRedisSentinel } from '../support/redis-sentinel.ts';

const redis = useRedisSentinel();
const logLines: string[] = [];
const logger = createLogger({ level: 'info', write: (line) => logLines.push(line) });

let proxy: TcpProxy;
beforeAll(async () => {
  const [first] = redis.sentinels;
  if (first === undefined) throw new Error('the topology has no Sentinel');
  proxy = await startTcpProxy(first);
});
afterAll(async () => {
  await proxy?.close();
});

/** A plain subscription to `+switch-master` on one Sentinel: the test's own ear for the announcement. */
async function switchMasterHeardOn(sentinel: { host: string; port: number }): Promise<{
  heard: () => boolean;
  close: () => void;
}> {
  const listener = new Redis({ host: sentinel.host, port: sentinel.port, lazyConnect: true });
  await listener.connect();
  let heard = false;
  listener.on('message', () => (heard = true));
  await listener.subscribe('+switch-master');
  return { heard: () => heard, close: () => listener.disconnect() };
}

test('a connection that hears of the failover between its reconnection attempts is opened again', async () => {
  const [, second, third] = redis.sentinels;
  if (second === undefined || third === undefined)
    throw new Error('the topology has fewer than three Sentinels');
  const config: RedisConfig = {
    target: {
      sentinels: [{ host: '127.0.0.1', port: proxy.port }, second, third],
      masterName: redis.masterName,
    },
    password: undefined,
    sentinelPassword: undefined,
    acks: { replicas: 0, timeoutMs: 0 },
  };
  const connection = openRedisConnection(config, 'race-under-test', logger);
  const announcement = await switchMasterHeardOn(second);
  try {
    await waitFor(() => connection.status === 'ready', 'the connection ready', 10_000);
    expect(await connection.set('before', '1')).toBe('OK');
    // The failover detector's subscriptions are opened once the connection is up; give them their turn.
    await new Promise((resolve) => setTimeout(resolve, 500));

    proxy.defer();
    const acceptedBefore = proxy.accepted();
    const killed = await redis.killPrimary();
    // The next attempt asks the first Sentinel for the primary and waits on the proxy...
    await waitFor(
      () => proxy.accepted() > acceptedBefore,
      'the reconnection asking the first Sentinel',
      10_000,
    );
    expect(connection.status).toBe('connecting');
    // ...while the other Sentinels promote the replica and announce it.
    await redis.waitForPromotion(killed);
    await waitFor(announcement.heard, '+switch-master announced', 15_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    proxy.restore();

    await waitFor(
      () => connection.status === 'ready',
      'the connection ready again after the failover',
      10_000,
    );
    expect(await connection.set('after', '2')).toBe('OK');
    expect(await connection.get('before')).toBe('1');
    expect(
      logLines.some(
        (line) =>
          line.includes('given up by its client during a failover') && line.includes('race-under-test'),
      ),
    ).toBe(true);
  } finally {
    announcement.close();
    await closeRedisConnection(connection);
    await redis.heal();
  }
  // Closed by its owner, it stays closed: nothing opens it again behind the owner's back.
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(connection.status).toBe('end');
}, 60_000);
