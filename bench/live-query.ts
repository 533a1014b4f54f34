/**
 * `npm run bench:live-query`: what a `@live` dashboard costs against the two ways a frontend would
 * otherwise keep it current, in one run on one machine.
 *
 * Three facades, one after the other, against one emulator (separate processes on loopback, the
 * production configuration with its response cache, no reconciler so nothing else reads):
 * - **subscription**: `LIVE_CLIENTS` graphql-ws subscribers of `accountChanged` (the fan-out
 *   bench's document), one signed `account.updated` webhook: the baseline event → client p99 at
 *   that many clients, and the memory per subscriber.
 * - **live query**: `LIVE_CLIENTS` graphql-ws clients watching one customer's dashboard with
 *   `query @live`; one top-up at the emulator, then its signed webhook: the upstream GETs it
 *   caused (goal: the dashboard's reads once), the time from the webhook's acknowledgement to each
 *   client's new result (p50/p99), the memory per watcher, and the facade's CPU over a window of
 *   `BENCH_LIVE_WINDOW_SECONDS`.
 * - **polling**: the same number of clients polling the same dashboard over HTTP every second for
 *   the same window, with the same top-up and webhook in it: upstream GETs and the facade's CPU.
 *
 * Latencies are given from the webhook's acknowledgement and from its send: a subscription's event
 * is published before the acknowledgement, so its clients may have it before the ack arrives
 * (negative times from the ack), while a live query reads the upstream after the event's
 * invalidation; the ratio is taken from the send, where both start.
 *
 * Memory: the facade's V8 heap after a full GC (the facade runs with `--expose-gc` and the memory
 * probe) with every client idle, minus the same reading before any client, per client.
 *
 * Options (environment): BENCH_LIVE_CLIENTS (1000), BENCH_LIVE_WINDOW_SECONDS (10),
 * BENCH_FANOUT_CLIENT_PROCESSES (2). The report is printed and written to bench/results/
 * (`live-query-latest.json`).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { positiveIntegerFromEnv } from './env.ts';
import {
  ACCOUNT_ID,
  accountUpdated,
  CUSTOMER_ID,
  postSigned,
  root,
  share,
  startClientProcess,
  startFacade,
  topUp,
  upstreamRequests,
  waitForLiveCounts,
  type ClientProcess,
} from './lib/live-facade.ts';
import { percentile } from './load.ts';
import { askMemoryUsage } from './memory-probe-protocol.ts';
import { startEmulatorService, type ServiceProcess } from './processes.ts';

const clientsWanted = positiveIntegerFromEnv('BENCH_LIVE_CLIENTS', 1000);
const windowSeconds = positiveIntegerFromEnv('BENCH_LIVE_WINDOW_SECONDS', 10);
const clientProcesses = positiveIntegerFromEnv('BENCH_FANOUT_CLIENT_PROCESSES', 2);
// Nothing but the clients and the webhook reads the upstream while measured.
process.env.RECONCILE_INTERVAL_SECONDS = '0';

/** The fan-out bench's subscription: its event reads the account. */
const SUBSCRIPTION = `subscription {
  accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}") {
    eventId type occurredAt account { id status balances { currency available } }
  }
}`;

