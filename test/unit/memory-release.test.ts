/**
 * The rules of the idle-time memory release, with a collector and an RSS the test controls: no
 * release without work before the idle spell, one per spell after work, none while a request waits
 * for its answer, none below the growth thresholds, and nothing at all when it is off or node has no
 * collector. The release in a real process is test/observability/memory-release.test.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, test } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import {
  createMemoryRelease,
  type MemoryRelease,
  type MemoryReleaseConfig,
  type MemoryReleased,
} from '../../src/observability/memory-release.ts';

/** The shortest idle period the configuration accepts: checks run every 50 ms. */
const IDLE_MS = 100;
const MIB = 2 ** 20;

const started: MemoryRelease[] = [];
const servers: http.Server[] = [];
afterEach(async () => {
  for (const release of started.splice(0)) release.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A release over a fake RSS: `collect` sets it to `afterCollect`, and counts. */
function releaseWith(config: Partial<MemoryReleaseConfig> = {}, options: { collector?: boolean } = {}) {
  const memory = { rss: 100 * MIB, afterCollect: 60 * MIB };
  const collections: number[] = [];
  const released: MemoryReleased[] = [];
  const lines: Record<string, unknown>[] = [];
  const release = createMemoryRelease({
    config: { enabled: true, idleMs: IDLE_MS, minGrowthPercent: 20, ...config },
    logger: createLogger({
      level: 'debug',
      write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
    }),
    collect:
      options.collector === false
        ? undefined
        : () => {
            collections.push(memory.rss);
            memory.rss = memory.afterCollect;
          },
    memoryUsage: () => ({ rss: memory.rss, heapUsed: memory.rss / 4 }),
    onRelease: (what) => released.push(what),
  });
  started.push(release);
  return { release, memory, collections, released, lines };
}

/** Long enough for several checks past the idle period. */
const idleSpell = () => sleep(IDLE_MS * 4);

describe('the idle-time memory release', () => {
  test('without any work since start, an idle process is never collected, however much it grew', async () => {
    const { release, memory, collections } = releaseWith();
    release.start();
    memory.rss = 500 * MIB;
    await idleSpell();
    expect(collections).toEqual([]);
  });

  test('after work and an idle period: one release; then none while nothing new runs', async () => {
    const { release, memory, collections, released, lines } = releaseWith();
    release.start();
    memory.rss = 300 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toEqual([300 * MIB]);
    expect(released).toEqual([
      expect.objectContaining({ rssBeforeBytes: 300 * MIB, rssAfterBytes: 60 * MIB }),
    ]);
    expect(lines.filter((line) => line.msg === 'memory released after idle')).toEqual([
      expect.objectContaining({ level: 'info', rssBeforeMiB: 300, rssAfterMiB: 60 }),
    ]);

    memory.rss = 400 * MIB;
    await idleSpell();
    await idleSpell();
    expect(collections).toHaveLength(1);
  });

  test('work that keeps coming postpones it: no release until the idle period passes with none', async () => {
    const { release, memory, collections } = releaseWith();
    release.start();
    memory.rss = 300 * MIB;
    for (let step = 0; step < 10; step += 1) {
      release.touch();
      await sleep(IDLE_MS / 4);
      expect(collections).toEqual([]);
    }
    await idleSpell();
    expect(collections).toHaveLength(1);
  });

  test('work in progress (a delivery waiting on the upstream) postpones it; once ended, the release follows', async () => {
    const { release, memory, collections } = releaseWith();
    release.start();
    memory.rss = 300 * MIB;
    release.touch();
    const ended = release.working();
    await idleSpell();
    expect(collections).toEqual([]);
    ended();
    // Ended twice (a finally after a catch): counted once.
    ended();
    await idleSpell();
    expect(collections).toEqual([300 * MIB]);
  });

  test('a request waiting for its answer postpones it; once answered, the release follows', async () => {
    const { release, memory, collections } = releaseWith();
    let answer: (() => void) | undefined;
    const server = http.createServer((_request, response) => {
      answer = () => response.end('done');
    });
    servers.push(server);
    release.watch(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    release.start();
    memory.rss = 300 * MIB;
    release.touch();
    const reply = fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    await idleSpell();
    await idleSpell();
    expect(answer).toBeDefined();
    expect(collections).toEqual([]);

    answer!();
    expect(await (await reply).text()).toBe('done');
    await idleSpell();
    expect(collections).toHaveLength(1);
  });

  test('no release below MEMORY_RELEASE_MIN_GROWTH_PERCENT over the RSS at start, nor until the RSS grew a tenth over what the last one left', async () => {
    const { release, memory, collections } = releaseWith({ minGrowthPercent: 50 });
    release.start();
    // 100 MiB at start: 140 is under 150.
    memory.rss = 140 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toEqual([]);

    memory.rss = 200 * MIB;
    memory.afterCollect = 180 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toEqual([200 * MIB]);

    // Over 150 (start), under 198 (180 and a tenth): not again.
    memory.rss = 190 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toHaveLength(1);

    memory.rss = 199 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toEqual([200 * MIB, 199 * MIB]);
  });

  test('MEMORY_RELEASE_ENABLED=false: disarmed, nothing watched, nothing collected, nothing logged', async () => {
    const { release, memory, collections, lines } = releaseWith({ enabled: false });
    expect(release.armed).toBe(false);
    release.start();
    memory.rss = 500 * MIB;
    release.touch();
    await idleSpell();
    expect(collections).toEqual([]);
    expect(lines).toEqual([]);
  });

  test('without a collector (node started without --expose-gc): disarmed, and says how to arm it once', async () => {
    const { release, lines } = releaseWith({}, { collector: false });
    expect(release.armed).toBe(false);
    release.start();
    release.start();
    release.touch();
    await idleSpell();
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: expect.stringContaining('Start node with --expose-gc') as unknown,
      }),
    ]);
  });
});
