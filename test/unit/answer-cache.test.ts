/**
 * What decides whether a held whole answer may be served: the response cache's judgement of the
 * answers it was made from (`isCurrent`), and the key that keeps callers, scopes, environments and
 * keys apart (`answerKey`).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, test } from 'vitest';
import type { Caller } from '../../src/auth/caller.ts';
import { answerKey, createAnswerCache, type AnswerQuestion } from '../../src/graph/answer-cache.ts';
import { scopeOf } from '../../src/upstream/access.ts';
import type { UpstreamContext } from '../../src/upstream/context.ts';
import {
  createAnswerSources,
  createResponseCache,
  type CacheRead,
  type CachedAnswer,
} from '../../src/upstream/response-cache.ts';

const read = (path: string, sources = createAnswerSources()): CacheRead => ({
  partition: 'facade-key',
  path,
  query: '',
  readThrough: false,
  sources,
});

/** Loads a fresh parsed body each time, as the upstream client does. */
const parsed = (value: unknown) => async (): Promise<CachedAnswer> => ({
  status: 200,
  text: JSON.stringify(value),
  body: Object.freeze(structuredClone(value)),
});

function createCache(now?: () => number) {
  return createResponseCache({ maxAgeSeconds: 30, maxBytes: 1 << 20, ...(now ? { now } : {}) });
}

describe('ResponseCache.isCurrent', () => {
  test('current while every answer read is held as it was handed out', async () => {
    const cache = createCache();
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    await cache.read(read('/v3/customers/cus_a/accounts', sources), parsed({ data: [] }));
    expect(sources.reads.size).toBe(2);
    expect(cache.isCurrent(sources)).toBe(true);

    // A later operation's hit records the same held values.
    const later = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', later), parsed({ id: 'other' }));
    expect(cache.isCurrent(later)).toBe(true);
    expect([...later.reads.values()][0]?.deref()).toBe(
      sources.reads.get('facade-key /v3/customers/cus_a')?.deref(),
    );
  });

  test('not current once an invalidation drops one of them, even after it is read anew', async () => {
    const cache = createCache();
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    await cache.read(read('/v3/customers/cus_a/accounts', sources), parsed({ data: [] }));
    cache.invalidate([{ kind: 'list', customerId: 'cus_a', collection: 'accounts' }]);
    expect(cache.isCurrent(sources)).toBe(false);
    // Held again, with a new body: a result made from the old one is still not current.
    await cache.read(read('/v3/customers/cus_a/accounts'), parsed({ data: [] }));
    expect(cache.isCurrent(sources)).toBe(false);
  });

  test('not current once one of them reaches the maximum age', async () => {
    let now = 1_000;
    const cache = createCache(() => now);
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    now += 29_999;
    expect(cache.isCurrent(sources)).toBe(true);
    now += 2;
    expect(cache.isCurrent(sources)).toBe(false);
  });

  test('a read in flight when an invalidation named it leaves the record not current', async () => {
    const cache = createCache();
    const sources = createAnswerSources();
    let release!: () => void;
    const slow = async (): Promise<CachedAnswer> => {
      await new Promise<void>((resolve) => (release = resolve));
      return parsed({ id: 'old' })();
    };
    const reading = cache.read(read('/v3/customers/cus_a', sources), slow);
    await Promise.resolve();
    cache.invalidate([{ kind: 'customer', customerId: 'cus_a' }]);
    release();
    await reading;
    expect(cache.isCurrent(sources)).toBe(false);
  });

  test('one key read twice with different answers, an answer kept as text, or no read at all: never current', async () => {
    const cache = createCache();
    const twice = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', twice), parsed({ id: 'cus_a' }));
    cache.invalidate([{ kind: 'customer', customerId: 'cus_a' }]);
    await cache.read(read('/v3/customers/cus_a', twice), parsed({ id: 'cus_a' }));
    expect(twice.complete).toBe(false);
    expect(cache.isCurrent(twice)).toBe(false);

    const asText = createAnswerSources();
    await cache.read(read('/v3/customers/cus_b', asText), async () => ({ status: 200, text: '{}' }));
    expect(cache.isCurrent(asText)).toBe(false);

    expect(cache.isCurrent(createAnswerSources())).toBe(false);
  });

  test('a body collected once the cache let it go is never current, even with another answer held under its key', async () => {
    const cache = createCache();
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    cache.invalidate([{ kind: 'customer', customerId: 'cus_a' }]);
    // Nothing holds the first body now but the record's weak reference.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    for (let round = 0; round < 3; round += 1) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    expect(sources.reads.get('facade-key /v3/customers/cus_a')?.deref()).toBeUndefined();
    // Held again as text (no body to compare): still not the answer the record was made from.
    await cache.read(read('/v3/customers/cus_a'), async () => ({ status: 200, text: '{"id":"cus_a"}' }));
    expect(cache.isCurrent(sources)).toBe(false);
  });
});

