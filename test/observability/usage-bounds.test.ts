/**
 * The bounds of the field usage (src/observability/usage-recorder.ts, usage-store.ts) in the run's
 * real Redis, with two recorders as two replicas sharing one store prefix: a day holds at most
 * `USAGE_MAX_OPERATIONS` operations over both, in one key that expires, whatever either replica
 * saw; what is beyond is counted as dropped. A replica whose Redis connection is gone keeps its counts for the
 * next flush; a day lost with a failed-over Redis is written again whole, coordinates included.
 */
import { buildSchema, parse } from 'graphql';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Caller } from '../../src/auth/caller.ts';
import { createLogger } from '../../src/logger.ts';
import { openRedisConnection } from '../../src/redis.ts';
import type { OperationUsage } from '../../src/observability/field-usage.ts';
import { createUsageRecorder, dayOf, type UsageRecorder } from '../../src/observability/usage-recorder.ts';
import {
  createMemoryUsageStore,
  createRedisUsageStore,
  type UsageStore,
} from '../../src/observability/usage-store.ts';
import { connectRedis, requireRedisUrl, uniqueRedisPrefix } from '../support/harness/redis.ts';

const schema = buildSchema(`
  enum Kind { A B C }
  input Filter { kind: Kind, label: String }
  type Item { id: ID!, label: String, kind: Kind }
  type Query { item(id: ID!): Item, items(filter: Filter): [Item!]! }
`);
const logger = createLogger({ level: 'silent' });
const caller = (clientId: string): Caller => ({
  via: 'token',
  subject: 'user-1',
  clientId,
  roles: [],
  operator: false,
  scope: { kind: 'all' },
  expiresAt: undefined,
});
const usageOf = (query: string, clientId: string, variables?: Record<string, unknown>): OperationUsage => ({
  schema,
  document: parse(query),
  operationName: undefined,
  variables,
  caller: caller(clientId),
});
const config = { enabled: true, days: 3, maxOperations: 3, maxOperationsPerCaller: 3, flushSeconds: 3_600 };

let redis: Redis;
const opened: { close(): Promise<void> }[] = [];

function replica(prefix: string, connection?: Redis): { recorder: UsageRecorder; store: UsageStore } {
  const store = createRedisUsageStore({
    redis: connection ?? openRedisConnection(requireRedisUrl(), 'field-usage', logger),
    prefix,
    days: config.days,
    maxOperations: config.maxOperations,
    ownsConnection: true,
  });
  const recorder = createUsageRecorder({ config, store, contractOf: () => undefined, logger });
  opened.push(recorder, store);
  return { recorder, store };
}

beforeAll(() => {
  redis = connectRedis();
});

afterAll(async () => {
  for (const part of opened.splice(0)) await part.close();
  redis.disconnect();
});

describe('bounded in Redis across two replicas', () => {
  test('a day holds USAGE_MAX_OPERATIONS operations over both replicas, in one expiring key; the rest is counted as dropped', async () => {
    const prefix = uniqueRedisPrefix();
    const [first, second] = [replica(prefix), replica(prefix)];
    // Two operations on each replica, one of them the same on both: three distinct, then two more.
    first.recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    first.recorder.record(usageOf('query Two { item(id: "1") { label } }', 'app'));
    second.recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    second.recorder.record(usageOf('query Three { item(id: "1") { kind } }', 'app'));
    await first.recorder.flush();
    await second.recorder.flush();
    for (const name of ['Four', 'Five']) {
      second.recorder.record(usageOf(`query ${name} { items { id } }`, 'app'));
    }
    second.recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    await second.recorder.flush();

    const report = await first.store.read(1, Date.now());
    expect(report.operations.map((operation) => [operation.operation, operation.count])).toEqual([
      ['One', 3],
      ['Three', 1],
      ['Two', 1],
    ]);
    expect(report.dropped).toBe(2);
    const keys = await redis.keys(`${prefix}*`);
    expect(keys).toEqual([`${prefix}usage:${dayOf(Date.now())}`]);
    // Three fields an operation, its count of operations and the dropped count: nothing more.
    expect(await redis.hlen(keys[0]!)).toBe(3 * config.maxOperations + 2);
    const ttl = await redis.ttl(keys[0]!);
    expect(ttl).toBeGreaterThan((config.days + 1) * 86_400 - 60);
    expect(ttl).toBeLessThanOrEqual((config.days + 1) * 86_400);
  });

  test('a replica holds at most USAGE_MAX_OPERATIONS a day itself: one more is dropped before it reaches the store', async () => {
    const prefix = uniqueRedisPrefix();
    const { recorder, store } = replica(prefix);
    // What the replica hands Redis: the real store's writes, watched.
    const written: number[] = [];
    const write = store.write.bind(store);
    store.write = (day, deltas, dropped) => {
      written.push(deltas.length);
      return write(day, deltas, dropped);
    };
    for (let index = 0; index < 50; index += 1) {
      recorder.record(usageOf(`query Q${index} { item(id: "1") { id } }`, 'scanner'));
    }
    await recorder.flush();
    expect(written).toEqual([config.maxOperations]);
    const report = await store.read(1, Date.now());
    expect(report.operations).toHaveLength(config.maxOperations);
    expect(report.dropped).toBe(50 - config.maxOperations);
  });
});

