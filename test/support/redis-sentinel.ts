/**
 * A Redis that fails over, for one test file: scripts/redis-sentinel.ts's primary, replica and three
 * Sentinels (real `redis-server --sentinel`), started before the file's tests and stopped after
 * them, with what the failover tests ask of it: which node is the replica now, holding its
 * acknowledgements back for a while, and a failover that ends with the old primary back as a replica.
 */
import { afterAll, beforeAll } from 'vitest';
import {
  startRedisSentinel,
  type RedisAddress,
  type RedisSentinelOptions,
  type RedisSentinelTopology,
} from '../../scripts/redis-sentinel.ts';

/** The topology of {@link useRedisSentinel}, with the helpers the tests share. */
export interface TestRedisSentinel extends RedisSentinelTopology {
  /** A replica of the current primary. */
  replicaAddress(): Promise<RedisAddress>;
  /**
   * `CLIENT PAUSE <ms> WRITE` on the replica: for `ms` it applies nothing of the replication stream
   * and acknowledges nothing (what it received meanwhile is dropped if the primary dies first).
   * Resolves once the pause is on; it ends by itself.
   */
  holdReplicaAcks(ms: number): Promise<void>;
  /**
   * Kills the primary, waits for the promotion and starts the old primary again as a replica of the
   * new one, so the next test meets a primary with a replica again. Resolves with the timings.
   */
  failOver(): Promise<{ killed: RedisAddress; promoted: RedisAddress; promotionMs: number }>;
  /** Starts every killed node again as a replica and waits until all replicate (a test's clean start). */
  heal(): Promise<void>;
}

/** Starts the topology in `beforeAll` and stops it in `afterAll`; usable from inside the tests. */
export function useRedisSentinel(options: RedisSentinelOptions = {}): TestRedisSentinel {
  let topology: RedisSentinelTopology | undefined;
  beforeAll(async () => {
    topology = await startRedisSentinel(options);
  }, 60_000);
  afterAll(async () => {
    await topology?.stop();
  });
  const started = (): RedisSentinelTopology => {
    if (topology === undefined) throw new Error('the Sentinel topology is used before beforeAll started it');
    return topology;
  };
  const replicaAddress = async (): Promise<RedisAddress> => {
    const primary = await started().primaryAddress();
    const replica = started().nodes.find((node) => node.port !== primary.port && node.running());
    if (replica === undefined) throw new Error('no replica is running');
    return { host: replica.host, port: replica.port };
  };
  const helpers = {
    replicaAddress,
    async holdReplicaAcks(ms: number) {
      const replica = started().connectTo((await replicaAddress()).port);
      try {
        await replica.call('CLIENT', 'PAUSE', ms, 'WRITE');
      } finally {
        replica.disconnect();
      }
    },
    async failOver() {
      const killed = await started().killPrimary();
      const promoted = await started().waitForPromotion(killed);
      await started().restartNode(killed.port);
      await started().waitForReplicas(1);
      return { killed, promoted, promotionMs: promoted.elapsedMs };
    },
    async heal() {
      for (const node of started().nodes) if (!node.running()) await started().restartNode(node.port);
      await started().waitForReplicas(started().nodes.length - 1);
    },
  };
  return new Proxy({} as TestRedisSentinel, {
    get(_target, property) {
      if (property in helpers) return helpers[property as keyof typeof helpers];
      return Reflect.get(started(), property) as unknown;
    },
  });
}
