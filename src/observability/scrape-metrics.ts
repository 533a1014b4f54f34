/**
 * The gauges read at each scrape from the parts that hold the numbers (the live transports, the
 * event log, the response and answer caches), registered once those parts are built: the metrics
 * themselves are made first (`metrics.ts`), before any part that reports to them.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AnswerCacheStats } from '../graph/answer-cache.ts';
import type { ResponseCacheStats } from '../upstream/response-cache.ts';
import type { Metrics } from './metrics.ts';
import { NOT_YET, settleWithin } from '../settle-within.ts';

/** One live transport's numbers at a scrape. */
export interface LiveTransportNumbers {
  /** The transport's name (`graphql-ws`, `sse` ...): the `transport` label. */
  readonly transport: string;
  readonly connections: number;
  readonly subscriptions: number;
}

/**
 * What the gauges read at each scrape from the parts that hold the numbers (registered with
 * {@link watchScrapeSources} once those parts are built).
 */
export interface ScrapeSources {
  /** Live numbers per live transport (open connections, running subscriptions). */
  live?: () => readonly LiveTransportNumbers[];
  /** The event log: its length and this replica's lag, per environment. */
  eventLog?: () => Promise<{ environment: string; length: number; lagSeconds: number }[]>;
  /** The upstream response cache's counts; undefined while it is off. */
  responseCache?: () => ResponseCacheStats | undefined;
  /** The answer cache's counts (whole answers of repeated queries). */
  answerCache?: () => AnswerCacheStats | undefined;
  /** How long Redis had been out of reach at `/readyz`'s last check (0 while it answers); with Redis only. */
  redisUnreachableSeconds?: () => number;
}

/** Registers the gauges that read `sources` at each scrape in `metrics`' registry. Once per app. */
export function watchScrapeSources(metrics: Metrics, sources: ScrapeSources): void {
  const registers = [metrics.registry];
  if (sources.responseCache !== undefined) registerResponseCacheMetrics(sources.responseCache, registers);
  if (sources.answerCache !== undefined) registerAnswerCacheMetrics(sources.answerCache, registers);
  if (sources.live !== undefined) {
    const live = sources.live;
    const ofTransport = (name: string) => live().find((numbers) => numbers.transport === name);
    new Gauge({
      name: 'facade_live_connections',
      help: 'Open connections of each live transport (graphql-ws sockets, SSE streams ...).',
      labelNames: ['transport'],
      registers,
      collect() {
        this.reset();
        for (const numbers of live()) this.set({ transport: numbers.transport }, numbers.connections);
      },
    });
    new Gauge({
      name: 'facade_live_subscriptions',
      help: 'Running subscriptions of each live transport.',
      labelNames: ['transport'],
      registers,
      collect() {
        this.reset();
        for (const numbers of live()) this.set({ transport: numbers.transport }, numbers.subscriptions);
      },
    });
    // The graphql-ws figures under their first names, which dashboards and alerts already read.
    new Gauge({
      name: 'facade_graphql_ws_connections',
      help: 'Open graphql-ws connections (facade_live_connections{transport="graphql-ws"}).',
      registers,
      collect() {
        this.set(ofTransport('graphql-ws')?.connections ?? 0);
      },
    });
    new Gauge({
      name: 'facade_graphql_ws_subscriptions',
      help: 'Running graphql-ws subscriptions (facade_live_subscriptions{transport="graphql-ws"}).',
      registers,
      collect() {
        this.set(ofTransport('graphql-ws')?.subscriptions ?? 0);
      },
    });
  }
  if (sources.eventLog !== undefined) registerEventLogMetrics(sources.eventLog, registers);
  const redisUnreachableSeconds = sources.redisUnreachableSeconds;
  if (redisUnreachableSeconds !== undefined) {
    // Above 0 while the replica stays ready within READINESS_REDIS_GRACE_SECONDS: what an operator
    // alerts on before a replica leaves the Service, and sees during every failover.
    new Gauge({
      name: 'facade_readiness_redis_unreachable_seconds',
      help: "How long this replica's Redis had been out of reach without a break when /readyz last checked it (0 while it answers); past READINESS_REDIS_GRACE_SECONDS the replica is not ready.",
      registers,
      collect() {
        this.set(redisUnreachableSeconds());
      },
    });
  }
}

/**
 * How long a scrape waits for the event log's figures. A Redis cut off without a reset connection
 * answers nothing, and ioredis waits for it without end: a scrape that waited too would time out
 * whole, and show nothing of what every other gauge (Redis' readiness among them) says meanwhile.
 */
const EVENT_LOG_SCRAPE_TIMEOUT_MS = 1_000;

