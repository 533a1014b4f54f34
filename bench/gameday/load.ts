/**
 * The game day's load, a child process of bench/gameday.ts (its own event loop, so what it measures
 * is not the supervisor's work): subscribers that resume with their cursor after every end (graphql-ws
 * through the gateway, SSE and Apollo's multipart protocol to the facade Service), `@live` watchers,
 * queries and idempotent top-ups through the gateway at a steady rate (open loop: a slow answer does
 * not slow the rate), and the platform's own changes made at the emulator (each one a webhook). It
 * keeps a log of everything (every operation, every event each subscriber received, every
 * subscription's start and end) and hands it to the supervisor when asked (load-protocol.ts).
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'graphql-ws';
import { STREAMED_TRANSPORTS } from '../lib/streamed-transports.ts';
import {
  LIVE_QUERY_DOCUMENT,
  LIVE_QUERY_READ_DOCUMENT,
  MUTATION_AMOUNT,
  PRODUCER_AMOUNT,
  SANDBOX_QUERY_DOCUMENT,
  SUBSCRIBER_TRANSPORTS,
  SUBSCRIPTION_DOCUMENT,
  TOP_UP_DOCUMENT,
  type CheckpointCounts,
  type FromLoad,
  type LoadConfig,
  type MutationRecord,
  type OperationRecord,
  type SessionRecord,
  type SubscriberRecord,
  type SubscriberTransport,
  type ToLoad,
} from './load-protocol.ts';
import type { Environment } from './topology.ts';

/** How long one query or top-up attempt may take before it counts as failed (`timeout`). */
const ATTEMPT_TIMEOUT_MS = 15_000;
/** How long a top-up is retried with its key before it is given up. */
const MUTATION_DEADLINE_MS = 120_000;
/** Failures retrying cannot mend: the top-up is given up at once. */
const FINAL_CODES = new Set(['BAD_USER_INPUT', 'FORBIDDEN', 'NOT_FOUND', 'GRAPHQL_VALIDATION_FAILED']);

type Payload = { query: string; variables: Record<string, unknown> };
type Result = { data?: Record<string, unknown> | null; errors?: readonly unknown[] };

interface Subscriber {
  record: SubscriberRecord;
  /** The cursor of the last event received: where the next subscription resumes. */
  cursor: string | undefined;
  payload(): Payload;
  onResult(result: Result): void;
  stop: (() => void) | undefined;
}

const send = (message: FromLoad): void => {
  process.send?.(message);
};

const state = { closing: false, stopped: false, writesPaused: false };
/** Read through a function: it changes while a loop awaits. */
const closing = (): boolean => state.closing;
const operations: OperationRecord[] = [];
const mutations: MutationRecord[] = [];
const subscribers: Subscriber[] = [];
const pendingWrites = new Set<Promise<unknown>>();
let counts: CheckpointCounts = freshCounts();

function freshCounts(): CheckpointCounts {
  return {
    acknowledged: 0,
    unresolved: 0,
    producerApplied: { sandbox: 0, live: 0 },
    producerFailed: { sandbox: 0, live: 0 },
  };
}

/** The code of a GraphQL error (or its message's start when it has none). */
function codeOf(error: unknown): string {
  const { message, extensions } = (error ?? {}) as { message?: string; extensions?: { code?: unknown } };
  return typeof extensions?.code === 'string' ? extensions.code : (message ?? 'error').slice(0, 60);
}

/** Why a fetch failed, in a few words: its cause's code (ECONNREFUSED ...), or a timeout. */
function fetchFailure(error: unknown): string {
  const { name, cause, message } = error as { name?: string; cause?: { code?: string }; message?: string };
  if (name === 'TimeoutError') return 'timeout';
  return `fetch ${cause?.code ?? message ?? 'failed'}`;
}

