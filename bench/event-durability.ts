/**
 * `npm run bench:durability`: what a webhook's durability costs, and what a Redis failover costs, on
 * a primary, its replicas and three Sentinels (scripts/redis-sentinel.ts, AOF everysec).
 *
 * 1. Intake. Signed webhooks through the real route and the event pipeline's own Redis stores
 *    (`createWebhookRouter`, `createEventStores`), `BENCH_CONCURRENCY` senders for `BENCH_SECONDS`
 *    per round, with `REDIS_MIN_REPLICAS_ACK=0` (the primary's answer alone) against `=1` (a WAIT
 *    for the replica, and the log's readers holding each batch until it is held): rounds alternate
 *    the order, `BENCH_ROUNDS` pairs. Reported: acknowledged webhooks per second, p50/p99 of the
 *    answer and of the delivery to a listener of the log, medians over the rounds, ratios (1 / 0).
 * 2. Failover. A steady `BENCH_FAILOVER_RATE` webhooks per second, each retried until it is
 *    acknowledged (after 250 ms, doubling up to 2 s: the platform's backoff, quicker), the primary
 *    killed mid-stream: the time to the
 *    promotion, to the first acknowledgement after the kill, the answers by status meanwhile, and
 *    the events lost or delivered twice to the listener. Once with one replica (the old primary
 *    started again as a replica once the promotion is seen, as an orchestrator restarts it) and
 *    once with two (one is left after the promotion).
 *
 * Everything runs in this process but Redis; the load average is printed with the figures.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { readEventsConfig } from '../src/events/config.ts';
import { createEventStores } from '../src/events/event-stores.ts';
import type { PlatformEvent } from '../src/events/event-types.ts';
import { createWebhookRouter } from '../src/events/receiving/webhook-route.ts';
import { createLogger } from '../src/logger.ts';
import { startRedisSentinel, type RedisSentinelTopology } from '../scripts/redis-sentinel.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { postSigned } from './lib/live-facade.ts';

const SECONDS = positiveIntegerFromEnv('BENCH_SECONDS', 3);
const ROUNDS = positiveIntegerFromEnv('BENCH_ROUNDS', 2);
const CONCURRENCY = positiveIntegerFromEnv('BENCH_CONCURRENCY', 16);
const FAILOVER_RATE = positiveIntegerFromEnv('BENCH_FAILOVER_RATE', 100);
const secret = generateWebhookSecret();
let sequence = 0;

/** A pipeline like a facade's: the webhook route on a port of its own, over the configured stores. */
interface Pipeline {
  /** Where the route is mounted under `/webhooks/platform`, as on a facade. */
  baseUrl: string;
  /** When each event reached the log's listener, by id; a second arrival is counted. */
  delivered: Map<string, number>;
  duplicates: number;
  close(): Promise<void>;
}

async function startPipeline(redis: RedisSentinelTopology, replicasToAck: number): Promise<Pipeline> {
  const logger = createLogger({ level: 'silent' });
  const config = readEventsConfig(
    {
      ...redis.env(),
      REDIS_KEY_PREFIX: `bench-${String(Date.now())}-${String(replicasToAck)}:`,
      REDIS_MIN_REPLICAS_ACK: String(replicasToAck),
      WEBHOOK_SECRETS: secret,
    },
    (name, problem) => {
      throw new Error(`${name}: ${problem}`);
    },
  );
  const stores = createEventStores(config, logger, undefined);
  const delivered = new Map<string, number>();
  const pipeline = { delivered, duplicates: 0 };
  const subscription = await stores.log.subscribe('sandbox', ({ event }) => {
    if (delivered.has(event.id)) pipeline.duplicates += 1;
    else delivered.set(event.id, performance.now());
  });
  const webhooks = createWebhookRouter({ secrets: () => [secret], ...stores, logger });
  const app = express();
  app.use('/webhooks/platform', webhooks.router);
  const server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(pipeline, {
    baseUrl: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    async close() {
      subscription.stop();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await stores.dedup.close();
      await stores.log.close();
      await stores.closeRedis?.();
    },
  });
}

function nextEvent(): PlatformEvent {
  sequence += 1;
  return {
    id: `evt_bench_${String(process.pid)}_${String(sequence)}`,
    type: 'account.updated',
    occurredAt: new Date().toISOString(),
    environment: 'sandbox',
    data: {
      customerId: 'cus_bench',
      resourceType: 'account',
      resourceId: 'acc_bench',
      object: { id: 'acc_bench' },
    },
  };
}

/** One signed delivery of `event` to `pipeline`; its status (0 when it failed without one). */
async function post(pipeline: Pipeline, event: PlatformEvent): Promise<number> {
  try {
    return (await postSigned(pipeline.baseUrl, secret, event)).status;
  } catch {
    return 0;
  }
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const median = (values: number[]): number => percentile(values, 50);
const round1 = (value: number): number => Math.round(value * 10) / 10;

interface IntakeRound {
  perSecond: number;
  answerP50: number;
  answerP99: number;
  deliveryP50: number;
  deliveryP99: number;
  refused: number;
}

/** `CONCURRENCY` senders for `SECONDS`, each posting new events one after the other. */
async function intakeRound(redis: RedisSentinelTopology, replicasToAck: number): Promise<IntakeRound> {
  const pipeline = await startPipeline(redis, replicasToAck);
  const answers: number[] = [];
  const sentAt = new Map<string, number>();
  let refused = 0;
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        const event = nextEvent();
        const started = performance.now();
        sentAt.set(event.id, started);
        const status = await post(pipeline, event);
        if (status === 200) answers.push(performance.now() - started);
        else refused += 1;
      }
    }),
  );
  await sleep(500);
  const deliveries = [...pipeline.delivered].map(([id, at]) => at - (sentAt.get(id) ?? at));
  await pipeline.close();
  return {
    perSecond: answers.length / SECONDS,
    answerP50: percentile(answers, 50),
    answerP99: percentile(answers, 99),
    deliveryP50: percentile(deliveries, 50),
    deliveryP99: percentile(deliveries, 99),
    refused,
  };
}