/** The event log's length and this replica's lag, per environment, read once per scrape. */
function registerEventLogMetrics(
  eventLog: NonNullable<ScrapeSources['eventLog']>,
  registers: Registry[],
): void {
  // One read of the log per scrape feeds both gauges; none when it does not answer in time (the
  // gauges then leave their series out of the scrape rather than repeat an old figure).
  let reading: ReturnType<typeof eventLog> | undefined;
  const read = () => {
    reading ??= settleWithin(eventLog(), EVENT_LOG_SCRAPE_TIMEOUT_MS)
      .then((figures) => (figures === NOT_YET ? [] : figures))
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };
  new Gauge({
    name: 'facade_event_log_length',
    help: 'Events the event log holds, per environment.',
    labelNames: ['environment'] as const,
    registers,
    async collect() {
      const figures = await read().catch(() => []);
      this.reset();
      for (const stats of figures) this.set({ environment: stats.environment }, stats.length);
    },
  });
  new Gauge({
    name: 'facade_event_log_lag_seconds',
    help: "How far this replica's reading of the event log is behind its head: the age of the oldest event it has not read, 0 when caught up.",
    labelNames: ['environment'] as const,
    registers,
    async collect() {
      const figures = await read().catch(() => []);
      this.reset();
      for (const stats of figures) this.set({ environment: stats.environment }, stats.lagSeconds);
    },
  });
}

/**
 * The response cache's counters and sizes, read from its own counts at each scrape (the cache
 * lives in `src/upstream/`, which knows nothing of Prometheus).
 */
function registerResponseCacheMetrics(
  statsOf: () => ResponseCacheStats | undefined,
  registers: Registry[],
): void {
  registerStatsMetrics(statsOf, registers, {
    counters: [
      [
        'facade_upstream_cache_hits_total',
        'Upstream GETs answered by the response cache (held, or joined in flight).',
        'hits',
      ],
      [
        'facade_upstream_cache_misses_total',
        'Upstream GETs the response cache sent to the upstream.',
        'misses',
      ],
      [
        'facade_upstream_cache_evictions_total',
        'Answers dropped to stay under CACHE_MAX_BYTES.',
        'evictions',
      ],
      [
        'facade_upstream_cache_invalidations_total',
        'Answers dropped, and reads in flight kept from storing, because an event or a write named them.',
        'invalidations',
      ],
      ['facade_upstream_cache_expirations_total', 'Answers past CACHE_MAX_AGE_SECONDS.', 'expirations'],
      [
        'facade_upstream_cache_stale_served_total',
        'Reads answered past their freshness because the upstream failed (CACHE_STALE_IF_ERROR_SECONDS).',
        'staleServed',
      ],
    ],
    gauges: [
      [
        'facade_upstream_cache_bytes',
        'Bytes the response cache holds (bodies, keys and a fixed overhead per answer).',
        'bytes',
      ],
      ['facade_upstream_cache_entries', 'Answers the response cache holds.', 'entries'],
    ],
  });
}

/** The answer cache's counters and sizes, read from its own counts at each scrape. */
function registerAnswerCacheMetrics(
  statsOf: () => AnswerCacheStats | undefined,
  registers: Registry[],
): void {
  registerStatsMetrics(statsOf, registers, {
    counters: [
      [
        'facade_answer_cache_hits_total',
        'HTTP queries answered from a held whole answer, not executed.',
        'hits',
      ],
      [
        'facade_answer_cache_misses_total',
        'HTTP queries that found no current held answer and were executed.',
        'misses',
      ],
      ['facade_answer_cache_kept_total', 'Whole answers kept after their execution.', 'kept'],
    ],
    gauges: [
      [
        'facade_answer_cache_bytes',
        'Bytes the answer cache counts for what it holds (CACHE_ANSWERS_MAX_BYTES bounds it).',
        'bytes',
      ],
    ],
  });
}

/** Counters and gauges read from a component's own counts at each scrape (0 while it is off). */
function registerStatsMetrics<Stats extends object>(
  statsOf: () => Stats | undefined,
  registers: Registry[],
  series: {
    counters: readonly [name: string, help: string, count: keyof Stats][];
    gauges: readonly [name: string, help: string, count: keyof Stats][];
  },
): void {
  const read = (stats: Stats | undefined, count: keyof Stats): number => Number(stats?.[count] ?? 0);
  for (const [name, help, count] of series.counters) {
    new Counter({
      name,
      help,
      registers,
      collect() {
        const stats = statsOf();
        this.reset();
        if (stats !== undefined) this.inc(read(stats, count));
      },
    });
  }
  for (const [name, help, count] of series.gauges) {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(statsOf(), count));
      },
    });
  }
}