/** The example app's dashboard, live: the customer and its accounts with their balances. */
const DASHBOARD = `query Dashboard @live {
  customer(id: "${CUSTOMER_ID}") {
    id displayName type
    accounts(first: 10) {
      edges { cursor node { id customerId label type network currency balances { currency available pending } updatedAt } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

const now = (): number => performance.timeOrigin + performance.now();
const secret = generateWebhookSecret();

interface Latency {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  received: number;
}

function latencyOf(arrivals: number[], from: number): Latency {
  const sorted = arrivals.map((at) => at - from).sort((a, b) => a - b);
  return {
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1) ?? Number.NaN,
    received: sorted.length,
  };
}

async function heapAfterGc(facade: ServiceProcess): Promise<number> {
  const probe = await askMemoryUsage(facade.child, 'full');
  return probe?.usage.heapUsed ?? Number.NaN;
}

async function connectClients(facade: ServiceProcess, query: string): Promise<ClientProcess[]> {
  const clients = Array.from({ length: clientProcesses }, () => startClientProcess());
  const wsUrl = facade.url.replace(/^http/, 'ws') + '/graphql';
  const replies = await Promise.all(
    clients.map((client, index) =>
      client.ask({
        op: 'connect',
        id: 0,
        groups: [{ label: 'facade', wsUrl, count: share(clientsWanted, clientProcesses, index) }],
        query,
        concurrency: 50,
      }),
    ),
  );
  const failed = replies.reduce((sum, reply) => sum + (reply.op === 'connect' ? reply.failed : 0), 0);
  if (failed > 0) console.warn(`  ${failed} clients failed to connect`, replies);
  await waitForLiveCounts(facade, (counts) => counts.subscriptions >= clientsWanted - failed, 120_000);
  return clients;
}

async function awaitAll(clients: ClientProcess[], eventId: string): Promise<number> {
  const replies = await Promise.all(
    clients.map((client) => client.ask({ op: 'await-event', id: 0, eventId, timeoutMs: 60_000 })),
  );
  return replies.reduce((sum, reply) => sum + (reply.op === 'await-event' ? reply.received : 0), 0);
}

async function arrivalsOf(clients: ClientProcess[], eventId: string): Promise<number[]> {
  const reports = await Promise.all(clients.map((client) => client.ask({ op: 'report', id: 0 })));
  return reports.flatMap((report) =>
    report.op === 'report' ? (report.arrivals[`facade ${eventId}`] ?? []) : [],
  );
}

async function stopClients(clients: ClientProcess[]): Promise<void> {
  await Promise.all(clients.map((client) => client.ask({ op: 'disconnect', id: 0 }).catch(() => undefined)));
  for (const client of clients) client.stop();
}

/** One top-up of the account at the emulator, then the webhook the upstream would send for it. */
async function topUpWithWebhook(
  emulator: ServiceProcess,
  facade: ServiceProcess,
): Promise<{ sentAt: number; ackedAt: number; ackMs: number }> {
  await topUp(emulator.url);
  const sentAt = now();
  const ack = await postSigned(facade.url, secret, accountUpdated(0));
  if (ack.status >= 300) throw new Error(`the webhook answered ${String(ack.status)}`);
  const ackedAt = now();
  return { sentAt, ackedAt, ackMs: ackedAt - sentAt };
}

async function subscriptionScenario(emulator: ServiceProcess) {
  const facade = await startFacade(emulator.url, secret, undefined, '', 0);
  try {
    const baseHeap = await heapAfterGc(facade);
    const clients = await connectClients(facade, SUBSCRIPTION);
    await sleep(1_000);
    const idleHeap = await heapAfterGc(facade);
    const gets = await upstreamRequests(emulator);
    const event = accountUpdated(1);
    const sentAt = now();
    const ack = await postSigned(facade.url, secret, event);
    const ackedAt = now();
    const received = await awaitAll(clients, event.id);
    const arrivals = await arrivalsOf(clients, event.id);
    const upstreamGets = (await upstreamRequests(emulator)) - gets;
    await stopClients(clients);
    return {
      ackStatus: ack.status,
      ackMs: ackedAt - sentAt,
      received,
      upstreamGets,
      fromAck: latencyOf(arrivals, ackedAt),
      fromSent: latencyOf(arrivals, sentAt),
      heapPerClientBytes: (idleHeap - baseHeap) / clientsWanted,
    };
  } finally {
    await facade.stop();
  }
}

async function liveScenario(emulator: ServiceProcess) {
  const facade = await startFacade(emulator.url, secret, undefined, '', 0);
  try {
    const baseHeap = await heapAfterGc(facade);
    const clients = await connectClients(facade, DASHBOARD);
    const first = await awaitAll(clients, 'result-1');
    await sleep(1_000);
    const idleHeap = await heapAfterGc(facade);
    const cpuBefore = await facade.cpuMs();
    const gets = await upstreamRequests(emulator);
    const windowStarted = now();
    await sleep(1_000);
    const { sentAt, ackedAt, ackMs } = await topUpWithWebhook(emulator, facade);
    const received = await awaitAll(clients, 'result-2');
    const arrivals = await arrivalsOf(clients, 'result-2');
    const upstreamGetsForChange = (await upstreamRequests(emulator)) - gets;
    await sleep(Math.max(0, windowSeconds * 1000 - (now() - windowStarted)));
    const cpuMs = (await facade.cpuMs()) - cpuBefore;
    const upstreamGetsInWindow = (await upstreamRequests(emulator)) - gets;
    await stopClients(clients);
    return {
      firstAnswers: first,
      ackMs,
      received,
      upstreamGetsForChange,
      upstreamGetsInWindow,
      facadeCpuMsInWindow: cpuMs,
      fromAck: latencyOf(arrivals, ackedAt),
      fromSent: latencyOf(arrivals, sentAt),
      heapPerClientBytes: (idleHeap - baseHeap) / clientsWanted,
    };
  } finally {
    await facade.stop();
  }
}

async function pollingScenario(emulator: ServiceProcess) {
  const facade = await startFacade(emulator.url, secret, undefined, '', 0);
  const body = JSON.stringify({ query: DASHBOARD.replace(' @live', '') });
  const poll = async (): Promise<boolean> => {
    const response = await fetch(`${facade.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const text = await response.text();
    return response.status === 200 && !text.includes('"errors"');
  };
  try {
    await poll();
    const cpuBefore = await facade.cpuMs();
    const gets = await upstreamRequests(emulator);
    const windowStarted = now();
    let requests = 0;
    let failures = 0;
    let lateRounds = 0;
    const polling = (async () => {
      for (let round = 0; round < windowSeconds; round += 1) {
        const due = windowStarted + round * 1000;
        if (now() < due) await sleep(due - now());
        else if (round > 0) lateRounds += 1;
        const results = await Promise.all(
          Array.from({ length: clientsWanted }, () => poll().catch(() => false)),
        );
        requests += results.length;
        failures += results.filter((ok) => !ok).length;
      }
    })();
    await sleep(1_000);
    await topUpWithWebhook(emulator, facade);
    await polling;
    const cpuMs = (await facade.cpuMs()) - cpuBefore;
    return {
      requests,
      failures,
      lateRounds,
      seconds: (now() - windowStarted) / 1000,
      upstreamGetsInWindow: (await upstreamRequests(emulator)) - gets,
      facadeCpuMsInWindow: cpuMs,
    };
  } finally {
    await facade.stop();
  }
}

