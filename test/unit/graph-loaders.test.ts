import { describe, expect, it } from 'vitest';
import { createFanOutLoader } from '../../src/loaders/fan-out-loader.ts';
import { pageCacheKey, scopedCacheKey } from '../../src/loaders/keys.ts';

/** A fake upstream read that records every call and answers or fails as told. */
function recordingFetch(failing: Set<string> = new Set()) {
  const calls: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const load = async (key: { customerId: string; id: string }) => {
    calls.push(scopedCacheKey(key));
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    inFlight--;
    if (failing.has(key.id)) throw new Error(`no ${key.id}`);
    return { id: key.id };
  };
  return { load, calls, maxInFlight: () => maxInFlight };
}

describe('createFanOutLoader', () => {
  it('coalesces identical keys into one call and answers in key order', async () => {
    const fetch = recordingFetch();
    const loader = createFanOutLoader(fetch.load, scopedCacheKey);

    const results = await Promise.all([
      loader.load({ customerId: 'c', id: 'b' }),
      loader.load({ customerId: 'c', id: 'a' }),
      loader.load({ customerId: 'c', id: 'b' }),
    ]);

    expect(results).toEqual([{ id: 'b' }, { id: 'a' }, { id: 'b' }]);
    expect(fetch.calls).toEqual(['c/b', 'c/a']);
  });

  it('runs the calls of one batch in parallel', async () => {
    const fetch = recordingFetch();
    const loader = createFanOutLoader(fetch.load, scopedCacheKey);

    await Promise.all(['a', 'b', 'c'].map((id) => loader.load({ customerId: 'c', id })));

    expect(fetch.maxInFlight()).toBe(3);
  });

  it('fails only the key whose call failed', async () => {
    const fetch = recordingFetch(new Set(['bad']));
    const loader = createFanOutLoader(fetch.load, scopedCacheKey);

    const [good, bad] = await Promise.allSettled([
      loader.load({ customerId: 'c', id: 'good' }),
      loader.load({ customerId: 'c', id: 'bad' }),
    ]);

    expect(good).toEqual({ status: 'fulfilled', value: { id: 'good' } });
    expect(bad).toMatchObject({ status: 'rejected', reason: { message: 'no bad' } });
  });

  it('caches successes but not failures', async () => {
    const failing = new Set(['flaky']);
    const fetch = recordingFetch(failing);
    const loader = createFanOutLoader(fetch.load, scopedCacheKey);

    await expect(loader.load({ customerId: 'c', id: 'flaky' })).rejects.toThrow('no flaky');
    failing.clear();
    await expect(loader.load({ customerId: 'c', id: 'flaky' })).resolves.toEqual({ id: 'flaky' });
    await expect(loader.load({ customerId: 'c', id: 'flaky' })).resolves.toEqual({ id: 'flaky' });

    expect(fetch.calls).toEqual(['c/flaky', 'c/flaky']);
  });
});

describe('pageCacheKey', () => {
  it('identifies a page by its owner and parameters, whatever their order', () => {
    expect(pageCacheKey({ customerId: 'c', limit: 2, cursor: 'x' })).toBe(
      pageCacheKey({ cursor: 'x', limit: 2, customerId: 'c' }),
    );
  });

  it('tells apart pages that differ in any parameter', () => {
    const keys = [
      pageCacheKey({ customerId: 'c' }),
      pageCacheKey({ customerId: 'd' }),
      pageCacheKey({ customerId: 'c', limit: 2 }),
      pageCacheKey({ customerId: 'c', cursor: 'x' }),
      pageCacheKey({ customerId: 'c', updatedSince: '2025-01-06T09:00:00Z' }),
      pageCacheKey({ customerId: 'c', taskId: 't' }),
      pageCacheKey({}),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });
});
