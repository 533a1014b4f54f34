/**
 * Gives resident memory back once the process turns idle after a burst of work.
 *
 * Why it is needed: after a burst (10,000 subscribers receiving events, then leaving) the heap's
 * objects die but the process keeps its size. An ordinary GC frees objects, not pages: V8 keeps
 * the freed pages for reuse, and only a memory-reducing collection gives them back to the system.
 * V8's memory reducer, whose job that is when a process turns idle, never starts in Node 24 (it
 * reads Node's allocation rate of 0 as "still busy"), so a facade would otherwise hold its peak
 * until restarted (bench/README.md, "Memory after a storm of subscribers").
 *
 * What it does: when nothing has run for `idleMs` (no operation started or ended on any transport,
 * no event delivered or being delivered, no subscription's stream opening, no live query executing,
 * no HTTP request waiting for its answer, the event loop all but idle) after
 * some work, and the RSS has grown by at least `minGrowthPercent` over the RSS at start and by a
 * tenth over the RSS the last release left, it runs ONE memory-reducing collection
 * (`gc({ flavor: 'last-resort' })`). That stops the world for the time a full collection takes,
 * which is why it waits until nobody waits on the process. Whatever the outcome, the idle spell is
 * then spent: nothing is tried again until new work has run and stopped again, so an idle process
 * is never collected in a loop, and a process whose memory is simply in use is not collected again
 * until it has grown again.
 *
 * The collector is V8's gc extension, which exists only when node was started with `--expose-gc`
 * (npm start, the image's CMD and compose.yaml do; `NODE_OPTIONS=--expose-gc` also works). Without
 * it the release logs once that it cannot run and does nothing. Changing V8's flags after start
 * (`v8.setFlagsFromString`) is undefined behaviour in Node's documentation, so it is not used here.
 */
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger.ts';

export interface MemoryReleaseConfig {
  /** `MEMORY_RELEASE_ENABLED`: whether an idle process gives memory back at all. */
  enabled: boolean;
  /** `MEMORY_RELEASE_IDLE_MS`: how long nothing must run before a release. */
  idleMs: number;
  /** `MEMORY_RELEASE_MIN_GROWTH_PERCENT`: RSS growth over the RSS at start that makes a release worth it. */
  minGrowthPercent: number;
}

/** What one release did, as its log line and the metrics tell it. */
export interface MemoryReleased {
  readonly rssBeforeBytes: number;
  readonly rssAfterBytes: number;
  readonly heapUsedBeforeBytes: number;
  readonly heapUsedAfterBytes: number;
  /** How long the world stood still. */
  readonly pauseMs: number;
}

export interface MemoryReleaseOptions {
  config: MemoryReleaseConfig;
  logger: Logger;
  /** Told of each release (metrics). */
  onRelease?: (released: MemoryReleased) => void;
  /**
   * The memory-reducing collection; default V8's gc extension when node runs with `--expose-gc`,
   * else none (the release then cannot run).
   */
  collect?: (() => void) | undefined;
  /** Default `process.memoryUsage()`. */
  memoryUsage?: () => Pick<NodeJS.MemoryUsage, 'rss' | 'heapUsed'>;
}

export interface MemoryRelease {
  /** Whether a release can happen: enabled, and a collector exists. */
  readonly armed: boolean;
  /** Work ran (an operation started or ended, an event was delivered): idleness starts again. */
  touch(): void;
  /**
   * Work began that somebody waits on and that no HTTP answer stands for (a subscription's stream
   * opening, an event's delivery to a subscriber, a live query's execution, reading the upstream):
   * no release until the returned function is called.
   */
  working(): () => void;
  /**
   * Counts `server`'s requests whose answer has not begun as work in flight: a query waiting on the
   * upstream, a webhook being received. A stream that has sent its head (SSE, multipart) waits for
   * nothing, and a probe answered at once is never seen.
   */
  watch(server: http.Server): void;
  /** Starts watching for idleness; the RSS now is the one growth is measured from. */
  start(): void;
  /** Stops watching. */
  close(): void;
}

/** A check during which the event loop ran more than this share of the time was not idle. */
const BUSY_LOOP_UTILIZATION = 0.1;
/** After a release, RSS must grow by this share over what it left before the next one. */
const REGROWTH = 0.1;

/** V8's gc extension, present only with `--expose-gc`. */
type GcExtension = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** The memory-reducing collection, when node was started with `--expose-gc`; else undefined. */
function exposedCollector(): (() => void) | undefined {
  const gc = (globalThis as { gc?: GcExtension }).gc;
  if (typeof gc !== 'function') return undefined;
  // `last-resort`: V8's memory-reducing full collection (CollectAllAvailableGarbage), which also
  // gives the freed pages back; a plain `gc()` would keep them.
  return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
}