describe('the answer cache', () => {
  test('serves a kept answer while its sources are current, and drops it after', async () => {
    const cache = createCache();
    const answers = createAnswerCache({ maxBytes: 1 << 20 });
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    expect(answers.keep('k', { customer: { id: 'cus_a' } }, sources, cache)).toBe(true);
    const held = answers.find('k', cache);
    expect(held).toEqual({ customer: { id: 'cus_a' } });
    expect(Object.isFrozen(held) && Object.isFrozen(held?.['customer'])).toBe(true);
    // Another environment's response cache never answers for it.
    expect(answers.find('k', createCache())).toBeUndefined();

    cache.invalidate([{ kind: 'customer', customerId: 'cus_a' }]);
    expect(answers.find('k', cache)).toBeUndefined();
    expect(answers.stats()).toMatchObject({ hits: 1, misses: 2, kept: 1, entries: 0 });
  });

  test('keeps nothing whose sources are no longer current, or larger than its cap', async () => {
    const cache = createCache();
    const sources = createAnswerSources();
    await cache.read(read('/v3/customers/cus_a', sources), parsed({ id: 'cus_a' }));
    expect(createAnswerCache({ maxBytes: 600 }).keep('k', { big: 'x'.repeat(600) }, sources, cache)).toBe(
      false,
    );
    cache.invalidate([{ kind: 'everything' }]);
    expect(createAnswerCache({ maxBytes: 1 << 20 }).keep('k', { id: 1 }, sources, cache)).toBe(false);
  });
});

describe('answerKey', () => {
  const caller = (overrides: Partial<Caller> = {}): Caller => ({
    via: 'token',
    subject: 'user-1',
    clientId: 'web',
    roles: [],
    operator: false,
    scope: { kind: 'customers', customerIds: new Set(['cus_a', 'cus_b']) },
    expiresAt: undefined,
    ...overrides,
  });
  const question = (who: Caller, upstream: Partial<UpstreamContext> = {}): AnswerQuestion => ({
    caller: who,
    upstream: {
      credentials: { partition: 'facade-key' },
      scope: scopeOf(who),
      ...upstream,
    } as UpstreamContext,
    documentHash: 'abc',
    operationName: 'Dashboard',
    variables: { id: 'cus_a' },
  });
  const base = answerKey(question(caller()));

  test('the same caller, scope, document and variables: the same key, whatever the order of the customers', () => {
    expect(answerKey(question(caller()))).toBe(base);
    const reordered = caller({ scope: { kind: 'customers', customerIds: new Set(['cus_b', 'cus_a']) } });
    expect(answerKey(question(reordered))).toBe(base);
  });

  test.each<[string, AnswerQuestion]>([
    ['another subject', question(caller({ subject: 'user-2' }))],
    ['another client', question(caller({ clientId: 'batch' }))],
    ['another role', question(caller({ roles: ['gateway'] }))],
    ['another contract', question(caller({ contract: 'partner' }))],
    ['a narrower scope', question(caller({ scope: { kind: 'customers', customerIds: new Set(['cus_a']) } }))],
    ['an operator', question(caller({ operator: true, scope: { kind: 'all' } }))],
    ['another environment', question(caller(), { environment: 'live' })],
    ["the caller's own key", question(caller(), { credentials: { partition: 'own-key' } } as never)],
    ['other variables', { ...question(caller()), variables: { id: 'cus_b' } }],
    ['another operation', { ...question(caller()), operationName: 'Other' }],
    ['another document', { ...question(caller()), documentHash: 'abd' }],
  ])('%s: another key', (_name, other) => {
    expect(answerKey(other)).not.toBe(base);
  });
});