/** POSTs `payload` to the gateway as `environment`'s caller; null when it succeeded, else why not. */
async function graphql(
  config: LoadConfig,
  environment: Environment,
  payload: Payload,
): Promise<string | null> {
  try {
    const response = await fetch(config.gatewayUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${config.tokens[environment]}`,
      },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
    });
    const text = await response.text();
    let body: Result = {};
    try {
      body = JSON.parse(text) as Result;
    } catch {
      return `${response.status} not-json`;
    }
    const root = body.data === null || body.data === undefined ? undefined : Object.values(body.data)[0];
    if (response.status === 200 && body.errors === undefined && root !== null && root !== undefined)
      return null;
    return `${response.status} ${body.errors === undefined ? 'no-data' : codeOf(body.errors[0])}`;
  } catch (error) {
    return fetchFailure(error);
  }
}

/** Runs `tick` every `intervalMs` (each on its own, not waiting for the last) until the load stops. */
async function every(intervalMs: number, tick: () => Promise<void>, paused = () => false): Promise<void> {
  let next = Date.now();
  while (!state.stopped && !state.closing) {
    if (!paused()) void tick();
    next += intervalMs;
    await sleep(Math.max(0, next - Date.now()));
  }
}

function startQueries(config: LoadConfig): void {
  let sequence = 0;
  void every(1000 / config.queryRate, async () => {
    sequence += 1;
    const environment: Environment = sequence % 3 === 0 ? 'live' : 'sandbox';
    const { customerId, accountId } = config.customers[environment];
    const payload =
      environment === 'live'
        ? { query: LIVE_QUERY_READ_DOCUMENT, variables: { id: customerId } }
        : { query: SANDBOX_QUERY_DOCUMENT, variables: { customerId, id: accountId } };
    const startedAt = Date.now();
    const failure = await graphql(config, environment, payload);
    operations.push(['query', environment, startedAt, Date.now() - startedAt, failure]);
  });
}

/** One top-up through the gateway, retried with its key until acknowledged, final, or too late. */
async function topUp(config: LoadConfig, record: MutationRecord): Promise<void> {
  const { customerId, accountId } = config.customers.sandbox;
  const payload = {
    query: TOP_UP_DOCUMENT,
    variables: {
      input: { customerId, accountId, amount: MUTATION_AMOUNT, currency: 'USDC', idempotencyKey: record.key },
    },
  };
  for (let attempt = 1; ; attempt += 1) {
    const startedAt = Date.now();
    const failure = await graphql(config, 'sandbox', payload);
    operations.push(['mutation', 'sandbox', startedAt, Date.now() - startedAt, failure]);
    record.attempts = attempt;
    if (failure === null) {
      record.acknowledgedAt = Date.now();
      counts.acknowledged += 1;
      return;
    }
    const final = FINAL_CODES.has(failure.split(' ')[1] ?? '');
    if (final || Date.now() - record.firstAt > MUTATION_DEADLINE_MS || state.closing) {
      record.lastFailure = failure;
      counts.unresolved += 1;
      return;
    }
    await sleep(Math.min(4_000, 250 * 2 ** (attempt - 1)));
  }
}

function track(write: Promise<unknown>): void {
  pendingWrites.add(write);
  void write.finally(() => pendingWrites.delete(write));
}

function startMutations(config: LoadConfig): void {
  let sequence = 0;
  void every(
    1000 / config.mutationRate,
    async () => {
      sequence += 1;
      const record: MutationRecord = {
        key: `gameday-${config.runId}-${sequence}`,
        firstAt: Date.now(),
        attempts: 0,
      };
      mutations.push(record);
      const write = topUp(config, record);
      track(write);
      await write;
    },
    () => state.writesPaused,
  );
}

/** The platform's own change in `environment`: a sandbox top-up, or new fees of the live account. */
/** How long the platform's own change may take before it counts as failed. */
const PRODUCER_TIMEOUT_MS = 10_000;

async function produce(config: LoadConfig, environment: Environment, sequence: number): Promise<void> {
  const { customerId, accountId } = config.customers[environment];
  const sandbox = environment === 'sandbox';
  const url = sandbox
    ? `${config.emulatorUrl}/v3/sandbox/accounts/${accountId}/topup`
    : `${config.emulatorUrl}/v3/customers/${customerId}/accounts/${accountId}/fees`;
  const body = sandbox
    ? { amount: PRODUCER_AMOUNT, currency: 'USDC' }
    : { breakdown: { developer: { fixed: '1.00', bips: (sequence % 9_000) + 1 } } };
  try {
    const response = await fetch(url, {
      method: sandbox ? 'POST' : 'PUT',
      headers: {
        'content-type': 'application/json',
        'x-api-key': config.producerKeys[environment],
        'idempotency-key': `gameday-producer-${config.runId}-${environment}-${sequence}`,
      },
      body: JSON.stringify(body),
      // A platform that holds requests unanswered (the `upstream-stall` fault) holds these too:
      // without a deadline one would wait for undici's 300 s and hold the phase's checkpoint. A
      // stalled request is never applied, so it counts as failed.
      signal: AbortSignal.timeout(PRODUCER_TIMEOUT_MS),
    });
    await response.arrayBuffer();
    if (response.status === 200) counts.producerApplied[environment] += 1;
    else counts.producerFailed[environment] += 1;
  } catch {
    counts.producerFailed[environment] += 1;
  }
}

function startProducers(config: LoadConfig): void {
  for (const environment of ['sandbox', 'live'] as const) {
    let sequence = 0;
    void every(
      config.producerIntervalMs[environment],
      async () => {
        sequence += 1;
        const write = produce(config, environment, sequence);
        track(write);
        await write;
      },
      () => state.writesPaused,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Subscribers.

/** Why a graphql-ws subscription ended, from what the client's `error` handler got. */
function wsEnding(error: unknown, closeCode: number | undefined): string {
  if (Array.isArray(error)) return `errors ${error.map(codeOf).join(',')}`;
  if (closeCode !== undefined) return `closed ${closeCode}`;
  return `socket error ${(error as { message?: string } | undefined)?.message ?? ''}`.trim();
}

/** One graphql-ws subscription at `url`; resolves with why it ended. */
function openGraphqlWs(
  url: string,
  token: string,
  subscriber: Subscriber,
  session: SessionRecord,
): Promise<string> {
  return new Promise((resolve) => {
    let closeCode: number | undefined;
    let settled = false;
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${token}` },
      retryAttempts: 0,
      lazy: true,
      on: {
        connected: () => (session.started = Date.now()),
        closed: (event) => (closeCode = (event as { code?: number }).code),
      },
    });
    const finish = (how: string): void => {
      if (settled) return;
      settled = true;
      void client.dispose();
      resolve(how);
    };
    const unsubscribe = client.subscribe(subscriber.payload(), {
      next: (result) => subscriber.onResult(result as Result),
      error: (error) => finish(wsEnding(error, closeCode)),
      complete: () => finish('complete'),
    });
    subscriber.stop = () => {
      unsubscribe();
      finish('stopped');
    };
  });
}

