/**
 * The held whole answers (src/graph/answer-cache.ts) as an attacker meets them, against a real
 * emulator and a real facade with real tokens: no held answer reaches a caller a fresh execution
 * would refuse or answer otherwise, nothing the door counts or refuses is skipped by a held
 * answer, and what the held answers keep in memory stays within what they count.
 * test/cache/answer-cache.test.ts covers the key's callers, scopes, errors and reads.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';
import type { CacheRead, CachedAnswer } from '../../src/upstream/response-cache.ts';

const stack = useStack({ env: { CACHE_ENABLED: 'true', QUERY_MAX_COST: '100000' } });

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
}

/** Node's collector, reachable without starting the test process with `--expose-gc`. */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Lets the current job end (a WeakRef keeps its target alive until then), then collects. */
async function collectGarbage(): Promise<void> {
  const gc = collector();
  for (let round = 0; round < 3; round += 1) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
}

describe('memory', () => {
  test('a held answer keeps alive no upstream answer the response cache has let go', async () => {
    const cache = stack.app.responseCache!;
    // Watches (weakly) each body the response cache hands out for the customer's record.
    const handed: WeakRef<object>[] = [];
    const read = cache.read;
    cache.read = async (request: CacheRead, load: () => Promise<CachedAnswer>) => {
      const answer = await read.call(cache, request, load);
      if (request.path === '/v3/customers/cus_acme' && typeof answer.body === 'object' && answer.body) {
        handed.push(new WeakRef(answer.body));
      }
      return answer;
    };
    try {
      // Two held answers made from one held record.
      await stack.queryAs('acme', '{ customer(id: "cus_acme") { id } }');
      await stack.queryAs('acme', '{ customer(id: "cus_acme") { displayName } }');
      expect(handed).toHaveLength(2);
      expect(handed[0]!.deref()).toBe(handed[1]!.deref());
      // The record read anew (a caller's `no-cache`; an event, a write, the maximum age or the byte
      // cap drop it alike): the response cache no longer holds the first body.
      const headers = { ...(await bearer('acme')), 'cache-control': 'no-cache' };
      await stack.query('{ customer(id: "cus_acme") { id } }', undefined, headers);
      expect(handed).toHaveLength(3);
      expect(handed[2]!.deref()).not.toBe(handed[0]!.deref());
    } finally {
      cache.read = read;
    }
    // The second answer, still held but no longer current, must not keep the first body alive:
    // otherwise answers that read large pages pin every page the response cache let go, past both caps.
    await collectGarbage();
    expect(handed[0]!.deref()).toBeUndefined();

    // And it is not served: it executes over the record held now.
    await stack.resetUpstreamCalls();
    const again = await stack.queryAs('acme', '{ customer(id: "cus_acme") { displayName } }');
    expect(again.body.data).toMatchObject({ customer: { displayName: expect.any(String) } });
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a held answer counts the record of what it was made from, not only its data', async () => {
    // Many distinct reads, each answering a few bytes: the record of the reads is most of what is
    // held. Fourteen aliases (the limit is fifteen) under each customer of a page of three.
    const instants = Array.from(
      { length: 14 },
      (_, index) => `2020-01-01T00:00:00.${String(index).padStart(3, '0')}Z`,
    );
    const lists = instants
      .map(
        (instant, index) =>
          `a${index}: accounts(first: 1, updatedSince: "${instant}") { pageInfo { hasNextPage } }`,
      )
      .join(' ');
    const document = `{ customers(first: 3) { nodes { id ${lists} } } }`;
    const bytesBefore = await metric(stack.metricsUrl, 'facade_answer_cache_bytes');
    const keptBefore = await metric(stack.metricsUrl, 'facade_answer_cache_kept_total');
    const result = await stack.queryAs<{ customers: { nodes: { id: string }[] } }>('operator', document);
    expect(result.body.errors).toBeUndefined();
    const customerIds = result.body.data!.customers.nodes.map(({ id }) => id);
    expect(customerIds).toHaveLength(3);
    expect(await metric(stack.metricsUrl, 'facade_answer_cache_kept_total')).toBe(keptBefore + 1);

    // What the held answer records of each read: at least the path and query of the upstream
    // request, counted as the answer's own key is (two bytes a character).
    const paths = customerIds.flatMap((id) =>
      instants.map(
        (instant) =>
          `/v3/customers/${id}/accounts?${new URLSearchParams({ limit: '1', updatedSince: instant })}`,
      ),
    );
    expect((await stack.upstreamCalls()).total).toBe(1 + paths.length);
    const recorded = paths.reduce((sum, path) => sum + 2 * path.length, 0);
    const data = 2 * JSON.stringify(result.body.data).length;
    const counted = (await metric(stack.metricsUrl, 'facade_answer_cache_bytes')) - bytesBefore;
    expect(counted).toBeGreaterThanOrEqual(data + recorded);
  });
});
