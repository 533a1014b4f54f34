/**
 * A child process of the fan-out benchmarks (`bench/fanout.ts`, `bench/fanout-transports.ts`)
 * holding many subscribers, each on its own connection: graphql-ws over a WebSocket (the `ws`
 * package), GraphQL over SSE or Apollo's multipart HTTP protocol over one streamed response each
 * (Node's HTTP client), so the client side is spread over processes and cores and does not become
 * what is measured. It records when each subscriber's `next` arrived, on
 * the machine-wide clock (`performance.timeOrigin + performance.now()`), and answers the parent's
 * requests over the IPC channel (see {@link ClientsRequest}).
 */
import http from 'node:http';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { STREAMED_TRANSPORTS } from './lib/streamed-transports.ts';

/** How a subscriber subscribes: a live transport of the facade. */
export type LiveClientTransport = 'graphql-ws' | 'sse' | 'multipart';

/** What the parent asks; each request carries an id its reply repeats. */
export type ClientsRequest =
  | {
      op: 'connect';
      id: number;
      /**
       * Subscribers to open, by facade: `label` names the facade in the arrivals; `wsUrl` is its
       * `/graphql` as a WebSocket URL (the streamed transports use its HTTP twin).
       */
      groups: { label: string; wsUrl: string; count: number }[];
      /** Default graphql-ws. */
      transport?: LiveClientTransport;
      query: string;
      /** Connections being opened at once. */
      concurrency: number;
      /**
       * Subscriptions per graphql-ws connection (default 1: one small client each); each is a
       * subscriber of its own in the counts. The streamed transports carry one per connection.
       */
      perConnection?: number;
      /**
       * Loopback addresses to connect from, taken in turn (default: the system's choice): one source
       * address and one facade port give at most the ephemeral port range's connections
       * (`net.ipv4.ip_local_port_range`, about 28,000).
       */
      sourceAddresses?: string[];
    }
  | {
      /**
       * Resolves once every subscriber received `eventId` (or `expected` of them, when the
       * process holds subscribers of several facades and the event goes to one), or after `timeoutMs`.
       */
      op: 'await-event';
      id: number;
      eventId: string;
      timeoutMs: number;
      expected?: number;
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
  close(): Promise<void>;
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

/** Subscribers an `await-event` waits for, when not every subscriber of the process. */
const expectedOf = new Map<string, number>();
/** Subscribers that received each event (at most once each). */
const receivedBy = new Map<string, number>();
const received = (eventId: string): number => receivedBy.get(eventId) ?? 0;

/** Records one result's arrival for `subscriber`. */
function arrived(
  subscriber: Subscriber,
  result: { data?: Record<string, unknown> | null; errors?: unknown },
) {
  const at = now();
  if (result.errors !== undefined) noteError(JSON.stringify(result.errors).slice(0, 300));
  // A live query's answers (`bench/live-query.ts`) carry no event id: `result-1` (the first), `result-2` ...
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
  const key = `${subscriber.label} ${eventId}`;
  const times = arrivals.get(key) ?? [];
  times.push(at);
  arrivals.set(key, times);
  receivedBy.set(eventId, received(eventId) + 1);
  if (received(eventId) >= (expectedOf.get(eventId) ?? subscribers.length)) eventWaiters.get(eventId)?.();
}

/** How one connection is opened: its transport, the facade, and what it subscribes. */
interface ConnectionPlan {
  transport: LiveClientTransport;
  label: string;
  wsUrl: string;
  query: string;
  /** Subscriptions on it (graphql-ws only). */
  perConnection: number;
  localAddress: string | undefined;
}

/** Opens one connection and its subscribers; resolves once it listens (`connection_ack`, a stream's 200) or failed. */
function openSubscriber(plan: ConnectionPlan): Promise<string | undefined> {
  const { transport, label, wsUrl, query, localAddress } = plan;
  if (transport !== 'graphql-ws') return openStreamedSubscriber(transport, label, wsUrl, query, localAddress);
  // The `ws` client takes its socket's source address as an option of its own.
  const webSocketImpl =
    localAddress === undefined
      ? WebSocket
      : class extends WebSocket {
          constructor(address: string, protocols?: string | string[]) {
            super(address, protocols, { localAddress });
          }
        };
  return new Promise((resolve) => {
    let settled = false;
    const settle = (failure: string | undefined): void => {
      if (settled) return;
      settled = true;
      resolve(failure);
    };
    const client = createClient({
      url: wsUrl,
      webSocketImpl,
      lazy: true,
      retryAttempts: 0,
      on: {
        connected: () => settle(undefined),
        closed: (event) =>
          settle(`closed before acknowledgement: ${String((event as { code?: number }).code)}`),
        error: (error) => settle(`socket error: ${String(error)}`),
      },
    });
    let disposed: Promise<void> | undefined;
    for (let index = 0; index < plan.perConnection; index += 1) {
      const subscriber: Subscriber = {
        label,
        seen: new Set(),
        results: 0,
        close: async () => {
          disposed ??= Promise.resolve(client.dispose());
          await disposed;
        },
      };
      subscribers.push(subscriber);
      client.subscribe(
        { query },
        {
          next: (result) => arrived(subscriber, result),
          error: (error) => noteError(`subscription error: ${JSON.stringify(error).slice(0, 300)}`),
          complete: () => undefined,
        },
      );
    }
  });
}

/** One result of a streamed message (an SSE `next`, a multipart part with a payload), or undefined. */
function resultOf(transport: 'sse' | 'multipart', message: string): Record<string, unknown> | undefined {
  if (transport === 'sse') {
    const data = /^data: (.+)$/m.exec(message)?.[1];
    return message.includes('event: next') && data !== undefined
      ? (JSON.parse(data) as Record<string, unknown>)
      : undefined;
  }
  const body = message.slice(message.indexOf('\r\n\r\n') + 4);
  if (!body.startsWith('{')) return undefined;
  const part = JSON.parse(body) as { payload?: Record<string, unknown> | null; errors?: unknown };
  if (part.payload === null) return { errors: part.errors };
  return part.payload;
}

/** Opens one SSE or multipart subscriber over its own socket; resolves once answered 200 or failed. */
function openStreamedSubscriber(
  transport: 'sse' | 'multipart',
  label: string,
  wsUrl: string,
  query: string,
  localAddress: string | undefined,
): Promise<string | undefined> {
  const { path, accept, separator } = STREAMED_TRANSPORTS[transport];
  const url = new URL(path, wsUrl.replace(/^ws/, 'http'));
  return new Promise((resolve) => {
    const request = http.request(url, {
      method: 'POST',
      agent: false,
      ...(localAddress === undefined ? {} : { localAddress }),
      headers: { 'content-type': 'application/json', accept },
    });
    const subscriber: Subscriber = {
      label,
      seen: new Set(),
      results: 0,
      close: async () => {
        request.destroy();
      },
    };
    request.once('error', (error) => resolve(`request error: ${String(error)}`));
    request.once('response', (response) => {
      if (response.statusCode !== 200) {
        resolve(`answered ${String(response.statusCode)}`);
        response.resume();
        return;
      }
      subscribers.push(subscriber);
      resolve(undefined);
      let buffered = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffered += chunk;
        // A message is whole once the separator after it arrived.
        for (let end = buffered.indexOf(separator, 1); end !== -1; end = buffered.indexOf(separator, 1)) {
          const result = resultOf(transport, buffered.slice(0, end));
          buffered = buffered.slice(end + (transport === 'sse' ? separator.length : 0));
          if (result !== undefined) arrived(subscriber, result);
        }
      });
      response.on('error', () => undefined);
    });
    request.end(JSON.stringify({ query }));
  });
}

