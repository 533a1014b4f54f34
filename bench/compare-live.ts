/**
 * The live rows of `npm run bench:compare`: one event fanned out to many graphql-ws subscribers on
 * this checkout's facade and on the earlier one's, in the same run.
 *
 * Both facades run at once over the same emulator (as `bench:fanout` starts them: `lib/live-facade.ts`),
 * each with `BENCH_COMPARE_LIVE_SUBSCRIBERS` (10,000) subscribers held by the same client processes
 * (`fanout-clients.ts`), every one subscribed to the same `accountChanged` of one account. Memory is
 * read before and after they connect: resident memory and the V8 heap after a full GC, per
 * subscriber. Then rounds in pairs, the order alternating as for the query rows: a round posts
 * `BENCH_COMPARE_LIVE_EVENTS` (5) signed webhooks to one facade, the next once every subscriber of it
 * received the previous; it measures the facade's CPU (from /proc) per delivered event and the
 * event → subscriber latencies. Each ratio (current / earlier) is taken within a pair, the median
 * over the pairs reported; the other facade idles meanwhile, its subscribers connected.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { readMemory } from './lib/facade-memory.ts';
import {
  ACCOUNT_SUBSCRIPTION,
  accountUpdated,
  checkOpenFiles,
  postSigned,
  share,
  sourceAddressesFor,
  startClientProcess,
  startFacade,
  waitForLiveCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { percentile } from './load.ts';
import type { ServiceProcess } from './processes.ts';

const SUBSCRIPTION = ACCOUNT_SUBSCRIPTION;
const CONNECT_CONCURRENCY = 50;
const EVENT_TIMEOUT_MS = 60_000;
/** Pause after every subscriber got an event, so nothing of it still runs when the next is sent. */
const EVENT_GAP_MS = 250;
const KIB = 1024;

const subscribers = positiveIntegerFromEnv('BENCH_COMPARE_LIVE_SUBSCRIBERS', 10_000);
const events = positiveIntegerFromEnv('BENCH_COMPARE_LIVE_EVENTS', 5);
const clientProcesses = positiveIntegerFromEnv('BENCH_COMPARE_LIVE_CLIENT_PROCESSES', 4);

/** One version's facade: a label and its entry point. */
export interface LiveSide {
  label: string;
  script: string;
}

/** What one round of events on one facade measured. */
interface LiveRound {
  cpuUsPerDelivery: number;
  p50Ms: number;
  p99Ms: number;
  received: number;
  expected: number;
}

/** Each version's memory per subscriber, with all of them connected. */
interface LiveMemory {
  rssKibPerSubscriber: number;
  heapKibPerSubscriber: number;
  idleRssMib: number;
  connectedRssMib: number;
}

export interface LiveComparison {
  subscribers: number;
  events: number;
  pairs: { current: LiveRound; earlier: LiveRound }[];
  memory: { current: LiveMemory; earlier: LiveMemory };
  connectFailures: number;
  errors: number;
  duplicates: number;
}

/** The median of `values` (the lower middle one for an even count). */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

