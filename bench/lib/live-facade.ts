/**
 * What the benchmarks that run facades as processes share: starting a facade (with the memory
 * probe, its metrics on a port of its own), reading its live connection counts and the emulator's
 * upstream GETs, signing and posting a webhook the way the upstream does, and the child processes
 * that hold graphql-ws subscribers (`bench/fanout-clients.ts`). `bench/fanout.ts`, `bench/resume.ts`
 * and `bench/cache.ts` use it.
 *
 * BENCH_FACADE_SCRIPT (the facade's entry point: another checkout's `src/main.ts` to compare two
 * versions) and BENCH_FANOUT_NODE_ARGS (extra Node options of the facade) apply to every facade
 * started here.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { signWebhook } from '../../emulator/webhooks/signature.ts';
import type { ClientsReply, ClientsRequest } from '../fanout-clients.ts';
import { findFreePort, startService, type ServiceProcess } from '../processes.ts';

const API_KEY = 'sk_sandbox_emulator';
export const CUSTOMER_ID = 'cus_acme';
export const ACCOUNT_ID = 'acc_acme_eth';

/** What the live benchmarks' subscribers run: an account's changes, each read (with its balances) upstream. */
export const ACCOUNT_SUBSCRIPTION = `subscription {
  accountChanged(customerId: "${CUSTOMER_ID}", accountId: "${ACCOUNT_ID}") {
    eventId type occurredAt account { id status balances { currency available } }
  }
}`;

/** The repository's root, with its trailing slash. */
export const root = fileURLToPath(new URL('../..', import.meta.url));
export const facadeScript = process.env.BENCH_FACADE_SCRIPT ?? `${root}src/main.ts`;
export const facadeNodeArgs = (process.env.BENCH_FANOUT_NODE_ARGS ?? '')
  .split(/\s+/)
  .filter((arg) => arg !== '');