async function measureIntake(): Promise<void> {
  const redis = await startRedisSentinel();
  try {
    const rounds: Record<0 | 1, IntakeRound[]> = { 0: [], 1: [] };
    // A warm-up round, not counted: the first round otherwise pays for compiling and connecting.
    await intakeRound(redis, 1);
    for (let pair = 0; pair < ROUNDS; pair += 1) {
      for (const acks of pair % 2 === 0 ? ([0, 1] as const) : ([1, 0] as const)) {
        rounds[acks].push(await intakeRound(redis, acks));
      }
    }
    const summary = (acks: 0 | 1) => {
      const of = (key: keyof IntakeRound): number => round1(median(rounds[acks].map((r) => r[key])));
      return {
        REDIS_MIN_REPLICAS_ACK: acks,
        acknowledgedPerSecond: of('perSecond'),
        answerP50Ms: of('answerP50'),
        answerP99Ms: of('answerP99'),
        deliveryP50Ms: of('deliveryP50'),
        deliveryP99Ms: of('deliveryP99'),
        refused: rounds[acks].reduce((sum, r) => sum + r.refused, 0),
      };
    };
    const [without, withAck] = [summary(0), summary(1)];
    const ratio = (key: keyof typeof without): number =>
      Math.round((withAck[key] / without[key]) * 100) / 100;
    console.log(
      JSON.stringify(
        { intake: { concurrency: CONCURRENCY, secondsPerRound: SECONDS, pairs: ROUNDS, without, withAck } },
        null,
        2,
      ),
    );
    console.log(
      JSON.stringify({
        ratiosAckOneOverZero: {
          throughput: ratio('acknowledgedPerSecond'),
          answerP50: ratio('answerP50Ms'),
          answerP99: ratio('answerP99Ms'),
          deliveryP50: ratio('deliveryP50Ms'),
          deliveryP99: ratio('deliveryP99Ms'),
        },
        loadAverage: loadavg().map(round1),
      }),
    );
  } finally {
    await redis.stop();
  }
}

/** A steady stream of webhooks, each retried until acknowledged, with the primary killed in the middle. */
async function measureFailover(replicas: number): Promise<void> {
  const redis = await startRedisSentinel({ replicas });
  const pipeline = await startPipeline(redis, 1);
  const statuses = new Map<number, number>();
  const acknowledged = new Set<string>();
  let killedAt = Number.POSITIVE_INFINITY;
  let firstAckAfterKill: number | undefined;
  let slowestAcknowledgementMs = 0;
  const deliverOne = async (event: PlatformEvent): Promise<void> => {
    const started = performance.now();
    let retries = 0;
    for (;;) {
      const attempt = performance.now();
      const status = await post(pipeline, event);
      const at = performance.now();
      if (at >= killedAt) statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status === 200) {
        acknowledged.add(event.id);
        // Written again: an attempt made after the kill, acknowledged.
        if (attempt >= killedAt) firstAckAfterKill ??= at - killedAt;
        slowestAcknowledgementMs = Math.max(slowestAcknowledgementMs, at - started);
        return;
      }
      // The platform's backoff, quicker: 250 ms, doubling, at most 2 s.
      await sleep(Math.min(2_000, 250 * 2 ** retries));
      retries += 1;
    }
  };
  try {
    const streams: Promise<void>[] = [];
    const stopAt = performance.now() + 12_000;
    const sender = (async () => {
      while (performance.now() < stopAt) {
        streams.push(deliverOne(nextEvent()));
        await sleep(1000 / FAILOVER_RATE);
      }
    })();
    await sleep(3_000);
    const killed = await redis.killPrimary();
    killedAt = performance.now();
    const promoted = await redis.waitForPromotion(killed);
    const promotionMs = performance.now() - killedAt;
    if (replicas === 1) await redis.restartNode(killed.port);
    await sender;
    await Promise.all(streams);
    await sleep(1_000);
    const lost = [...acknowledged].filter((id) => !pipeline.delivered.has(id)).length;
    console.log(
      JSON.stringify({
        failover: {
          replicas,
          ratePerSecond: FAILOVER_RATE,
          promotionMs: Math.round(promotionMs),
          sentinelsSawPromotionAfterMs: promoted.elapsedMs,
          firstAcknowledgementAfterKillMs:
            firstAckAfterKill === undefined ? null : Math.round(firstAckAfterKill),
          slowestAcknowledgementMs: Math.round(slowestAcknowledgementMs),
          answersAfterKillByStatus: Object.fromEntries(statuses),
          acknowledged: acknowledged.size,
          lost,
          deliveredTwice: pipeline.duplicates,
        },
        loadAverage: loadavg().map(round1),
      }),
    );
  } finally {
    await pipeline.close();
    await redis.stop();
  }
}

console.log(JSON.stringify({ loadAverageAtStart: loadavg().map(round1) }));
await measureIntake();
await measureFailover(1);
await measureFailover(2);