/** Runs the live rows: `rounds` pairs of rounds of events, each version's subscribers connected throughout. */
export async function compareLive(
  emulator: ServiceProcess,
  current: LiveSide,
  earlier: LiveSide,
  rounds: number,
): Promise<LiveComparison> {
  await checkOpenFiles(subscribers, Math.ceil(clientProcesses / 2));
  const secret = generateWebhookSecret();
  const sides = [current, earlier];
  const facades: ServiceProcess[] = [];
  const clients: ClientProcess[] = [];
  try {
    for (const [index, side] of sides.entries()) {
      facades.push(
        await startFacade(emulator.url, secret, undefined, `compare-live-${index}:`, index + 1, {
          script: side.script,
        }),
      );
    }
    await sleep(2_000);
    // Resident memory as it is (no GC forced: what a deployment sees), then the heap after a GC.
    const idleRss = await Promise.all(facades.map((facade) => facade.rssBytes()));
    const idle = await Promise.all(facades.map((facade) => readMemory(facade, 'full')));
    for (let index = 0; index < clientProcesses; index += 1) clients.push(startClientProcess());
    const replies = await Promise.all(
      clients.map((client, clientIndex) =>
        client.ask({
          op: 'connect',
          id: 0,
          query: SUBSCRIPTION,
          concurrency: CONNECT_CONCURRENCY,
          sourceAddresses: sourceAddressesFor(subscribers * sides.length),
          groups: sides.map((side, index) => ({
            label: side.label,
            wsUrl: `${facades[index]!.url.replace(/^http/, 'ws')}/graphql`,
            count: share(subscribers, clients.length, clientIndex),
          })),
        }),
      ),
    );
    const connectFailures = replies.reduce(
      (sum, reply) => sum + (reply.op === 'connect' ? reply.failed : 0),
      0,
    );
    for (const facade of facades) {
      await waitForLiveCounts(
        facade,
        (counts) => counts.subscriptions >= subscribers - connectFailures,
        300_000,
      );
    }
    await sleep(2_000);
    const connectedRss = await Promise.all(facades.map((facade) => facade.rssBytes()));
    const connected = await Promise.all(facades.map((facade) => readMemory(facade, 'full')));
    const memoryOf = (index: number): LiveMemory => ({
      rssKibPerSubscriber: (connectedRss[index]! - idleRss[index]!) / KIB / subscribers,
      heapKibPerSubscriber:
        ((connected[index]!.heapUsedBytes ?? Number.NaN) - (idle[index]!.heapUsedBytes ?? Number.NaN)) /
        KIB /
        subscribers,
      idleRssMib: idleRss[index]! / KIB / KIB,
      connectedRssMib: connectedRss[index]! / KIB / KIB,
    });

    const sentAt = new Map<string, { label: string; at: number }>();
    const round = async (index: number, count: number) => {
      const facade = facades[index]!;
      const label = sides[index]!.label;
      const before = await facade.cpuMs();
      const eventIds: string[] = [];
      let received = 0;
      for (let event = 0; event < count; event += 1) {
        const posted = accountUpdated(event);
        sentAt.set(posted.id, { label, at: performance.timeOrigin + performance.now() });
        eventIds.push(posted.id);
        const answer = await postSigned(facade.url, secret, posted);
        if (answer.status !== 200) throw new Error(`the webhook was answered ${answer.status}`);
        const waits = await Promise.all(
          clients.map((client, clientIndex) =>
            client.ask({
              op: 'await-event',
              id: 0,
              eventId: posted.id,
              timeoutMs: EVENT_TIMEOUT_MS,
              expected: share(subscribers, clients.length, clientIndex),
            }),
          ),
        );
        received += waits.reduce((sum, wait) => sum + (wait.op === 'await-event' ? wait.received : 0), 0);
        await sleep(EVENT_GAP_MS);
      }
      const cpuMs = (await facade.cpuMs()) - before;
      return { eventIds, received, cpuMs };
    };
    // One event each first: neither version meets its first event in a measured round.
    await round(0, 1);
    await round(1, 1);
    const measured: {
      current: Awaited<ReturnType<typeof round>>;
      earlier: Awaited<ReturnType<typeof round>>;
    }[] = [];
    for (let pair = 0; pair < rounds; pair += 1) {
      if (pair % 2 === 0) {
        const first = await round(0, events);
        measured.push({ current: first, earlier: await round(1, events) });
      } else {
        const first = await round(1, events);
        measured.push({ current: await round(0, events), earlier: first });
      }
    }

    const reports = await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })));
    const arrivals = new Map<string, number[]>();
    let errors = 0;
    let duplicates = 0;
    for (const report of reports) {
      if (report.op !== 'report') continue;
      errors += report.errors;
      duplicates += report.duplicates;
      for (const [key, times] of Object.entries(report.arrivals)) {
        arrivals.set(key, [...(arrivals.get(key) ?? []), ...times]);
      }
    }
    const roundOf = (measuredRound: Awaited<ReturnType<typeof round>>): LiveRound => {
      const latencies: number[] = [];
      for (const eventId of measuredRound.eventIds) {
        const sent = sentAt.get(eventId)!;
        for (const at of arrivals.get(`${sent.label} ${eventId}`) ?? []) latencies.push(at - sent.at);
      }
      latencies.sort((a, b) => a - b);
      return {
        cpuUsPerDelivery: (measuredRound.cpuMs * 1000) / Math.max(1, measuredRound.received),
        p50Ms: percentile(latencies, 0.5),
        p99Ms: percentile(latencies, 0.99),
        received: measuredRound.received,
        expected: subscribers * events,
      };
    };
    await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 })));
    return {
      subscribers,
      events,
      pairs: measured.map((pair) => ({ current: roundOf(pair.current), earlier: roundOf(pair.earlier) })),
      memory: { current: memoryOf(0), earlier: memoryOf(1) },
      connectFailures,
      errors,
      duplicates,
    };
  } finally {
    for (const client of clients) client.stop();
    await Promise.all(facades.map((facade) => facade.stop()));
  }
}

