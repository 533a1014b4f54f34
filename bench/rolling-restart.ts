/**
 * `npm run bench:rolling-restart`: the promise deploy/kubernetes/ encodes, kept on the process-level
 * twin of compose.yaml (scripts/compose-twin.ts): **a rolling restart loses nothing**.
 *
 * What runs: the twin (emulator, OpenID provider, two facade replicas sharing a Redis, the example
 * subgraph, Hive Gateway's runtime), with the alias `platform` sent to a Service made here: a
 * round-robin TCP balancer over the replicas that are ready, as kube-proxy balances a Service over
 * its endpoints. A replica joins the endpoints once its `/readyz` answers 200 (polled each second, as
 * the readiness probe), and leaves them when its termination starts, before its preStop wait.
 * Meanwhile:
 *
 * - subscribers (half graphql-ws, half SSE), all through the Service, so spread across the replicas,
 *   to `accountChanged` of one account; when a subscription ends (completed by a draining replica,
 *   its socket closed, its stream cut) the subscriber subscribes again through the Service with
 *   `after: <the cursor of the last event it received>`;
 * - events made at the emulator: sandbox top-ups through its REST API, each delivered by its
 *   webhooks (signed, retried) to facade-a, the replica compose.yaml registers;
 * - a query load through the gateway (operator token, a facade field), a few requests at a time;
 * - the rolling restart: each replica in turn leaves the endpoints, waits `preStopMs`, gets SIGTERM,
 *   drains and exits, starts again, and is ready before the next one is touched.
 *
 * Then every event the emulator sent after all subscribers were live is looked up in what each
 * subscriber received: missed (0 times) and duplicated (more than once) are counted; failed queries
 * are counted with their reasons.
 *
 * Options (environment): BENCH_ROLLING_SUBSCRIBERS (200), BENCH_ROLLING_ROUNDS (1: each replica once),
 * BENCH_ROLLING_EVENT_INTERVAL_MS (250), BENCH_ROLLING_QUERY_RATE (20 a second),
 * BENCH_ROLLING_QUERY_CONCURRENCY (4), BENCH_ROLLING_PRESTOP_MS
 * (2000), BENCH_ROLLING_WEBHOOKS (`service`, or `compose`: facade-a registers itself as compose.yaml
 * has it). The twin starts compose.yaml's own Redis (a primary, a replica, three Sentinels).
 */
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient as createWsClient } from 'graphql-ws';
import { createClient as createSseClient } from 'graphql-sse';
import { REPLICAS, startComposeTwin, type ComposeTwin, type TwinOptions } from '../scripts/compose-twin.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { startTcpBalancer } from './lib/tcp-balancer.ts';

const ACCOUNT_ID = 'acc_globex_eth';
const CUSTOMER_ID = 'cus_globex';
/** The emulator's sandbox key, as compose.yaml gives the replicas. */
const EMULATOR_KEY = 'sk_sandbox_emulator';

export interface RollingRestartOptions {
  subscribers: number;
  /** How many times each replica is restarted, one replica at a time. */
  rounds: number;
  eventIntervalMs: number;
  /** Queries a second through the gateway, all told. */
  queryRate: number;
  queryConcurrency: number;
  preStopMs: number;
  /**
   * `service` (deploy/kubernetes): one endpoint registered at the Service, its secret on every
   * replica. `compose`: compose.yaml's, facade-a registering itself at each start.
   */
  webhooks: 'service' | 'compose';
  /** Progress lines; default nothing. */
  log?: (line: string) => void;
  /** How the twin starts its processes, and how long each may take to answer (the twin's defaults). */
  spawn?: TwinOptions['spawn'];
  readyWithinMs?: number;
}

export interface RestartRecord {
  replica: string;
  /** From SIGTERM to the process's exit. */
  drainMs: number;
  exitCode: number | null;
  /** From the new process's start to its first 200 on `/readyz`. */
  readyMs: number;
}

export interface RollingRestartReport {
  subscribers: { graphqlWs: number; sse: number };
  restarts: RestartRecord[];
  /** Top-ups made at the emulator during the measured window, and those it refused. */
  topUps: { made: number; failed: number };
  /** Distinct events the emulator sent after every subscriber was live (the measured ones). */
  events: number;
  /** Those events by type. */
  eventTypes: Record<string, number>;
  /** Expected deliveries: events × subscribers. */
  expected: number;
  delivered: number;
  missed: number;
  duplicates: number;
  /** Events received that the emulator never sent. */
  unknown: number;
  /** Subscriptions made again with `after`, and why the previous one ended. */
  resumes: number;
  endings: Record<string, number>;
  /** Errors a subscription answered with (by code or message). */
  subscriptionErrors: Record<string, number>;
  queries: { ok: number; failed: number; reasons: Record<string, number> };
  /** The replicas' warnings, errors and refusals, by message (their log lines, JSON). */
  replicaWarnings: Record<string, number>;
  /** Webhook attempts that failed (and were retried) while facade-a was away. */
  webhookAttempts: { delivered: number; failed: number; gaveUp: number };
}