const loadBefore = loadavg();
console.log(`live query bench: ${String(clientsWanted)} clients, a ${String(windowSeconds)} s window`);
const emulator = await startEmulatorService();
try {
  console.log('- subscription fan-out');
  const subscription = await subscriptionScenario(emulator);
  console.log(JSON.stringify(subscription));
  console.log('- live query');
  const live = await liveScenario(emulator);
  console.log(JSON.stringify(live));
  console.log('- polling every second');
  const polling = await pollingScenario(emulator);
  console.log(JSON.stringify(polling));
  const report = {
    at: new Date().toISOString(),
    clients: clientsWanted,
    windowSeconds,
    loadAverage: { before: loadBefore, after: loadavg() },
    subscription,
    live,
    polling,
    ratios: {
      // From the webhook's send: a subscription's event can reach its clients before the ack does.
      liveP99OverSubscriptionP99FromSent: live.fromSent.p99Ms / subscription.fromSent.p99Ms,
      liveHeapPerClientOverSubscription: live.heapPerClientBytes / subscription.heapPerClientBytes,
      pollingGetsOverLive: polling.upstreamGetsInWindow / live.upstreamGetsInWindow,
      pollingCpuOverLive: polling.facadeCpuMsInWindow / live.facadeCpuMsInWindow,
    },
  };
  console.log(JSON.stringify(report.ratios));
  await mkdir(`${root}bench/results`, { recursive: true });
  await writeFile(`${root}bench/results/live-query-latest.json`, `${JSON.stringify(report, null, 2)}\n`);
} finally {
  await emulator.stop();
}
