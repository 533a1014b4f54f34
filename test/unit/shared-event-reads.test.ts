/**
 * Which subscribers share an event's reads, and for how long: the group must separate every
 * difference in key or scope (or one caller would see another's answers), and nothing else.
 */
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { createSharedEventReads, readGroupOf } from '../../src/events/delivery/shared-event-reads.ts';
import type { GraphContext } from '../../src/graph/context.ts';

const operator = { operator: true, scope: { kind: 'all' } } as const;
const scoped = (...customerIds: string[]) =>
  ({ operator: false, scope: { kind: 'customers', customerIds: new Set(customerIds) } }) as const;

describe('readGroupOf', () => {
  test('the same scope and key are one group, whatever order the customers come in', () => {
    expect(readGroupOf(scoped('cus_a', 'cus_b'), undefined)).toBe(
      readGroupOf(scoped('cus_b', 'cus_a'), undefined),
    );
    expect(readGroupOf(operator, 'sk_test_1')).toBe(readGroupOf(operator, 'sk_test_1'));
  });

  test('another scope, another role or another key is another group', () => {
    const groups = [
      readGroupOf(operator, undefined),
      readGroupOf(scoped('cus_a'), undefined),
      readGroupOf(scoped('cus_a', 'cus_b'), undefined),
      readGroupOf(scoped(), undefined),
      readGroupOf(
        { operator: true, scope: { kind: 'customers', customerIds: new Set(['cus_a']) } },
        undefined,
      ),
      readGroupOf(scoped('cus_a'), 'sk_test_1'),
      readGroupOf(scoped('cus_a'), 'sk_test_2'),
      readGroupOf(operator, 'sk_test_1'),
    ];
    expect(new Set(groups).size).toBe(groups.length);
  });

  test('no customer id can make two scopes one group', () => {
    expect(readGroupOf(scoped('cus_a,cus_b'), undefined)).not.toBe(
      readGroupOf(scoped('cus_a', 'cus_b'), undefined),
    );
    expect(readGroupOf(scoped('*'), undefined)).not.toBe(
      readGroupOf({ operator: false, scope: { kind: 'all' } }, undefined),
    );
    expect(readGroupOf(scoped('cus_a|operator'), undefined)).not.toBe(
      readGroupOf(
        { operator: true, scope: { kind: 'customers', customerIds: new Set(['cus_a']) } },
        undefined,
      ),
    );
  });

  test('never holds the key itself', () => {
    expect(readGroupOf(operator, 'sk_test_secret_value')).not.toContain('sk_test_secret_value');
  });
});

describe('createSharedEventReads', () => {
  const context = (name: string) => ({ name }) as unknown as GraphContext;

  test('one context per event and group within the window, a new one after it', () => {
    let now = 0;
    const reads = createSharedEventReads({ windowMs: 1_000, now: () => now });
    let created = 0;
    const create = () => context(`context ${(created += 1)}`);

    const first = reads.contextFor('evt_1', 'group a', create);
    expect(reads.contextFor('evt_1', 'group a', create)).toBe(first);
    expect(reads.contextFor('evt_1', 'group b', create)).not.toBe(first);
    expect(reads.contextFor('evt_2', 'group a', create)).not.toBe(first);
    expect(created).toBe(3);

    now = 999;
    expect(reads.contextFor('evt_1', 'group a', create)).toBe(first);
    now = 1_000;
    expect(reads.contextFor('evt_1', 'group a', create)).not.toBe(first);
    expect(created).toBe(4);
  });

  test('forgets expired contexts on the next use, so they hold no memory', () => {
    let now = 0;
    const reads = createSharedEventReads({ windowMs: 1_000, now: () => now });
    for (let event = 0; event < 100; event += 1)
      reads.contextFor(`evt_${event}`, 'group', () => context('x'));
    expect(reads.held().contexts).toBe(100);
    now = 5_000;
    reads.contextFor('evt_next', 'group', () => context('y'));
    expect(reads.held().contexts).toBe(1);
  });

  describe('with no event after the last one (the quiet after a storm of subscribers)', () => {
    beforeEach(() => {
      vi.useFakeTimers();
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    test('lets go of its contexts and read caches once the window passed, on its own', () => {
      const reads = createSharedEventReads({ windowMs: 1_000 });
      for (let event = 0; event < 100; event += 1) {
        reads.contextFor(`evt_${event}`, 'group', () => context('x'));
        reads.readCacheFor(`evt_${event}`, 'read group');
      }
      expect(reads.held()).toEqual({ contexts: 100, readCaches: 100 });
      vi.advanceTimersByTime(999);
      expect(reads.held()).toEqual({ contexts: 100, readCaches: 100 });
      vi.advanceTimersByTime(1);
      expect(reads.held()).toEqual({ contexts: 0, readCaches: 0 });
      // Nothing left to sweep: no timer stays armed.
      expect(vi.getTimerCount()).toBe(0);
    });

    test('sweeps each entry when its own window ends, not before', () => {
      const reads = createSharedEventReads({ windowMs: 1_000 });
      reads.contextFor('evt_1', 'group', () => context('first'));
      vi.advanceTimersByTime(600);
      const second = reads.contextFor('evt_2', 'group', () => context('second'));
      vi.advanceTimersByTime(400);
      expect(reads.held().contexts).toBe(1);
      expect(reads.contextFor('evt_2', 'group', () => context('again'))).toBe(second);
      vi.advanceTimersByTime(600);
      expect(reads.held().contexts).toBe(0);
      expect(vi.getTimerCount()).toBe(0);
    });
  });

  test('one read cache per event and read group within the window, whatever the operation', () => {
    let now = 0;
    const reads = createSharedEventReads({ windowMs: 1_000, now: () => now });
    const cache = reads.readCacheFor('evt_1', 'group a');
    expect(reads.readCacheFor('evt_1', 'group a')).toBe(cache);
    expect(reads.readCacheFor('evt_1', 'group b')).not.toBe(cache);
    expect(reads.readCacheFor('evt_2', 'group a')).not.toBe(cache);
    now = 1_000;
    expect(reads.readCacheFor('evt_1', 'group a')).not.toBe(cache);
  });
});