const selection = 'eventId cursor type';
const subscriptionQuery = (after: string | undefined): string =>
  `subscription { accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}"${
    after === undefined ? '' : `, after: "${after}"`
  }) { ${selection} } }`;

interface AccountChange {
  eventId: string;
  cursor: string;
  type: string;
}

interface Subscriber {
  kind: 'graphql-ws' | 'sse';
  received: Map<string, number>;
  order: string[];
  lastCursor: string | undefined;
  resumes: number;
  stop?: () => void;
}

/** A Kubernetes Service in miniature: round-robin TCP over the ready endpoints. */
interface Service {
  port: number;
  endpoints: Map<string, number>;
  close(): Promise<void>;
}

async function startService(): Promise<Service> {
  const endpoints = new Map<string, number>();
  let next = 0;
  const balancer = await startTcpBalancer(() => {
    const ports = [...endpoints.values()];
    return ports.length === 0 ? undefined : ports[next++ % ports.length];
  });
  return { port: balancer.port, endpoints, close: () => balancer.close() };
}

async function operatorToken(issuerUrl: string): Promise<string> {
  const response = await fetch(`${issuerUrl}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from('demo-operator:demo-operator-secret').toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  if (!response.ok) throw new Error(`the OpenID provider answered ${response.status}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

/** Registers `url` for account events at the emulator, as a platform team does once; returns its secret. */
async function registerWebhookEndpoint(emulatorUrl: string, url: string): Promise<string> {
  const response = await fetch(`${emulatorUrl}/v3/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': EMULATOR_KEY,
      'idempotency-key': `rolling-restart-${process.pid}`,
    },
    body: JSON.stringify({ url, events: ['account.created', 'account.updated'] }),
  });
  if (!response.ok) throw new Error(`registering the webhook endpoint answered ${response.status}`);
  return ((await response.json()) as { data: { secret: string } }).data.secret;
}

function countInto(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** Runs the measurement on a twin of its own; everything it started is stopped before it returns. */
export async function measureRollingRestart(options: RollingRestartOptions): Promise<RollingRestartReport> {
  const log = options.log ?? (() => undefined);
  const service = await startService();
  let twin: ComposeTwin | undefined;
  // Flags read by loops that run beside the steps below.
  const state = { stopped: false, producing: true, querying: true, phase: 'steady' };
  const isStopped = (): boolean => state.stopped;
  const background: Promise<unknown>[] = [];
  const subscribers: Subscriber[] = [];
  const endings = new Map<string, number>();
  const subscriptionErrors = new Map<string, number>();
  const queries = { ok: 0, failed: 0, reasons: new Map<string, number>() };
  const topUps = { made: 0, failed: 0 };
  const restarts: RestartRecord[] = [];
  const terminating = new Set<string>();
  try {
    twin = await startComposeTwin({
      platformPort: service.port,
      ...(options.spawn === undefined ? {} : { spawn: options.spawn }),
      ...(options.readyWithinMs === undefined ? {} : { readyWithinMs: options.readyWithinMs }),
      replicaEnvironment: async (emulatorUrl) => ({
        // As deploy/kubernetes has it: the endpoint registered once, at the Service, its secret given
        // to every replica. `compose`: as compose.yaml has it, facade-a registers itself at each start
        // and keeps the secret it was given in memory.
        ...(options.webhooks === 'compose'
          ? {}
          : {
              WEBHOOK_REGISTER: 'false',
              WEBHOOK_SECRETS: await registerWebhookEndpoint(
                emulatorUrl,
                `http://127.0.0.1:${service.port}/webhooks/platform`,
              ),
            }),
        // One demo identity stands for every client here; its per-caller budgets (600 operations and
        // 60 WebSocket connections a minute) are for one client, not for 200.
        RATE_LIMIT_ENABLED: 'false',
      }),
    });
    const { urls, gatewayUrl } = twin;
    const urlOf = (service: string): string => {
      const url = urls[service];
      if (url === undefined) throw new Error(`the twin has no ${service}`);
      return url;
    };
    const token = await operatorToken(urlOf('dev-issuer'));

    // The endpoints controller: a replica is an endpoint while ready and not terminating.
    const readyz = async (replica: string): Promise<boolean> => {
      try {
        const response = await fetch(`${urlOf(replica)}/readyz`, { signal: AbortSignal.timeout(3_000) });
        await response.body?.cancel();
        return response.status === 200;
      } catch {
        return false;
      }
    };
    const probe = async (replica: (typeof REPLICAS)[number]): Promise<void> => {
      while (!state.stopped) {
        const ready = !terminating.has(replica) && (await readyz(replica));
        if (ready && !terminating.has(replica))
          service.endpoints.set(replica, Number(new URL(urlOf(replica)).port));
        else service.endpoints.delete(replica);
        await sleep(1_000);
      }
    };
    for (const replica of REPLICAS) background.push(probe(replica));
    while (service.endpoints.size < REPLICAS.length) await sleep(200);

    // Subscribers, through the Service.
    const serviceHttp = `http://127.0.0.1:${service.port}`;
    const onResult = (
      subscriber: Subscriber,
      result: { data?: unknown; errors?: readonly unknown[] },
    ): void => {
      for (const error of result.errors ?? []) {
        const { message, extensions } = error as { message?: string; extensions?: { code?: string } };
        countInto(subscriptionErrors, extensions?.code ?? message ?? 'unknown');
      }
      const change = (result.data as { accountChanged?: AccountChange } | null | undefined)?.accountChanged;
      if (change === undefined) return;
      subscriber.received.set(change.eventId, (subscriber.received.get(change.eventId) ?? 0) + 1);
      subscriber.order.push(change.eventId);
      subscriber.lastCursor = change.cursor;
    };
    const subscribeOnce = (subscriber: Subscriber): Promise<string> =>
      new Promise<string>((settle) => {
        const payload = { query: subscriptionQuery(subscriber.lastCursor) };
        if (subscriber.kind === 'graphql-ws') {
          let closeCode: number | undefined;
          const client = createWsClient({
            url: `ws://127.0.0.1:${service.port}/graphql`,
            webSocketImpl: WebSocket,
            connectionParams: { authorization: `Bearer ${token}` },
            retryAttempts: 0,
            lazy: true,
            on: { closed: (event) => (closeCode = (event as CloseEvent).code) },
          });
          const finish = (how: string): void => {
            void client.dispose();
            settle(how);
          };
          subscriber.stop = client.subscribe(payload, {
            next: (result) => onResult(subscriber, result),
            error: () => finish(`graphql-ws closed ${closeCode ?? 'without a code'}`),
            complete: () => finish('graphql-ws complete'),
          });
        } else {
          const client = createSseClient({
            url: `${serviceHttp}/graphql/stream`,
            headers: { authorization: `Bearer ${token}` },
            retryAttempts: 0,
            singleConnection: false,
          });
          const finish = (how: string): void => {
            client.dispose();
            settle(how);
          };
          subscriber.stop = client.subscribe(payload, {
            next: (result) => onResult(subscriber, result),
            error: (error) =>
              finish(`sse error: ${error instanceof Error ? error.message.slice(0, 60) : 'closed'}`),
            complete: () => finish('sse complete'),
          });
        }
      });
    const follow = async (subscriber: Subscriber): Promise<void> => {
      while (!state.stopped) {
        const how = await subscribeOnce(subscriber);
        if (isStopped()) return;
        countInto(endings, `${state.phase}: ${how}`);
        subscriber.resumes += 1;
        // Clients spread their reconnections a little, as graphql-ws's own retry does.
        await sleep(100 + Math.random() * 400);
      }
    };
    for (let index = 0; index < options.subscribers; index += 1) {
      const subscriber: Subscriber = {
        kind: index % 2 === 0 ? 'graphql-ws' : 'sse',
        received: new Map(),
        order: [],
        lastCursor: undefined,
        resumes: 0,
      };
      subscribers.push(subscriber);
      background.push(follow(subscriber));
    }

    const topUp = async (): Promise<boolean> => {
      try {
        const response = await fetch(`${urlOf('emulator')}/v3/sandbox/accounts/${ACCOUNT_ID}/topup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': EMULATOR_KEY },
          body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
        });
        await response.body?.cancel();
        return response.ok;
      } catch {
        return false;
      }
    };
    /** Events the emulator sent (id → type), and those it is still retrying. */
    const webhookEvents = async (): Promise<{ sent: Map<string, string>; retrying: Set<string> }> => {
      const response = await fetch(`${urlOf('emulator')}/_emulator/webhook-deliveries`);
      const { data } = (await response.json()) as {
        data: { eventId: string; eventType: string; outcome: string }[];
      };
      // Every event the emulator tried to deliver, delivered or not: one it gave up on is measured too.
      const sent = new Map(data.map((attempt) => [attempt.eventId, attempt.eventType]));
      const ended = new Set(data.filter((a) => a.outcome !== 'failed').map((a) => a.eventId));
      return { sent, retrying: new Set(data.map((a) => a.eventId).filter((id) => !ended.has(id))) };
    };
    const sentEvents = async (): Promise<Map<string, string>> => (await webhookEvents()).sent;

    // 1. Every subscriber live: warm-up top-ups until each has received one.
    log(`${options.subscribers} subscribers connecting through the Service`);
    const warmUpDeadline = Date.now() + 120_000;
    while (subscribers.some((subscriber) => subscriber.order.length === 0)) {
      if (Date.now() > warmUpDeadline) throw new Error('the subscribers never all received a warm-up event');
      await topUp();
      await sleep(1_000);
    }
    // Settle: the warm-up events' retries and deliveries are over before the window opens.
    await sleep(2_000);
    const warmUp = new Set((await sentEvents()).keys());
    for (const subscriber of subscribers) subscriber.resumes = 0;
    endings.clear();
    log(`all live after ${warmUp.size} warm-up events; restarting`);

    // 2. Events and queries during the restarts.
    background.push(
      (async () => {
        while (state.producing) {
          if (await topUp()) topUps.made += 1;
          else topUps.failed += 1;
          await sleep(options.eventIntervalMs);
        }
      })(),
    );
    const query = `{ customer(id: "${CUSTOMER_ID}") { id displayName } }`;
    for (let worker = 0; worker < options.queryConcurrency; worker += 1) {
      background.push(
        (async () => {
          // Each worker keeps its share of the rate; a slow answer delays only its own next query.
          const intervalMs = (1_000 * options.queryConcurrency) / options.queryRate;
          while (state.querying) {
            const next = sleep(intervalMs);
            try {
              const response = await fetch(gatewayUrl, {
                method: 'POST',
                headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
                body: JSON.stringify({ query }),
              });
              const body = (await response.json()) as {
                data?: { customer?: { id?: string } };
                errors?: { message: string; extensions?: { code?: string } }[];
              };
              if (
                response.status === 200 &&
                body.errors === undefined &&
                body.data?.customer?.id === CUSTOMER_ID
              )
                queries.ok += 1;
              else {
                queries.failed += 1;
                const first = body.errors?.[0];
                countInto(
                  queries.reasons,
                  `${state.phase}: ${response.status} ${first?.extensions?.code ?? ''} ${first?.message ?? ''}`,
                );
              }
            } catch (error) {
              queries.failed += 1;
              countInto(queries.reasons, `${state.phase}: fetch: ${(error as Error).message}`);
            }
            await next;
          }
        })(),
      );
    }

    // 3. The rolling restart, one replica at a time.
    await sleep(3_000);
    for (let round = 0; round < options.rounds; round += 1) {
      for (const replica of REPLICAS) {
        state.phase = `${replica} preStop`;
        terminating.add(replica);
        service.endpoints.delete(replica);
        await sleep(options.preStopMs);
        state.phase = `${replica} draining`;
        const signalled = Date.now();
        const exitCode = await twin.stop(replica);
        const drainMs = Date.now() - signalled;
        state.phase = `${replica} starting`;
        const started = Date.now();
        await twin.start(replica);
        terminating.delete(replica);
        while (!(await readyz(replica))) await sleep(100);
        const readyMs = Date.now() - started;
        while (!service.endpoints.has(replica)) await sleep(100);
        restarts.push({ replica, drainMs, exitCode, readyMs });
        log(
          `${replica}: drained and exited (${String(exitCode)}) in ${drainMs} ms, ready again in ${readyMs} ms`,
        );
        state.phase = 'steady';
        await sleep(3_000);
      }
    }
    state.producing = false;
    state.querying = false;

    // 4. Every webhook delivered (the emulator retries at 1, 2, 4 ... 64 s) and every subscriber
    // holding every measured event, or the wait ends.
    state.phase = 'settling';
    const settleDeadline = Date.now() + 180_000;
    let measured = new Map<string, string>();
    for (;;) {
      const { sent, retrying } = await webhookEvents();
      measured = new Map([...sent].filter(([eventId]) => !warmUp.has(eventId)));
      const complete = subscribers.every((subscriber) =>
        [...measured.keys()].every((eventId) => subscriber.received.has(eventId)),
      );
      // Each top-up is one event: one not tried yet is not in the list at all.
      const allSent = measured.size >= topUps.made;
      if ((complete && allSent && retrying.size === 0) || Date.now() > settleDeadline) break;
      await sleep(1_000);
    }
    state.stopped = true;
    for (const subscriber of subscribers) subscriber.stop?.();

    const attempts = await (async () => {
      const response = await fetch(`${urlOf('emulator')}/_emulator/webhook-deliveries`);
      const { data } = (await response.json()) as { data: { eventId: string; outcome: string }[] };
      const window = data.filter((attempt) => !warmUp.has(attempt.eventId));
      return {
        delivered: window.filter((a) => a.outcome === 'delivered').length,
        failed: window.filter((a) => a.outcome === 'failed').length,
        gaveUp: window.filter((a) => a.outcome === 'gave_up').length,
      };
    })();

    const replicaWarnings = new Map<string, number>();
    for (const replica of REPLICAS) {
      for (const line of twin.lines(replica)) {
        try {
          const entry = JSON.parse(line) as { level?: string; msg?: string };
          const refusal = entry.level === 'info' && (entry.msg ?? '').includes('refused');
          if (entry.level === 'warn' || entry.level === 'error' || refusal)
            countInto(replicaWarnings, `${entry.level ?? ''}: ${entry.msg ?? ''}`);
        } catch {
          // Not a log line.
        }
      }
    }

    let delivered = 0;
    let missed = 0;
    let duplicates = 0;
    let unknown = 0;
    for (const subscriber of subscribers) {
      for (const eventId of measured.keys()) {
        const times = subscriber.received.get(eventId) ?? 0;
        if (times === 0) missed += 1;
        else delivered += 1;
        if (times > 1) duplicates += times - 1;
      }
      for (const eventId of subscriber.received.keys())
        if (!measured.has(eventId) && !warmUp.has(eventId)) unknown += 1;
    }
    return {
      subscribers: {
        graphqlWs: subscribers.filter((s) => s.kind === 'graphql-ws').length,
        sse: subscribers.filter((s) => s.kind === 'sse').length,
      },
      restarts,
      topUps,
      events: measured.size,
      eventTypes: [...measured.values()].reduce<Record<string, number>>((counts, type) => {
        counts[type] = (counts[type] ?? 0) + 1;
        return counts;
      }, {}),
      expected: measured.size * subscribers.length,
      delivered,
      missed,
      duplicates,
      unknown,
      resumes: subscribers.reduce((sum, subscriber) => sum + subscriber.resumes, 0),
      endings: Object.fromEntries(endings),
      subscriptionErrors: Object.fromEntries(subscriptionErrors),
      queries: { ...queries, reasons: Object.fromEntries(queries.reasons) },
      replicaWarnings: Object.fromEntries(replicaWarnings),
      webhookAttempts: attempts,
    };
  } finally {
    state.stopped = true;
    for (const subscriber of subscribers) subscriber.stop?.();
    await twin?.close();
    await service.close();
    await Promise.race([Promise.allSettled(background), sleep(5_000)]);
  }
}

async function main(): Promise<void> {
  const loadBefore = loadavg();
  const settings = {
    subscribers: positiveIntegerFromEnv('BENCH_ROLLING_SUBSCRIBERS', 200),
    rounds: positiveIntegerFromEnv('BENCH_ROLLING_ROUNDS', 1),
    eventIntervalMs: positiveIntegerFromEnv('BENCH_ROLLING_EVENT_INTERVAL_MS', 250),
    queryRate: positiveIntegerFromEnv('BENCH_ROLLING_QUERY_RATE', 20),
    queryConcurrency: positiveIntegerFromEnv('BENCH_ROLLING_QUERY_CONCURRENCY', 4),
    preStopMs: positiveIntegerFromEnv('BENCH_ROLLING_PRESTOP_MS', 2_000),
    webhooks: process.env.BENCH_ROLLING_WEBHOOKS === 'compose' ? 'compose' : 'service',
  } as const;
  const report = await measureRollingRestart({
    ...settings,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(
    `${JSON.stringify({ settings, ...report, loadAverage: { before: loadBefore, after: loadavg() } }, null, 2)}\n`,
  );
  if (report.missed > 0 || report.duplicates > 0 || report.queries.failed > 0) process.exitCode = 1;
}

if (import.meta.main) await main();