/** The `index`th of `parts` near-equal shares of `total`. */
export function share(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

/** Connections one source address opens to one port, well inside the ephemeral port range. */
const CONNECTIONS_PER_SOURCE_ADDRESS = 20_000;

/**
 * The loopback addresses subscribers connect from, `BENCH_FANOUT_SOURCE_ADDRESSES` (a count, the
 * addresses 127.0.0.1 onwards) or one per {@link CONNECTIONS_PER_SOURCE_ADDRESS} connections: one
 * source address and one facade port give at most `net.ipv4.ip_local_port_range`'s connections
 * (about 28,000 by default). Every 127.0.0.x is on the loopback interface already.
 */
export function sourceAddressesFor(connections: number): string[] {
  const count =
    process.env.BENCH_FANOUT_SOURCE_ADDRESSES === undefined
      ? Math.ceil(connections / CONNECTIONS_PER_SOURCE_ADDRESS)
      : Number(process.env.BENCH_FANOUT_SOURCE_ADDRESSES);
  if (!Number.isInteger(count) || count < 1 || count > 250) {
    throw new Error('BENCH_FANOUT_SOURCE_ADDRESSES must be an integer from 1 to 250.');
  }
  return Array.from({ length: count }, (_, index) => `127.0.0.${index + 1}`);
}

/** File descriptors a process started from here may open (its soft `RLIMIT_NOFILE`, inherited). */
export async function openFilesLimit(): Promise<number> {
  const limits = await readFile('/proc/self/limits', 'utf8');
  const match = /^Max open files\s+(\d+|unlimited)/m.exec(limits);
  return match === null || match[1] === 'unlimited' ? Number.POSITIVE_INFINITY : Number(match[1]);
}

/**
 * Refuses to start a run whose facade would hold more sockets than its file-descriptor limit lets
 * it (every connection is one; a few hundred more for its own files, upstream and Redis
 * connections), rather than measuring a facade that refuses connections with EMFILE. Raising the
 * limit needs `ulimit -n` (the hard limit as root, with CAP_SYS_RESOURCE) before the benchmark.
 */
export async function checkOpenFiles(connectionsPerFacade: number, clientProcesses: number): Promise<void> {
  const limit = await openFilesLimit();
  const reserve = 256;
  if (connectionsPerFacade + reserve > limit) {
    throw new Error(
      `${connectionsPerFacade} connections to one facade need ${connectionsPerFacade + reserve} open files; ` +
        `this process may open ${limit} (ulimit -n), and the facade inherits that. Raise it, or hold ` +
        'several subscriptions per graphql-ws connection (BENCH_FANOUT_PER_CONNECTION).',
    );
  }
  if (Math.ceil(connectionsPerFacade / clientProcesses) + reserve > limit) {
    throw new Error(
      `${connectionsPerFacade} connections over ${clientProcesses} client processes exceed ${limit} open files ` +
        'per process: give more client processes (BENCH_FANOUT_CLIENT_PROCESSES).',
    );
  }
}

/** Where each facade serves `/metrics`: a port of its own, never the main one. */
const metricsUrls = new WeakMap<ServiceProcess, string>();

export async function startFacade(
  emulatorUrl: string,
  secret: string,
  redisUrl: string | undefined,
  redisKeyPrefix: string,
  replica: number,
  /**
   * Node options of this facade (after BENCH_FANOUT_NODE_ARGS), environment variables of its own,
   * and its entry point when not {@link facadeScript} (another checkout's, to compare two versions).
   */
  variant: { nodeArgs?: readonly string[]; env?: Record<string, string>; script?: string } = {},
): Promise<ServiceProcess> {
  const port = await findFreePort();
  const metricsPort = await findFreePort();
  const facade = await startService({
    name: `facade ${replica}`,
    script: variant.script ?? facadeScript,
    port,
    nodeArgs: [
      '--expose-gc',
      '--import',
      pathToFileURL(`${root}bench/memory-probe.ts`).href,
      ...facadeNodeArgs,
      ...(variant.nodeArgs ?? []),
    ],
    ipc: true,
    env: {
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      HOST: '127.0.0.1',
      NODE_ENV: 'production',
      UPSTREAM_BASE_URL: emulatorUrl,
      UPSTREAM_API_KEY: API_KEY,
      // As deployed: one line per operation at info.
      LOG_LEVEL: 'info',
      WEBHOOK_REGISTER: 'false',
      WEBHOOK_SECRETS: secret,
      // The delivery path is measured: no caller tokens, no quotas (nor the per-caller cap on
      // running subscriptions, which the rate limits carry).
      AUTH_MODE: 'none',
      RATE_LIMIT_ENABLED: 'false',
      // Thousands of connections open at once on two busy cores: the default 3 s to send
      // `connection_init` would close some before their client had a turn.
      GRAPHQL_WS_CONNECTION_INIT_TIMEOUT_MS: '60000',
      ...(redisUrl === undefined ? {} : { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: redisKeyPrefix }),
      ...variant.env,
    },
    readyPath: '/readyz',
  });
  metricsUrls.set(facade, `http://127.0.0.1:${metricsPort}`);
  return facade;
}

/** The facade's open graphql-ws connections and running subscriptions, from its `/metrics`. */
async function liveCounts(facade: ServiceProcess): Promise<{ connections: number; subscriptions: number }> {
  const text = await (await fetch(`${metricsUrls.get(facade) ?? facade.url}/metrics`)).text();
  const gauge = (name: string): number => {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  return {
    connections: gauge('facade_graphql_ws_connections'),
    subscriptions: gauge('facade_graphql_ws_subscriptions'),
  };
}

/**
 * The idle-time memory release's figures from the facade's `/metrics`: whether it can run, how many
 * releases it ran and the resident bytes they gave back.
 */
export async function memoryReleaseCounts(
  facade: ServiceProcess,
): Promise<{ armed: number; releases: number; releasedBytes: number }> {
  const text = await (await fetch(`${metricsUrls.get(facade) ?? facade.url}/metrics`)).text();
  const value = (name: string): number => {
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  return {
    armed: value('facade_memory_release_armed'),
    releases: value('facade_memory_releases_total'),
    releasedBytes: value('facade_memory_released_bytes_total'),
  };
}

/**
 * What the facade itself says of a fan-out, from its `/metrics`: the longest event-loop delay since
 * the last scrape (`nodejs_eventloop_lag_max_seconds`; prom-client starts it anew at each scrape)
 * and how many deliveries had left it within 0.5 s and 1 s of their event's `occurredAt`
 * (`facade_event_delivery_latency_seconds`, counted since start: subtract a reading taken before).
 */
export interface FacadeFanoutReading {
  eventLoopLagMaxMs: number;
  deliveries: number;
  within500Ms: number;
  within1s: number;
}

export async function readFanoutMetrics(facade: ServiceProcess): Promise<FacadeFanoutReading> {
  const text = await (await fetch(`${metricsUrls.get(facade) ?? facade.url}/metrics`)).text();
  const value = (line: string): number => {
    const escaped = line.replace(/[{}.]/g, (character) => `\\${character}`);
    const match = new RegExp(`^${escaped} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  const histogram = 'facade_event_delivery_latency_seconds';
  return {
    eventLoopLagMaxMs: value('nodejs_eventloop_lag_max_seconds') * 1000,
    deliveries: value(`${histogram}_count`),
    within500Ms: value(`${histogram}_bucket{le="0.5"}`),
    within1s: value(`${histogram}_bucket{le="1"}`),
  };
}

/** One live transport's open connections and running subscriptions (`facade_live_*{transport}`). */
export async function transportCounts(
  facade: ServiceProcess,
  transport: string,
): Promise<{ connections: number; subscriptions: number }> {
  const text = await (await fetch(`${metricsUrls.get(facade) ?? facade.url}/metrics`)).text();
  const gauge = (name: string): number => {
    const match = new RegExp(`^${name}\\{transport="${transport}"\\} (\\S+)$`, 'm').exec(text);
    return match ? Number(match[1]) : Number.NaN;
  };
  return {
    connections: gauge('facade_live_connections'),
    subscriptions: gauge('facade_live_subscriptions'),
  };
}

/** Polls {@link liveCounts} until `done` holds or `timeoutMs` passed; returns the last counts. */
export async function waitForLiveCounts(
  facade: ServiceProcess,
  done: (counts: { connections: number; subscriptions: number }) => boolean,
  timeoutMs: number,
): Promise<{ connections: number; subscriptions: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = await liveCounts(facade);
    if (done(counts) || Date.now() > deadline) return counts;
    await sleep(200);
  }
}

/** `GET` requests the emulator has received under `/v3` (every read; nothing else is sent here). */
export async function upstreamRequests(emulator: ServiceProcess): Promise<number> {
  const log = (await (await fetch(`${emulator.url}/_emulator/requests`)).json()) as {
    byRoute: Record<string, number>;
  };
  let gets = 0;
  for (const [route, count] of Object.entries(log.byRoute)) if (route.startsWith('GET ')) gets += count;
  return gets;
}

let eventSequence = 0;
export function accountUpdated(index: number) {
  eventSequence += 1;
  return {
    id: `evt_bench_fanout_${process.pid}_${Date.now()}_${eventSequence}_${index}`,
    type: 'account.updated',
    occurredAt: new Date().toISOString(),
    environment: 'sandbox',
    data: {
      customerId: CUSTOMER_ID,
      resourceType: 'account',
      resourceId: ACCOUNT_ID,
      object: { id: ACCOUNT_ID },
    },
  };
}

/**
 * One top-up of the benchmarks' account at the emulator (`emulatorUrl`): what changes the account,
 * so that a live query of it has a new result once the webhook telling of it arrives.
 */
export async function topUp(emulatorUrl: string): Promise<void> {
  const response = await fetch(`${emulatorUrl}/v3/sandbox/accounts/${ACCOUNT_ID}/topup`, {
    method: 'POST',
    headers: {
      'x-api-key': API_KEY,
      'content-type': 'application/json',
      'idempotency-key': `bench-live-${String(Date.now())}-${String(Math.random())}`,
    },
    body: JSON.stringify({ amount: '1.00', currency: 'USDC' }),
  });
  if (response.status !== 200) throw new Error(`top-up answered ${String(response.status)}`);
  await response.text();
}

/** A Standard Webhooks delivery, signed the way the upstream (and the emulator) signs it. */
export async function postSigned(
  facadeUrl: string,
  secret: string,
  event: { id: string },
): Promise<{ status: number; body: unknown }> {
  const body = JSON.stringify(event);
  const timestamp = Math.floor(Date.now() / 1000);
  const response = await fetch(`${facadeUrl}/webhooks/platform`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ secret, id: event.id, timestamp, body }),
    },
    body,
  });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed };
}

/** A child process holding subscribers (`fanout-clients.ts`), asked one thing at a time per request id. */
export interface ClientProcess {
  pid: number;
  ask(request: ClientsRequest): Promise<ClientsReply>;
  stop(): void;
}

let nextRequestId = 0;
export function startClientProcess(): ClientProcess {
  const child: ChildProcess = fork(`${root}bench/fanout-clients.ts`, [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<
    number,
    { resolve: (reply: ClientsReply) => void; reject: (error: Error) => void }
  >();
  child.on('message', (message: unknown) => {
    const reply = message as ClientsReply;
    waiting.get(reply.id)?.resolve(reply);
    waiting.delete(reply.id);
  });
  child.once('exit', (code) => {
    for (const { reject } of waiting.values())
      reject(new Error(`a client process exited (${String(code)}) before answering`));
    waiting.clear();
  });
  return {
    pid: child.pid ?? 0,
    ask(request) {
      nextRequestId += 1;
      const id = nextRequestId;
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        child.send({ ...request, id });
      });
    },
    stop() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
