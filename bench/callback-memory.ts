/**
 * `npm run bench:callback`: what 1,000 subscriptions through Hive Gateway cost the facade and the
 * gateway when the gateway subscribes over graphql-ws (the shipped configuration: one socket per
 * caller, every subscription of that caller on it) and over Apollo's HTTP callback protocol (no
 * socket: a POST per subscription, then the facade POSTs each result and heartbeat back).
 *
 * The emulator, the facade (with the memory probe), the dev issuer and the Hive Gateway CLI run as
 * separate processes on loopback; the subscribers are graphql-ws clients of the gateway in this
 * process, one token (acme's client), spread over sockets of 50. Per mode: the facade's heap after
 * a full collection and its RSS, and the gateway's RSS, before the subscribers and once the
 * facade counts them all running, each divided by the subscriptions, and the file descriptors
 * (sockets) the facade opened for them; then one event's time to the
 * last subscriber. The modes take turns (graphql-ws first, then callbacks), each with a facade and a
 * gateway of its own.
 *
 * Options (environment): BENCH_CALLBACK_SUBSCRIBERS (1000), BENCH_CALLBACK_HEARTBEAT_MS (30000, the
 * heartbeat interval the gateway asks the facade for: the facade gives each message half of it, so
 * on a machine too busy for the gateway to take one in time the subscription ends, and the run
 * stops saying so rather than waiting for it). Prints a Markdown table.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, type Client } from 'graphql-ws';
import { startDevIssuer } from '../dev-issuer/index.ts';
import { generateWebhookSecret } from '../emulator/webhooks/signature.ts';
import { createSupportNotesServer } from '../examples/support-notes/server.ts';
import { composeSupergraph, loadRepositorySubgraphs } from '../scripts/compose-supergraph.ts';
import { positiveIntegerFromEnv } from './env.ts';
import { readMemory } from './lib/facade-memory.ts';
import { accountUpdated, postSigned, root, startFacade, transportCounts } from './lib/live-facade.ts';
import { findFreePort, readRssBytes, startEmulatorService, type ServiceProcess } from './processes.ts';

const subscribers = positiveIntegerFromEnv('BENCH_CALLBACK_SUBSCRIBERS', 1000);
const heartbeatMs = positiveIntegerFromEnv('BENCH_CALLBACK_HEARTBEAT_MS', 30_000);
const PER_SOCKET = 50;
const CLIENT_ID = 'bench-acme';
const SUBSCRIPTION =
  'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId type } }';

type Mode = 'graphql-ws' | 'callback';

interface Measured {
  mode: Mode;
  facadeHeapPerSubscription: number;
  facadeRssPerSubscription: number;
  gatewayRssPerSubscription: number;
  /** File descriptors the facade opened for them (sockets, mostly). */
  facadeDescriptors: number;
  eventToLastMs: number;
}

async function main(): Promise<void> {
  const issuer = await startDevIssuer({
    clients: [{ clientId: CLIENT_ID, clientSecret: `${CLIENT_ID}-secret`, customerIds: ['cus_acme'] }],
  });
  const emulator = await startEmulatorService();
  const notes = createSupportNotesServer();
  const { url: supportNotesUrl } = await notes.listen(0);
  const results: Measured[] = [];
  try {
    const token = await issuer.token(CLIENT_ID);
    for (const mode of ['graphql-ws', 'callback'] as const) {
      results.push(await measure(mode, { emulatorUrl: emulator.url, supportNotesUrl, token, issuer }));
    }
  } finally {
    await notes.close();
    await emulator.stop();
    await issuer.close();
  }
  const kib = (bytes: number) => (bytes / 1024).toFixed(1);
  console.log(
    `\n${subscribers} subscriptions through Hive Gateway 2.15.1, one caller (load ${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores; heartbeat ${heartbeatMs} ms)\n`,
  );
  console.log(
    '| gateway → facade | facade heap / subscription | facade RSS / subscription | gateway RSS / subscription | facade descriptors | event → last subscriber |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const result of results) {
    console.log(
      `| ${result.mode} | ${kib(result.facadeHeapPerSubscription)} KiB | ${kib(result.facadeRssPerSubscription)} KiB | ${kib(result.gatewayRssPerSubscription)} KiB | ${result.facadeDescriptors} | ${result.eventToLastMs.toFixed(0)} ms |`,
    );
  }
}

interface Parts {
  emulatorUrl: string;
  supportNotesUrl: string;
  token: string;
  issuer: { issuer: string; audience: string; jwksUrl: string };
}