async function connect(request: Extract<ClientsRequest, { op: 'connect' }>): Promise<ClientsReply> {
  const transport = request.transport ?? 'graphql-ws';
  const perConnection = transport === 'graphql-ws' ? (request.perConnection ?? 1) : 1;
  const sources = request.sourceAddresses ?? [];
  const pending = request.groups.flatMap((group) =>
    Array.from({ length: Math.ceil(group.count / perConnection) }, (_, index) => ({
      label: group.label,
      wsUrl: group.wsUrl,
      // The last connection of a group carries what is left.
      subscriptions: Math.min(perConnection, group.count - index * perConnection),
    })),
  );
  let opened = 0;
  let connected = 0;
  let failed = 0;
  let failure: string | undefined;
  const worker = async (): Promise<void> => {
    for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
      const localAddress = sources.length === 0 ? undefined : sources[opened % sources.length];
      opened += 1;
      const problem = await openSubscriber({
        transport,
        label: next.label,
        wsUrl: next.wsUrl,
        query: request.query,
        perConnection: next.subscriptions,
        localAddress,
      });
      if (problem === undefined) connected += next.subscriptions;
      else {
        failed += next.subscriptions;
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
  const expected = request.expected ?? subscribers.length;
  if (request.expected !== undefined) expectedOf.set(request.eventId, request.expected);
  if (received(request.eventId) < expected) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, request.timeoutMs);
      eventWaiters.set(request.eventId, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    eventWaiters.delete(request.eventId);
  }
  expectedOf.delete(request.eventId);
  return { id: request.id, op: 'await-event', received: received(request.eventId) };
}

async function disconnect(id: number): Promise<ClientsReply> {
  const closing = subscribers.splice(0);
  await Promise.all(
    closing.map(async (subscriber) => {
      await subscriber.close();
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