describe('Redis away, Redis failed over', () => {
  test('counts a flush could not store are stored by the next one, none lost and none twice', async () => {
    const prefix = uniqueRedisPrefix();
    const connection = openRedisConnection(requireRedisUrl(), 'field-usage', logger);
    const { recorder, store } = replica(prefix, connection);
    await connection.ping();
    recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    // Redis away: the connection is gone, and every command on it fails at once.
    connection.disconnect();
    recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    await recorder.flush();
    expect(await redis.exists(`${prefix}usage:${dayOf(Date.now())}`)).toBe(0);
    await connection.connect();
    recorder.record(usageOf('query One { item(id: "1") { id } }', 'app'));
    await recorder.flush();
    await recorder.flush();
    const report = await store.read(1, Date.now());
    expect(report.operations).toMatchObject([{ operation: 'One', count: 3, client: 'app' }]);
  });

  test('a day lost with its Redis is written again whole: identity, coordinates, and the counts since', async () => {
    const prefix = uniqueRedisPrefix();
    const { recorder, store } = replica(prefix);
    const query = 'query Filtered($filter: Filter) { items(filter: $filter) { id } }';
    recorder.record(usageOf(query, 'app', { filter: { kind: 'B' } }));
    await recorder.flush();
    // What a replica of Redis promoted before it received the day looks like.
    await redis.del(`${prefix}usage:${dayOf(Date.now())}`);
    recorder.record(usageOf(query, 'app', { filter: { label: 'x' } }));
    await recorder.flush();
    await recorder.flush();
    const [operation] = (await store.read(1, Date.now())).operations;
    expect(operation).toMatchObject({ operation: 'Filtered', client: 'app', count: 1 });
    expect(operation?.coordinates).toEqual(
      expect.arrayContaining(['Query.items(filter:)', 'Filter.kind', 'Kind.B', 'Filter.label']),
    );
    expect(operation?.coordinates).not.toContain('Kind.A');
  });
});

describe('one caller cannot fill the day', () => {
  test('the names a client gives itself add at most USAGE_MAX_OPERATIONS_PER_CALLER operations a day for that caller; another caller still counts', async () => {
    const store = createMemoryUsageStore({ days: 1, maxOperations: 10 });
    const recorder = createUsageRecorder({
      config: { enabled: true, days: 1, maxOperations: 10, maxOperationsPerCaller: 2, flushSeconds: 3_600 },
      store,
      contractOf: () => undefined,
      logger,
    });
    opened.push(recorder);
    // One token, a name of its own making on each request: as many distinct operations as names.
    for (let name = 1; name <= 8; name += 1) {
      recorder.record({
        ...usageOf('query Q { item(id: "1") { id } }', 'flooder'),
        clientName: `junk-${name}`,
      });
    }
    recorder.record({ ...usageOf('query Dashboard { items { id label } }', 'web'), clientName: 'web' });
    await recorder.flush();

    const report = await store.read(1, Date.now());
    expect(
      report.operations.map((operation) => [operation.client, operation.clientName, operation.operation]),
    ).toEqual([
      ['flooder', 'junk-1', 'Q'],
      ['flooder', 'junk-2', 'Q'],
      ['web', 'web', 'Dashboard'],
    ]);
    expect(report.dropped).toBe(6);
  });
});
