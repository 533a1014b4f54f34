/**
 * A child process of the fan-out benchmark (`bench/fanout.ts`) holding many graphql-ws subscribers,
 * each on its own WebSocket (the `ws` package), so the client side is spread over processes and
 * cores and does not become what is measured. It records when each subscriber's `next` arrived, on
 * the machine-wide clock (`performance.timeOrigin + performance.now()`), and answers the parent's
 * requests over the IPC channel (see {@link ClientsRequest}).
 */
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

/** What the parent asks; each request carries an id its reply repeats. */
export type ClientsRequest =
  | {
      op: 'connect';
      id: number;
      /** Subscribers to open, by facade: `label` names the facade in the arrivals. */
      groups: { label: string; wsUrl: string; count: number }[];
      query: string;
      /** Connections being opened at once. */
      concurrency: number;
    }
  | {
      /** Resolves once every subscriber received `eventId`, or after `timeoutMs`. */
      op: 'await-event';
      id: number;
      eventId: string;
      timeoutMs: number;
    }
  | { op: 'report'; id: number }
  | { op: 'disconnect'; id: number };

export type ClientsReply =
  | { id: number; op: 'connect'; connected: number; failed: number; firstError?: string }
  | { id: number; op: 'await-event'; received: number }
  | {
      id: number;
      op: 'report';
      /** Arrival times (ms, machine-wide clock) by `<label> <eventId>`, one per subscriber that got it. */
      arrivals: Record<string, number[]>;
      /** Deliveries of an event a subscriber had already received. */
      duplicates: number;
      /** Results carrying errors, subscriptions ended by an error or a `complete`. */
      errors: number;
      firstError?: string;
    }
  | { id: number; op: 'disconnect'; closed: number };

/** The event id a subscription result carries; the benchmark's document selects `eventId`. */
export function eventIdOf(result: { data?: Record<string, unknown> | null }): string | undefined {
  const root = result.data === null || result.data === undefined ? undefined : Object.values(result.data)[0];
  const eventId = (root as { eventId?: unknown } | undefined)?.eventId;
  return typeof eventId === 'string' ? eventId : undefined;
}

interface Subscriber {
  label: string;
  client: Client;
  seen: Set<string>;
  /** Results with data received: a live query's results carry no event id and are named by this count. */
  results: number;
}

const now = (): number => performance.timeOrigin + performance.now();
const subscribers: Subscriber[] = [];
const arrivals = new Map<string, number[]>();
const eventWaiters = new Map<string, () => void>();
let duplicates = 0;
let errors = 0;
let firstError: string | undefined;

function noteError(message: string): void {
  errors += 1;
  firstError ??= message;
}

/** Subscribers that received each event (at most once each). */
const receivedBy = new Map<string, number>();
const received = (eventId: string): number => receivedBy.get(eventId) ?? 0;

/** Opens one subscriber; resolves once its socket is acknowledged (`connection_ack`) or failed. */
function openSubscriber(label: string, wsUrl: string, query: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (failure: string | undefined): void => {
      if (settled) return;
      settled = true;
      resolve(failure);
    };
    const subscriber: Subscriber = {
      label,
      seen: new Set(),
      results: 0,
      client: createClient({
        url: wsUrl,
        webSocketImpl: WebSocket,
        lazy: true,
        retryAttempts: 0,
        on: {
          connected: () => settle(undefined),
          closed: (event) =>
            settle(`closed before acknowledgement: ${String((event as { code?: number }).code)}`),
          error: (error) => settle(`socket error: ${String(error)}`),
        },
      }),
    };
    subscribers.push(subscriber);
    subscriber.client.subscribe(
      { query },
      {
        next: (result) => {
          const at = now();
          if (result.errors !== undefined) noteError(JSON.stringify(result.errors).slice(0, 300));
          // A live query's answers (`bench/live-query.ts`) are `result-1` (the first), `result-2` ...
          const eventId =
            eventIdOf(result) ??
            (result.data === null || result.data === undefined
              ? undefined
              : `result-${String((subscriber.results += 1))}`);
          if (eventId === undefined) return;
          if (subscriber.seen.has(eventId)) {
            duplicates += 1;
            return;
          }
          subscriber.seen.add(eventId);
          const key = `${label} ${eventId}`;
          const times = arrivals.get(key) ?? [];
          times.push(at);
          arrivals.set(key, times);
          receivedBy.set(eventId, received(eventId) + 1);
          if (received(eventId) >= subscribers.length) eventWaiters.get(eventId)?.();
        },
        error: (error) => noteError(`subscription error: ${JSON.stringify(error).slice(0, 300)}`),
        complete: () => undefined,
      },
    );
  });
}

async function connect(request: Extract<ClientsRequest, { op: 'connect' }>): Promise<ClientsReply> {
  const pending = request.groups.flatMap((group) =>
    Array.from({ length: group.count }, () => ({ label: group.label, wsUrl: group.wsUrl })),
  );
  let connected = 0;
  let failed = 0;
  let failure: string | undefined;
  const worker = async (): Promise<void> => {
    for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
      const problem = await openSubscriber(next.label, next.wsUrl, request.query);
      if (problem === undefined) connected += 1;
      else {
        failed += 1;
        failure ??= problem;
      }
    }
  };
  await Promise.all(Array.from({ length: request.concurrency }, worker));
  return {
    id: request.id,
    op: 'connect',
    connected,
    failed,
    ...(failure === undefined ? {} : { firstError: failure }),
  };
}

async function awaitEvent(request: Extract<ClientsRequest, { op: 'await-event' }>): Promise<ClientsReply> {
  if (received(request.eventId) < subscribers.length) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, request.timeoutMs);
      eventWaiters.set(request.eventId, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    eventWaiters.delete(request.eventId);
  }
  return { id: request.id, op: 'await-event', received: received(request.eventId) };
}

async function disconnect(id: number): Promise<ClientsReply> {
  const closing = subscribers.splice(0);
  await Promise.all(
    closing.map(async (subscriber) => {
      await subscriber.client.dispose();
    }),
  );
  return { id, op: 'disconnect', closed: closing.length };
}

async function handle(request: ClientsRequest): Promise<ClientsReply> {
  switch (request.op) {
    case 'connect':
      return connect(request);
    case 'await-event':
      return awaitEvent(request);
    case 'report':
      return {
        id: request.id,
        op: 'report',
        arrivals: Object.fromEntries(arrivals),
        duplicates,
        errors,
        ...(firstError === undefined ? {} : { firstError }),
      };
    case 'disconnect':
      return disconnect(request.id);
  }
}

if (process.send === undefined) {
  console.error('bench/fanout-clients.ts runs as a child of bench/fanout.ts (it needs the IPC channel).');
  process.exit(1);
}
process.on('message', (message: unknown) => {
  void handle(message as ClientsRequest).then((reply) => process.send?.(reply));
});
process.on('disconnect', () => process.exit(0));