/** A streamed message read: a result, the stream's own end, or nothing (a heartbeat). */
function readMessage(kind: 'sse' | 'multipart', message: string): Result | 'complete' | undefined {
  if (kind === 'sse') {
    if (message.includes('event: complete')) return 'complete';
    const data = /^data: (.+)$/m.exec(message)?.[1];
    return message.includes('event: next') && data !== undefined ? (JSON.parse(data) as Result) : undefined;
  }
  if (message.startsWith('--')) return 'complete';
  const body = message.slice(message.indexOf('\r\n\r\n') + 4).trim();
  if (!body.startsWith('{')) return undefined;
  const part = JSON.parse(body) as { payload?: Result | null; errors?: unknown[] };
  if (part.payload === null) return { errors: part.errors ?? [] };
  return part.payload;
}

/** One SSE or multipart subscription at the Service; resolves with why it ended. */
function openStreamed(
  kind: 'sse' | 'multipart',
  baseUrl: string,
  token: string,
  subscriber: Subscriber,
  session: SessionRecord,
): Promise<string> {
  const { path, accept, separator } = STREAMED_TRANSPORTS[kind];
  return new Promise((resolve) => {
    let settled = false;
    let completed = false;
    const request = http.request(new URL(path, baseUrl), {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', accept, authorization: `Bearer ${token}` },
    });
    const finish = (how: string): void => {
      if (settled) return;
      settled = true;
      request.destroy();
      resolve(how);
    };
    subscriber.stop = () => finish('stopped');
    request.once('error', (error) => finish(`request ${(error as { code?: string }).code ?? error.message}`));
    request.once('response', (response) => {
      if (response.statusCode !== 200) {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => {
          let code = '';
          try {
            code = codeOf((JSON.parse(text) as { errors?: unknown[] }).errors?.[0]);
          } catch {
            // Not JSON.
          }
          finish(`status ${String(response.statusCode)} ${code}`.trim());
        });
        return;
      }
      session.started = Date.now();
      let buffered = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffered += chunk;
        for (let end = buffered.indexOf(separator, 1); end !== -1; end = buffered.indexOf(separator, 1)) {
          const message = readMessage(kind, buffered.slice(0, end).replace(/^\r\n--graphql/, ''));
          buffered = buffered.slice(end + (kind === 'sse' ? separator.length : 0));
          if (message === 'complete') completed = true;
          else if (message !== undefined) subscriber.onResult(message);
        }
        if (kind === 'multipart' && buffered.startsWith('\r\n--graphql--')) completed = true;
      });
      response.on('end', () => finish(completed ? 'complete' : 'cut'));
      response.on('error', () => finish('cut'));
      response.on('aborted', () => finish('cut'));
    });
    request.end(JSON.stringify(subscriber.payload()));
  });
}