export function createMemoryRelease(options: MemoryReleaseOptions): MemoryRelease {
  const { config, logger } = options;
  const collect = 'collect' in options ? options.collect : exposedCollector();
  const memoryUsage = options.memoryUsage ?? (() => process.memoryUsage());
  const armed = config.enabled && collect !== undefined;
  // Checked a few times per idle period, at most once a second: a check reads two numbers.
  const checkEveryMs = Math.max(50, Math.min(1_000, Math.floor(config.idleMs / 5)));

  let touched = 0;
  let seenTouched = 0;
  /** Work ran since the last release was considered: the next idle spell is worth a look. */
  let workSinceLastLook = false;
  let quietSince = performance.now();
  let loop = performance.eventLoopUtilization();
  let startRss = 0;
  let lastReleasedRss = 0;
  let timer: NodeJS.Timeout | undefined;
  let startedOnce = false;
  /** Work begun through `working()` and not yet ended. */
  let inProgress = 0;
  const openAnswers = new Set<http.ServerResponse>();
  const answerWaiting = (): boolean => {
    for (const answer of openAnswers) if (!answer.headersSent) return true;
    return false;
  };

  const check = (): void => {
    const now = performance.now();
    const current = performance.eventLoopUtilization();
    const busyLoop = performance.eventLoopUtilization(current, loop).utilization > BUSY_LOOP_UTILIZATION;
    loop = current;
    // Only operations and deliveries count as work worth releasing after; a busy loop (a scrape, a
    // reconciliation) or a request waiting for its answer only postpones the release.
    const worked = touched !== seenTouched;
    if (worked || busyLoop || inProgress > 0 || answerWaiting()) {
      seenTouched = touched;
      if (worked) workSinceLastLook = true;
      quietSince = now;
      return;
    }
    if (!workSinceLastLook || now - quietSince < config.idleMs) return;
    // This idle spell is spent, released or not: only new work makes the next one worth a look.
    workSinceLastLook = false;
    const before = memoryUsage();
    const grown =
      before.rss >= startRss * (1 + config.minGrowthPercent / 100) &&
      before.rss >= lastReleasedRss * (1 + REGROWTH);
    if (!grown) return;
    const startedAt = performance.now();
    collect!();
    const pauseMs = performance.now() - startedAt;
    const after = memoryUsage();
    lastReleasedRss = after.rss;
    // The loop's own share of the pause is not work: the next check starts from here.
    loop = performance.eventLoopUtilization();
    const released: MemoryReleased = {
      rssBeforeBytes: before.rss,
      rssAfterBytes: after.rss,
      heapUsedBeforeBytes: before.heapUsed,
      heapUsedAfterBytes: after.heapUsed,
      pauseMs: Math.round(pauseMs * 10) / 10,
    };
    logger.info('memory released after idle', {
      idleMs: Math.round(now - quietSince),
      rssBeforeMiB: mebibytes(released.rssBeforeBytes),
      rssAfterMiB: mebibytes(released.rssAfterBytes),
      heapUsedBeforeMiB: mebibytes(released.heapUsedBeforeBytes),
      heapUsedAfterMiB: mebibytes(released.heapUsedAfterBytes),
      pauseMs: released.pauseMs,
    });
    options.onRelease?.(released);
  };

  return {
    armed,
    touch() {
      touched += 1;
    },
    working() {
      // Only postpones: work worth releasing after is told by `touch` (a live query's periodic
      // rerun is not, so reruns more often than the idle period do not keep the release away).
      inProgress += 1;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        inProgress -= 1;
      };
    },
    watch(server) {
      // Nothing is tracked per request while the release cannot run.
      if (!armed) return;
      server.on('request', (_request: http.IncomingMessage, answer: http.ServerResponse) => {
        openAnswers.add(answer);
        answer.once('close', () => openAnswers.delete(answer));
      });
    },
    start() {
      if (!config.enabled || startedOnce) return;
      startedOnce = true;
      if (collect === undefined) {
        logger.warn(
          'memory release is on but node was started without --expose-gc: memory freed after a burst stays ' +
            'resident until restart. Start node with --expose-gc (npm start and the image do), or set ' +
            'MEMORY_RELEASE_ENABLED=false to silence this.',
        );
        return;
      }
      startRss = memoryUsage().rss;
      quietSince = performance.now();
      loop = performance.eventLoopUtilization();
      // unref: an idle facade waiting to release never keeps the process alive on its own.
      timer = setInterval(check, checkEveryMs).unref();
    },
    close() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

function mebibytes(bytes: number): number {
  return Math.round((bytes / 2 ** 20) * 10) / 10;
}