/** One mode: a facade and a gateway of its own, the subscribers, the readings. */
async function measure(mode: Mode, parts: Parts): Promise<Measured> {
  const secret = generateWebhookSecret();
  const gatewayPort = await findFreePort();
  const facade = await startFacade(parts.emulatorUrl, secret, undefined, 'bench:', 0, {
    env: {
      AUTH_MODE: 'oidc',
      AUTH_ISSUER: parts.issuer.issuer,
      AUTH_AUDIENCE: parts.issuer.audience,
      AUTH_JWKS_URL: parts.issuer.jwksUrl,
      // Every subscription of the caller on the gateway's one socket, over graphql-ws.
      GRAPHQL_WS_MAX_SUBSCRIPTIONS: String(subscribers + 10),
      SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `http://127.0.0.1:${gatewayPort}/callback/`,
    },
  });
  const gateway = await startGateway(mode, gatewayPort, facade.url, parts);
  const clients: Client[] = [];
  try {
    // Warm: one subscription through the gateway, then none, so both sides have loaded their code.
    const ignore = () => undefined;
    await subscribeAll(gatewayPort, parts.token, 1, clients, ignore, ignore);
    await disposeAll(clients);
    await waitFor(
      async () => (await transportCounts(facade, mode)).subscriptions === 0,
      'the warm-up to end',
    );
    const before = await readings(facade, gateway);
    let received = 0;
    let ended = 0;
    await subscribeAll(
      gatewayPort,
      parts.token,
      subscribers,
      clients,
      () => (received += 1),
      () => (ended += 1),
    );
    // A subscription that ends before the event never hears it: say so, rather than wait for it.
    const noneEnded = (): void => {
      if (ended > 0) {
        throw new Error(
          `${ended} subscription(s) over ${mode} ended before the event (a message the gateway did not take within half the heartbeat interval?): try a longer BENCH_CALLBACK_HEARTBEAT_MS or a quieter machine`,
        );
      }
    };
    let running = 0;
    await waitFor(
      async () => {
        noneEnded();
        return (running = (await transportCounts(facade, mode)).subscriptions) >= subscribers;
      },
      () => `${subscribers} subscriptions at the facade over ${mode} (${running} running)`,
    );
    await sleep(2_000);
    const after = await readings(facade, gateway);
    const sentAt = performance.now();
    const posted = await postSigned(facade.url, secret, accountUpdated(0));
    if (posted.status !== 200) throw new Error(`the webhook was answered ${posted.status}`);
    await waitFor(async () => {
      noneEnded();
      return received >= subscribers;
    }, 'the event at every subscriber');
    const eventToLastMs = performance.now() - sentAt;
    return {
      mode,
      facadeHeapPerSubscription: (after.facadeHeap - before.facadeHeap) / subscribers,
      facadeRssPerSubscription: (after.facadeRss - before.facadeRss) / subscribers,
      gatewayRssPerSubscription: (after.gatewayRss - before.gatewayRss) / subscribers,
      facadeDescriptors: after.facadeDescriptors - before.facadeDescriptors,
      eventToLastMs,
    };
  } finally {
    await disposeAll(clients);
    await gateway.stop();
    await facade.stop();
  }
}

async function readings(facade: ServiceProcess, gateway: { pid: number }) {
  const memory = await readMemory(facade, 'full');
  return {
    facadeHeap: memory.heapUsedBytes ?? Number.NaN,
    facadeRss: memory.rssBytes,
    facadeDescriptors: (await readdir(`/proc/${facade.pid}/fd`)).length,
    gatewayRss: await readRssBytes(gateway.pid),
  };
}

/** `count` subscriptions at the gateway over graphql-ws, {@link PER_SOCKET} to a socket. */
async function subscribeAll(
  gatewayPort: number,
  token: string,
  count: number,
  clients: Client[],
  onResult: () => void,
  onEnd: () => void,
): Promise<void> {
  for (let opened = 0; opened < count; opened += PER_SOCKET) {
    const client = createClient({
      url: `ws://127.0.0.1:${gatewayPort}/graphql`,
      retryAttempts: 0,
      lazy: false,
      connectionParams: { Authorization: `Bearer ${token}` },
      webSocketImpl: WebSocket,
    });
    clients.push(client);
    for (let on = 0; on < Math.min(PER_SOCKET, count - opened); on += 1) {
      client.subscribe(
        { query: SUBSCRIPTION },
        {
          next: (value) => {
            if (value.data) onResult();
          },
          error: (error: unknown) => {
            console.error('a subscription failed', error);
            onEnd();
          },
          complete: onEnd,
        },
      );
    }
  }
}

async function disposeAll(clients: Client[]): Promise<void> {
  await Promise.all(clients.splice(0).map(async (client) => client.dispose()));
}

/** The Hive Gateway CLI over a supergraph routing `platform` to `facadeUrl`, in `mode`. */
async function startGateway(mode: Mode, port: number, facadeUrl: string, parts: Parts) {
  const directory = await mkdtemp(join(tmpdir(), 'bench-callback-'));
  const supergraph = join(directory, 'supergraph.graphql');
  const subgraphs = loadRepositorySubgraphs({
    facadeUrl: `${facadeUrl}/graphql`,
    supportNotesUrl: parts.supportNotesUrl,
  });
  await writeFile(supergraph, composeSupergraph(subgraphs).supergraphSdl);
  const child: ChildProcess = spawn(
    process.execPath,
    [
      `${root}node_modules/@graphql-hive/gateway/dist/bin.js`,
      'supergraph',
      supergraph,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ],
    {
      cwd: mode === 'callback' ? `${root}test/federation/gateway-variants` : `${root}deploy`,
      env: {
        PATH: `${root}node_modules/.bin:${process.env.PATH ?? ''}`,
        HOME: process.env.HOME ?? tmpdir(),
        AUTH_ISSUER: parts.issuer.issuer,
        AUTH_AUDIENCE: parts.issuer.audience,
        AUTH_JWKS_URL: parts.issuer.jwksUrl,
        ...(mode === 'callback'
          ? {
              GATEWAY_CALLBACK_PUBLIC_URL: `http://127.0.0.1:${port}/callback`,
              GATEWAY_CALLBACK_HEARTBEAT_MS: String(heartbeatMs),
            }
          : {}),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  await waitFor(async () => {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/readiness`);
      await response.body?.cancel();
      return response.ok;
    } catch {
      return false;
    }
  }, 'the gateway to be ready');
  return {
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await rm(directory, { recursive: true, force: true });
    },
  };
}

async function waitFor(
  condition: () => Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 300_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await sleep(200);
  }
}

await main();
