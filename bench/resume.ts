/**
 * `npm run bench:resume`: 1,000 subscribers resuming from a cursor 100 events back, against the same
 * subscribers receiving the same 100 events live, in the same run; and the event log's memory at
 * its retention, in memory and in Redis.
 *
 * Resume: the facade (one, in-memory log) logs one event, whose cursor a sentinel subscriber reads,
 * then 100 more; 1,000 real graphql-ws subscribers (in `fanout-clients.ts` child processes) then
 * subscribe with `after` set to that cursor, and the time from their first connection to the last
 * of them holding all 100 is measured, with the upstream GETs made meanwhile. Live: the same 1,000
 * subscribe without `after`, then 100 events are posted one after another (each once acknowledged)
 * and the time from the first post to the last subscriber holding all 100 is measured.
 *
 * Memory: `EVENT_LOG_RETENTION` (10,000) events of a realistic size appended to the memory log in
 * this process (heap growth after a full GC; run with `--expose-gc`) and to a Redis stream of a
 * throw-away redis-server (`MEMORY USAGE` of the stream).
 *
 * Options (environment): BENCH_RESUME_SUBSCRIBERS (1000), BENCH_RESUME_EVENTS (100),
 * BENCH_RESUME_RETENTION (10000), BENCH_FANOUT_CLIENT_PROCESSES (2). The report is printed with the
 * machine's load average before and after.
 */
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import {
  ACCOUNT_ID,
  CUSTOMER_ID,
  accountUpdated,
  postSigned,
  share,
  startClientProcess,
  startFacade,
  upstreamRequests,
  waitForLiveCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { startEmulatorService, type ServiceProcess } from './processes.ts';
import { startRedisServer } from '../scripts/redis-server.ts';
import { createMemoryEventLog } from '../src/events/log/memory-event-log.ts';
import { createLogger } from '../src/logger.ts';

const subscribers = positiveIntegerFromEnv('BENCH_RESUME_SUBSCRIBERS', 1000);
const eventCount = positiveIntegerFromEnv('BENCH_RESUME_EVENTS', 100);
const retention = positiveIntegerFromEnv('BENCH_RESUME_RETENTION', 10_000);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);
const MIB = 1024 * 1024;
const now = (): number => performance.timeOrigin + performance.now();

const selection = 'eventId cursor type occurredAt account { id status balances { currency available } }';
const subscription = (after?: string): string =>
  `subscription { accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}"${
    after === undefined ? '' : `, after: "${after}"`
  }) { ${selection} } }`;

interface Delivery {
  seconds: number;
  received: number;
  expected: number;
  duplicates: number;
  errors: number;
  firstError?: string;
  upstreamGets: number;
  facadeCpuMs: number;
}

async function main(): Promise<void> {
  const loadAverageBefore = loadavg();
  const emulator = await startEmulatorService();
  const secret = generateWebhookSecret();
  let resumed: Delivery;
  let live: Delivery;
  try {
    const facade = await startFacade(emulator.url, secret, undefined, 'bench-resume:', 1);
    try {
      const behind = await logEventsBehind(facade, secret);
      resumed = await deliver(
        facade,
        emulator,
        subscription(behind.cursor),
        behind.after,
        async () => undefined,
      );
      const liveEvents = Array.from({ length: eventCount }, (_, index) => accountUpdated(index));
      live = await deliver(
        facade,
        emulator,
        subscription(),
        liveEvents.map((event) => event.id),
        async () => {
          for (const event of liveEvents) await postSigned(facade.url, secret, event);
        },
      );
    } finally {
      await facade.stop();
    }
  } finally {
    await emulator.stop();
  }
  const memory = await logMemory();
  const report = {
    loadAverageBefore: loadAverageBefore.map((value) => value.toFixed(2)).join(', '),
    loadAverageAfter: loadavg()
      .map((value) => value.toFixed(2))
      .join(', '),
    subscribers,
    events: eventCount,
    resumed,
    live,
    memory,
  };
  console.log(JSON.stringify(report, null, 2));
  console.log(
    `\n${subscribers} subscribers, ${eventCount} events: resumed from a cursor in ${resumed.seconds.toFixed(2)} s ` +
      `(${resumed.upstreamGets} upstream GETs, ${resumed.received}/${resumed.expected} delivered, ${resumed.duplicates} duplicates), ` +
      `live in ${live.seconds.toFixed(2)} s (${live.upstreamGets} GETs, ${live.received}/${live.expected}); ` +
      `ratio resumed/live ${(resumed.seconds / live.seconds).toFixed(2)}.` +
      `\nLog of ${retention} events: memory ${(memory.memoryLogBytes / MIB).toFixed(1)} MiB of heap, ` +
      `Redis stream ${(memory.redisStreamBytes / MIB).toFixed(1)} MiB (MEMORY USAGE), one event message ${memory.messageBytes} bytes.` +
      `\nLoad average before ${report.loadAverageBefore}, after ${report.loadAverageAfter}.`,
  );
}

/**
 * Logs one event and reads its cursor through a sentinel subscriber, then logs `eventCount` more
 * (the sentinel receives them all). Returns the cursor and the ids logged after it.
 */