/** Subscribes, and again after every end (with the cursor it holds), until the load closes. */
async function follow(
  subscriber: Subscriber,
  open: (session: SessionRecord) => Promise<string>,
): Promise<void> {
  while (!state.closing) {
    const session: SessionRecord = { asked: Date.now() };
    subscriber.record.sessions.push(session);
    session.ending = await open(session);
    session.ended = Date.now();
    if (closing()) return;
    // Clients spread their reconnections, as graphql-ws's own retry does.
    await sleep(100 + Math.random() * 400);
  }
}

function countError(record: SubscriberRecord, code: string): void {
  record.errors[code] = (record.errors[code] ?? 0) + 1;
}

/** A subscriber of its environment's customer's accounts, resuming after its last cursor. */
function accountSubscriber(
  config: LoadConfig,
  id: string,
  transport: SubscriberTransport,
  environment: Environment,
): Subscriber {
  const subscriber: Subscriber = {
    record: { id, transport, environment, received: [], sessions: [], errors: {} },
    cursor: undefined,
    stop: undefined,
    payload: () => ({
      query: SUBSCRIPTION_DOCUMENT,
      variables: {
        customerId: config.customers[environment].customerId,
        ...(subscriber.cursor === undefined ? {} : { after: subscriber.cursor }),
      },
    }),
    onResult: (result) => {
      for (const error of result.errors ?? []) {
        const code = codeOf(error);
        countError(subscriber.record, code);
        // The log no longer holds the position: start again from now, as a client must.
        if (code === 'CURSOR_EXPIRED') subscriber.cursor = undefined;
      }
      const change = result.data?.accountChanged as { eventId?: string; cursor?: string } | null | undefined;
      if (typeof change?.eventId !== 'string') return;
      subscriber.record.received.push([change.eventId, Date.now()]);
      if (typeof change.cursor === 'string') subscriber.cursor = change.cursor;
    },
  };
  return subscriber;
}