/** The live rows as markdown, in the form of the query rows' table. */
export function liveMarkdown(comparison: LiveComparison): string[] {
  const f = (value: number, digits = 2) => value.toFixed(digits);
  const { pairs, memory } = comparison;
  const side = (pick: (pair: (typeof pairs)[number]) => LiveRound, of: (round: LiveRound) => number) =>
    median(pairs.map((pair) => of(pick(pair))));
  const ratio = (of: (round: LiveRound) => number) =>
    median(pairs.map((pair) => of(pair.current) / of(pair.earlier)));
  const row = (name: string, of: (round: LiveRound) => number, digits: number) =>
    `| ${name} | ${f(
      side((pair) => pair.current, of),
      digits,
    )} / ${f(
      side((pair) => pair.earlier, of),
      digits,
    )} | ${f(ratio(of))} |`;
  const received = pairs.reduce((sum, pair) => sum + pair.current.received + pair.earlier.received, 0);
  const expected = pairs.reduce((sum, pair) => sum + pair.current.expected + pair.earlier.expected, 0);
  return [
    '',
    `## Live: one event to ${comparison.subscribers} graphql-ws subscribers`,
    '',
    `${pairs.length} pairs of rounds of ${comparison.events} events each, the order alternating; both facades held ` +
      `their subscribers throughout. Delivered ${received} of ${expected}; ${comparison.duplicates} duplicates, ` +
      `${comparison.errors} results with errors, ${comparison.connectFailures} connections failed.`,
    '',
    '| row | current / earlier | ratio |',
    '|---|---|---|',
    row('event → subscriber p50 ms', (round) => round.p50Ms, 0),
    row('event → subscriber p99 ms', (round) => round.p99Ms, 0),
    row('facade CPU µs per delivered event', (round) => round.cpuUsPerDelivery, 1),
    `| resident memory per subscriber, KiB (RSS idle → connected) | ${f(memory.current.rssKibPerSubscriber, 1)} / ${f(memory.earlier.rssKibPerSubscriber, 1)} | ${f(memory.current.rssKibPerSubscriber / memory.earlier.rssKibPerSubscriber)} |`,
    `| V8 heap per subscriber after a full GC, KiB | ${f(memory.current.heapKibPerSubscriber, 1)} / ${f(memory.earlier.heapKibPerSubscriber, 1)} | ${f(memory.current.heapKibPerSubscriber / memory.earlier.heapKibPerSubscriber)} |`,
    `| RSS idle → connected, MiB | ${f(memory.current.idleRssMib, 0)} → ${f(memory.current.connectedRssMib, 0)} / ${f(memory.earlier.idleRssMib, 0)} → ${f(memory.earlier.connectedRssMib, 0)} | |`,
    '',
  ];
}