async function logEventsBehind(
  facade: ServiceProcess,
  secret: string,
): Promise<{ cursor: string; after: string[] }> {
  const received: { eventId: string; cursor: string }[] = [];
  const client = createClient({
    url: `${facade.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
  });
  client.subscribe(
    { query: subscription() },
    {
      next: (result) => {
        const event = (result.data as { accountChanged?: { eventId: string; cursor: string } } | undefined)
          ?.accountChanged;
        if (event !== undefined) received.push(event);
      },
      error: () => undefined,
      complete: () => undefined,
    },
  );
  await waitForLiveCounts(facade, (counts) => counts.subscriptions >= 1, 30_000);
  const first = accountUpdated(0);
  await postSigned(facade.url, secret, first);
  await until(() => received.length === 1);
  const ids: string[] = [];
  for (let index = 0; index < eventCount; index += 1) {
    const event = accountUpdated(index + 1);
    ids.push(event.id);
    await postSigned(facade.url, secret, event);
  }
  await until(() => received.length === eventCount + 1);
  await client.dispose();
  return { cursor: received[0]!.cursor, after: ids };
}

/** Connects the subscribers with `query`, runs `send`, and measures until each holds every one of `ids`. */
async function deliver(
  facade: ServiceProcess,
  emulator: ServiceProcess,
  query: string,
  ids: string[],
  send: () => Promise<void>,
): Promise<Delivery> {
  const clients: ClientProcess[] = Array.from({ length: clientProcesses }, () => startClientProcess());
  try {
    const gets = await upstreamRequests(emulator);
    const cpu = await facade.cpuMs();
    const started = now();
    await Promise.all(
      clients.map((client, index) =>
        client.ask({
          op: 'connect',
          id: 0,
          query,
          concurrency: 50,
          groups: [
            {
              label: 'replica 1',
              wsUrl: `${facade.url.replace(/^http/, 'ws')}/graphql`,
              count: share(subscribers, clients.length, index),
            },
          ],
        }),
      ),
    );
    // Live subscribers must listen before the events are sent; resuming ones are already receiving.
    await waitForLiveCounts(facade, (counts) => counts.subscriptions >= subscribers, 120_000);
    const sendStarted = now();
    await send();
    for (const id of ids) {
      await Promise.all(
        clients.map((client) => client.ask({ op: 'await-event', id: 0, eventId: id, timeoutMs: 120_000 })),
      );
    }
    const ended = now();
    const facadeCpuMs = (await facade.cpuMs()) - cpu;
    const upstreamGets = (await upstreamRequests(emulator)) - gets;
    let received = 0;
    let duplicates = 0;
    let errors = 0;
    let firstError: string | undefined;
    for (const reply of await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })))) {
      if (reply.op !== 'report') continue;
      duplicates += reply.duplicates;
      errors += reply.errors;
      firstError ??= reply.firstError;
      for (const id of ids) received += reply.arrivals[`replica 1 ${id}`]?.length ?? 0;
    }
    await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
    await waitForLiveCounts(facade, (counts) => counts.connections === 0, 30_000);
    // Resuming: from the first connection (the replay starts with each subscription); live: from the first post.
    const from = query.includes('after:') ? started : sendStarted;
    return {
      seconds: (ended - from) / 1000,
      received,
      expected: subscribers * ids.length,
      duplicates,
      errors,
      ...(firstError === undefined ? {} : { firstError }),
      upstreamGets,
      facadeCpuMs,
    };
  } finally {
    for (const client of clients) client.stop();
  }
}

/** The log's size at its retention: heap in this process (memory log), MEMORY USAGE in Redis. */
async function logMemory(): Promise<{
  memoryLogBytes: number;
  redisStreamBytes: number;
  messageBytes: number;
}> {
  // An event as the upstream sends it: the account record it carries is most of its size.
  const account = {
    id: ACCOUNT_ID,
    customerId: CUSTOMER_ID,
    type: 'wallet',
    status: 'active',
    currency: 'USDC',
    network: 'ethereum',
    address: '0x52908400098527886E0F7030069857D2E4169EE7',
    balances: [{ currency: 'USDC', available: '12500.00', pending: '0.00', total: '12500.00' }],
    fees: { breakdown: { developer: { bips: 25 }, platform: { bips: 10 } } },
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: new Date().toISOString(),
  };
  const event = (index: number) => ({
    ...accountUpdated(index),
    data: { customerId: CUSTOMER_ID, resourceType: 'account', resourceId: ACCOUNT_ID, object: account },
  });
  const messageBytes = Buffer.byteLength(JSON.stringify(event(0)));

  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const log = createMemoryEventLog({
    logger: createLogger({ level: 'silent' }),
    retention: { events: retention },
  });
  // Parsed events, as the webhook route hands them over: each its own objects.
  for (let index = 0; index < retention; index += 1) {
    await log.append(JSON.parse(JSON.stringify(event(index))) as Parameters<typeof log.append>[0]);
  }
  await sleep(50);
  gc?.();
  const memoryLogBytes = process.memoryUsage().heapUsed - before;
  await log.close();

  const redis = await startRedisServer();
  const { Redis } = await import('ioredis');
  const client = new Redis(redis.url);
  try {
    const key = 'bench:events:log:sandbox';
    for (let offset = 0; offset < retention; offset += 500) {
      const batch = client.pipeline();
      for (let index = offset; index < Math.min(retention, offset + 500); index += 1) {
        batch.xadd(key, 'MAXLEN', '~', retention, '*', 'm', JSON.stringify(event(index)));
      }
      await batch.exec();
    }
    const redisStreamBytes = Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    return { memoryLogBytes, redisStreamBytes, messageBytes };
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

async function until(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}

await main();
