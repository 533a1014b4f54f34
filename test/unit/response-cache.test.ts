import { describe, expect, test } from 'vitest';
import { UpstreamCancelledError } from '../../src/upstream/errors.ts';
import { partitionOfKey } from '../../src/upstream/credentials.ts';
import {
  createResponseCache,
  staleReadsOfWrite,
  type CacheRead,
  type CachedAnswer,
} from '../../src/upstream/response-cache.ts';

const read = (path: string, overrides: Partial<CacheRead> = {}): CacheRead => ({
  partition: partitionOfKey('sk_sandbox_test'),
  path,
  query: '',
  readThrough: false,
  ...overrides,
});

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/** A loader counting its calls, answering `text` (or what `next` says). */
function loader(text = '{"data":{}}') {
  const loads = { count: 0 };
  const load = async (): Promise<CachedAnswer> => {
    loads.count += 1;
    return { status: 200, text };
  };
  return { load, loads };
}

describe('createResponseCache', () => {
  test('keeps an answer by partition, path and query, and tells partitions apart', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const { load, loads } = loader();
    await cache.read(read('/v3/customers/cus_1'), load);
    await cache.read(read('/v3/customers/cus_1'), load);
    expect(loads.count).toBe(1);
    await cache.read(read('/v3/customers/cus_1', { query: '?limit=5' }), load);
    await cache.read(read('/v3/customers/cus_1', { partition: partitionOfKey('sk_sandbox_other') }), load);
    expect(loads.count).toBe(3);
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 3, entries: 3 });
  });

  test('a read in flight when an invalidation names it never stores its old answer', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const slow = deferred<CachedAnswer>();
    const first = cache.read(read('/v3/customers/cus_1/accounts/acc_1'), () => slow.promise);
    expect(
      cache.invalidate([{ kind: 'record', customerId: 'cus_1', collection: 'accounts', id: 'acc_1' }]),
    ).toBe(1);
    // A read starting after the invalidation does not join the marked one.
    const { load, loads } = loader('{"data":{"balance":"new"}}');
    const second = cache.read(read('/v3/customers/cus_1/accounts/acc_1'), load);
    slow.resolve({ status: 200, text: '{"data":{"balance":"old"}}' });
    expect((await first).text).toContain('old');
    expect((await second).text).toContain('new');
    expect(loads.count).toBe(1);
    expect((await cache.read(read('/v3/customers/cus_1/accounts/acc_1'), load)).text).toContain('new');
    expect(loads.count).toBe(1);
  });

  test('a read-through beside a read in flight: an invalidation marks both', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const first = deferred<CachedAnswer>();
    const second = deferred<CachedAnswer>();
    const reading = cache.read(read('/v3/customers/cus_1'), () => first.promise);
    const through = cache.read(read('/v3/customers/cus_1', { readThrough: true }), () => second.promise);
    expect(cache.invalidate([{ kind: 'customer', customerId: 'cus_1' }])).toBe(2);
    second.resolve({ status: 200, text: '"through"' });
    first.resolve({ status: 200, text: '"old"' });
    await Promise.all([reading, through]);
    const { load, loads } = loader('"new"');
    expect((await cache.read(read('/v3/customers/cus_1'), load)).text).toBe('"new"');
    expect(loads.count).toBe(1);
  });

  test('concurrent misses share one load; one whose leader was cancelled reads for itself', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const slow = deferred<CachedAnswer>();
    const leader = cache.read(read('/v3/customers/cus_1'), () => slow.promise);
    const { load, loads } = loader();
    const follower = cache.read(read('/v3/customers/cus_1'), load);
    slow.reject(new UpstreamCancelledError('deadline', 'req_1'));
    await expect(leader).rejects.toBeInstanceOf(UpstreamCancelledError);
    expect((await follower).status).toBe(200);
    expect(loads.count).toBe(1);
  });

  test('an answer is served up to the maximum age, then read again', async () => {
    let now = 1_000;
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20, now: () => now });
    const { load, loads } = loader();
    await cache.read(read('/v3/customers/cus_1'), load);
    now += 30_000;
    await cache.read(read('/v3/customers/cus_1'), load);
    expect(loads.count).toBe(1);
    now += 1;
    await cache.read(read('/v3/customers/cus_1'), load);
    expect(loads.count).toBe(2);
    expect(cache.stats().expirations).toBe(1);
  });

  test('stays under its cap, the least recently used out first', async () => {
    const body = JSON.stringify({ data: 'x'.repeat(700) });
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 4_096 });
    const { load, loads } = loader(body);
    for (const id of ['a', 'b', 'c', 'd']) await cache.read(read(`/v3/customers/${id}`), load);
    await cache.read(read('/v3/customers/a'), load);
    for (const id of ['e', 'f']) await cache.read(read(`/v3/customers/${id}`), load);
    expect(cache.stats().bytes).toBeLessThanOrEqual(4_096);
    expect(cache.stats().evictions).toBeGreaterThan(0);
    loads.count = 0;
    await cache.read(read('/v3/customers/a'), load);
    expect(loads.count).toBe(0);
    await cache.read(read('/v3/customers/b'), load);
    expect(loads.count).toBe(1);
  });

  test('an invalidation drops what it names and nothing else', async () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    const { load, loads } = loader();
    const paths = [
      '/v3/customers',
      '/v3/customers/cus_1',
      '/v3/customers/cus_1/accounts',
      '/v3/customers/cus_1/accounts/acc_1',
      '/v3/customers/cus_1/accounts/acc_1/fees',
      '/v3/customers/cus_1/accounts/acc_10',
      '/v3/customers/cus_10/accounts/acc_1',
    ];
    for (const path of paths) await cache.read(read(path), load);
    expect(
      cache.invalidate([{ kind: 'record', customerId: 'cus_1', collection: 'accounts', id: 'acc_1' }]),
    ).toBe(2);
    expect(cache.invalidate([{ kind: 'list', customerId: 'cus_1', collection: 'accounts' }])).toBe(1);
    expect(cache.invalidate([{ kind: 'customer-list' }])).toBe(1);
    expect(cache.invalidate([{ kind: 'all-of-customer', customerId: 'cus_1' }])).toBe(2);
    loads.count = 0;
    await cache.read(read('/v3/customers/cus_10/accounts/acc_1'), load);
    expect(loads.count).toBe(0);
  });

  test('only customers and institutions are kept', () => {
    const cache = createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20 });
    expect(cache.isCacheable('/v3/customers/cus_1/accounts')).toBe(true);
    expect(cache.isCacheable('/v3/institutions/ins_1')).toBe(true);
    expect(cache.isCacheable('/v3/capabilities')).toBe(false);
    expect(cache.isCacheable('/v3/webhooks')).toBe(false);
    expect(cache.isCacheable('/v3/customersX')).toBe(false);
  });
});

describe('staleReadsOfWrite', () => {
  test.each([
    ['/v3/customers', undefined, [{ kind: 'customer-list' }]],
    [
      '/v3/customers/cus%2F1/accounts',
      undefined,
      [{ kind: 'all-of-customer', customerId: 'cus/1' }, { kind: 'customer-list' }],
    ],
    [
      '/v3/sandbox/customers/cus_1/capabilities/cap_1/status',
      undefined,
      [{ kind: 'all-of-customer', customerId: 'cus_1' }, { kind: 'customer-list' }],
    ],
    [
      '/v3/sandbox/accounts/acc_1/topup',
      'cus_1',
      [{ kind: 'all-of-customer', customerId: 'cus_1' }, { kind: 'customer-list' }],
    ],
    ['/v3/sandbox/accounts/acc_1/topup', undefined, [{ kind: 'everything' }]],
    ['/v3/webhooks/we_1', undefined, []],
  ] as const)('a write to %s (acting for %s)', (path, actingFor, expected) => {
    expect(staleReadsOfWrite(path, actingFor)).toEqual(expected);
  });
});