/** A `@live` watcher of the sandbox account's balance, over graphql-ws to the Service. */
function liveWatcher(config: LoadConfig, id: string): Subscriber {
  const { customerId, accountId } = config.customers.sandbox;
  const subscriber: Subscriber = {
    record: { id, transport: 'live-query', environment: 'sandbox', received: [], sessions: [], errors: {} },
    cursor: undefined,
    stop: undefined,
    payload: () => ({ query: LIVE_QUERY_DOCUMENT, variables: { customerId, id: accountId } }),
    onResult: (result) => {
      for (const error of result.errors ?? []) countError(subscriber.record, codeOf(error));
      const account = result.data?.account as { balances?: { currency: string; available: string }[] } | null;
      const usdc = account?.balances?.find((balance) => balance.currency === 'USDC');
      if (usdc !== undefined) subscriber.record.received.push([usdc.available, Date.now()]);
    },
  };
  return subscriber;
}

function startSubscribers(config: LoadConfig): void {
  const gatewayWs = config.gatewayUrl.replace(/^http/, 'ws');
  const serviceWs = `${config.serviceUrl.replace(/^http/, 'ws')}/graphql`;
  for (const transport of SUBSCRIBER_TRANSPORTS) {
    const count = config.subscribers[transport];
    const live = Math.round(count * config.liveShare);
    for (let index = 0; index < count; index += 1) {
      const environment: Environment = index < live ? 'live' : 'sandbox';
      const subscriber = accountSubscriber(
        config,
        `${transport}-${environment}-${index}`,
        transport,
        environment,
      );
      subscribers.push(subscriber);
      const token = config.tokens[environment];
      void follow(subscriber, (session) =>
        transport === 'graphql-ws'
          ? openGraphqlWs(gatewayWs, token, subscriber, session)
          : openStreamed(transport, config.serviceUrl, token, subscriber, session),
      );
    }
  }
  for (let index = 0; index < config.watchers; index += 1) {
    const watcher = liveWatcher(config, `live-query-${index}`);
    subscribers.push(watcher);
    void follow(watcher, (session) => openGraphqlWs(serviceWs, config.tokens.sandbox, watcher, session));
  }
}

async function start(config: LoadConfig): Promise<void> {
  startSubscribers(config);
  startProducers(config);
  // Live once every subscriber received an event and every watcher an answer.
  const deadline = Date.now() + 180_000;
  while (subscribers.some((subscriber) => subscriber.record.received.length === 0)) {
    if (Date.now() > deadline) {
      const waiting = subscribers.filter((subscriber) => subscriber.record.received.length === 0);
      const sample = waiting[0]?.record;
      send({
        op: 'failed',
        message: `${waiting.length} subscribers never received anything; e.g. ${sample?.id ?? '?'}: ${JSON.stringify(sample?.sessions.slice(-3))} ${JSON.stringify(sample?.errors)}`,
      });
      return;
    }
    await sleep(500);
  }
  startQueries(config);
  startMutations(config);
  send({
    op: 'live',
    subscribers: subscribers.filter((subscriber) => subscriber.record.transport !== 'live-query').length,
    watchers: config.watchers,
  });
}

async function checkpoint(id: number): Promise<void> {
  state.writesPaused = true;
  while (pendingWrites.size > 0) await Promise.allSettled([...pendingWrites]);
  const taken = counts;
  counts = freshCounts();
  send({ op: 'checkpoint', id, counts: taken });
}

process.on('message', (message: ToLoad) => {
  switch (message.op) {
    case 'start':
      start(message.config).catch((error: unknown) => send({ op: 'failed', message: String(error) }));
      break;
    case 'checkpoint':
      void checkpoint(message.id);
      break;
    case 'resume':
      state.writesPaused = false;
      break;
    case 'stop':
      state.stopped = true;
      break;
    case 'report':
      send({
        op: 'report',
        report: { operations, subscribers: subscribers.map((subscriber) => subscriber.record), mutations },
      });
      break;
    case 'close':
      state.closing = true;
      state.stopped = true;
      for (const subscriber of subscribers) subscriber.stop?.();
      setTimeout(() => process.exit(0), 500).unref();
      break;
  }
});
process.on('disconnect', () => process.exit(0));
if (process.send === undefined) {
  console.error('bench/gameday/load.ts runs as a child of bench/gameday.ts (it needs the IPC channel).');
  process.exit(1);
}
