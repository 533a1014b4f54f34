/**
 * The production topology of the game day on one machine, started from the shipped files:
 *
 * - the OpenID issuer (dev-issuer/, in this process) with one client per environment;
 * - the emulator (the upstream), from the image's file set as compose.yaml runs it;
 * - Redis ({@link startRedisTopology}: the shipped primary, replica and three sentinels, each started
 *   by deploy/kubernetes/redis-ha.sh, or a single AOF Redis);
 * - three facade replicas, each the image's CMD from the image's file set (scripts/image-file-set.ts)
 *   as its `node` user, with deploy/kubernetes/facade.env's settings and, where the Deployment
 *   takes a Secret, what a deployment serving both environments is given: a key per environment
 *   from a mounted Secret file (`UPSTREAM_API_KEY_<ENV>_FILE`, rotated by a symlink swap as the
 *   kubelet does) and the signing secret of the webhook endpoint registered once per environment
 *   at the Service (`WEBHOOK_SECRETS_<ENV>`);
 * - the facade Service in front of them (service.ts), probing as the Deployment declares;
 * - the supergraph, composed by `npm run supergraph` with the facade Service as the facade's URL;
 * - the Hive Gateway CLI over it, with deploy/gateway.config.ts and the environment of the base's
 *   gateway Deployment (deploy/kubernetes/gateway.yaml): as many as its autoscaler keeps at least,
 *   behind a Service of their own probing as the Deployment declares.
 *
 * The methods are what faults need: kill, stop and start a replica or a gateway, signal the
 * replicas, read what each process logged.
 */
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDevIssuer, type DevIssuer } from '../../dev-issuer/index.ts';
import { mountedSecret, type MountedSecret } from '../../scripts/key-rotation.ts';
import type { ImageCommand, ImageFileSet } from '../../scripts/image-file-set.ts';
import { findFreePort } from '../processes.ts';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server.ts';
import { answers, waitReady, type Child, type Children, type SpawnRequest } from './children.ts';
import { startRedisTopology, type RedisTopology, type RedisVariant } from './redis-topology.ts';
import { startService, type Service } from './service.ts';
import {
  GATEWAY_CONFIG_DIR,
  ROOT,
  shippedDeployment,
  shippedGatewayDeployment,
  shippedSettings,
  shippedTrustedDocuments,
  type ShippedDeployment,
} from './shipped.ts';

/** The upstream environments, each with its own key, webhook route and callers. */
export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** The emulator's keys the replicas start with (emulator/README.md), and their identities. */
export const FACADE_KEYS: Readonly<Record<Environment, { key: string; identity: string }>> = {
  sandbox: { key: 'sk_sandbox_emulator', identity: 'sandbox-read-write' },
  live: { key: 'sk_live_emulator', identity: 'live-read-write' },
};

/** The platform's own writers (events that do not come from the facade), an identity each. */
export const PRODUCER_KEYS: Readonly<Record<Environment, { key: string; identity: string }>> = {
  sandbox: { key: 'sk_sandbox_gameday_producer', identity: 'gameday-producer-sandbox' },
  live: { key: 'sk_live_gameday_producer', identity: 'gameday-producer-live' },
};

/** A read-only sandbox key, for reading the ledger whatever the facade's key is. */
export const LEDGER_KEY = 'sk_sandbox_emulator_readonly';

/** What each environment's callers may read: one customer each (the tokens' customer ids claim). */
export const CUSTOMERS: Readonly<Record<Environment, { customerId: string; accountId: string }>> = {
  sandbox: { customerId: 'cus_globex', accountId: 'acc_globex_eth' },
  live: { customerId: 'cus_live_northwind', accountId: 'acc_live_northwind_eth' },
};

/** Budgets sized for the game day's load: its two identities stand for hundreds of clients. */
const LOAD_BUDGETS = {
  RATE_LIMIT_REQUESTS: '1000000',
  RATE_LIMIT_LIVE_CONNECTS: '1000000',
  RATE_LIMIT_LIVE_OPERATIONS: '1000000',
};

/** The gateways' own client at the issuer, given to them where their Deployment takes one from a Secret. */
const GATEWAY_CLIENT = {
  clientId: 'gameday-gateway',
  clientSecret: 'gameday-gateway-secret',
  roles: ['gateway'],
};

/** Where the replicas' Redis is and how they log in to it: the run's topology gives these. */
const REDIS_CONNECTION_VARIABLES = new Set([
  'REDIS_URL',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_MASTER',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
]);

/** How long the kubelet waits before it starts a crashed container again (its first restart). */
export const CRASH_RESTART_DELAY_MS = 1_000;

/** A process behind a Service, started, stopped and started again on the same port. */
export interface Pod {
  readonly name: string;
  readonly port: number;
  child(): Child | undefined;
  /** Starts it; resolves once it is in the Service's endpoints, with how long that took. */
  start(): Promise<number>;
  /** `kill -9` of its process group; resolves once it has exited. */
  kill(): Promise<void>;
  /** As the kubelet terminates a pod: out of the endpoints, preStop, SIGTERM, SIGKILL after the grace. */
  terminate(): Promise<{ drainMs: number; exit: number | string }>;
}

/** A {@link Pod} of `service` whose process `command()` gives, through `spawn`. */
function podOf(
  name: string,
  port: number,
  service: Service,
  deployment: ShippedDeployment,
  spawn: (request: SpawnRequest) => Child,
  children: Children,
  command: () => Omit<SpawnRequest, 'name'>,
): Pod {
  let current: Child | undefined;
  service.add(name, port);
  return {
    name,
    port,
    child: () => current,
    async start() {
      const started = Date.now();
      const child = spawn({ name, ...command() });
      current = child;
      // The kubelet: a running container is probed; an exited one leaves the endpoints at once.
      service.markServing(name, true);
      void child.exited.then(() => {
        if (current === child) service.markServing(name, false);
      });
      await service.waitReady(name);
      return Date.now() - started;
    },
    async kill() {
      if (current !== undefined) await children.kill(current);
    },
    async terminate() {
      if (current === undefined) throw new Error(`${name} is not running`);
      service.markServing(name, false);
      await sleep(deployment.preStopMs);
      const signalled = Date.now();
      await children.stop(current, deployment.graceMs);
      return { drainMs: Date.now() - signalled, exit: await current.exited };
    },
  };
}

/** What a spawn of an image's command is. */
const imageSpawn = (command: ImageCommand): Omit<SpawnRequest, 'name'> => command;

export interface TopologyOptions {
  children: Children;
  fileSet: ImageFileSet;
  /** A folder the image's user can traverse, for Redis data, secrets and the supergraph. */
  dir: string;
  redis: RedisVariant;
  /** Whether the replicas read `REDIS_SENTINELS` (else they get `REDIS_URL`). */
  throughSentinel: boolean;
  log: (line: string) => void;
}

/** The running topology. */
export interface Topology {
  readonly issuer: DevIssuer;
  readonly emulatorUrl: string;
  /** The facade Service: the replicas' endpoints. */
  readonly service: Service;
  /** The gateways' Service. */
  readonly gatewayService: Service;
  /** The gateway Service's GraphQL endpoint. */
  readonly gatewayUrl: string;
  readonly redis: RedisTopology;
  /** Each environment's mounted key file. */
  readonly secrets: Record<Environment, MountedSecret>;
  /** The key each environment's file holds now (a rotation changes it). */
  readonly keys: Record<Environment, string>;
  /** The trusted-documents manifest the replicas read (TRUSTED_DOCUMENTS). */
  readonly trustedDocumentsPath: string;
  /** Each environment's webhook endpoint at the emulator. */
  readonly webhookEndpoints: Record<Environment, string>;
  readonly replicas: readonly Pod[];
  readonly gateways: readonly Pod[];
  /** Sends `signal` to every running replica. */
  signalReplicas(signal: NodeJS.Signals): void;
  /** Every process's JSON log lines counted by `level: msg`, by process name, across its restarts. */
  messages(): Record<string, Record<string, number>>;
  close(): Promise<void>;
}

/** Registers `url` for account events at the emulator with `apiKey`; the endpoint's id and secret. */
async function registerWebhookEndpoint(
  emulatorUrl: string,
  apiKey: string,
  url: string,
): Promise<{ id: string; secret: string }> {
  const response = await fetch(`${emulatorUrl}/v3/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': apiKey,
      'idempotency-key': `gameday-${process.pid}-${url}`,
    },
    body: JSON.stringify({ url, events: ['account.created', 'account.updated'] }),
  });
  if (response.status !== 201 && response.status !== 200)
    throw new Error(`registering ${url} answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { data: { id: string; secret: string } }).data;
}

/** `POST /_emulator/keys`: a key of a new identity. */
async function addIdentity(
  emulatorUrl: string,
  environment: Environment,
  { key, identity }: { key: string; identity: string },
): Promise<void> {
  const response = await fetch(`${emulatorUrl}/_emulator/keys`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ key, id: identity, environment, scope: 'read_write' }),
  });
  if (response.status !== 201) throw new Error(`adding ${identity} answered ${response.status}`);
}

/** The upstream, from the image as compose.yaml runs it (`npm run emulator`: node emulator/main.ts). */
async function startEmulator(
  fileSet: ImageFileSet,
  spawn: (request: SpawnRequest) => Child,
): Promise<string> {
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  const emulator = spawn({
    name: 'emulator',
    ...imageSpawn(
      fileSet.nodeCommand(['emulator/main.ts'], {
        EMULATOR_HOST: '127.0.0.1',
        EMULATOR_PORT: String(port),
        EMULATOR_DATA: 'demo',
      }),
    ),
  });
  await waitReady(emulator, () => answers(`${url}/_emulator/health`, 200), 'the emulator');
  for (const environment of ENVIRONMENTS) await addIdentity(url, environment, PRODUCER_KEYS[environment]);
  return url;
}

/** Per environment: the webhook endpoint registered at the Service, and the mounted key file. */
async function environmentSecrets(
  emulatorUrl: string,
  serviceUrl: string,
  user: { uid: number; gid: number } | undefined,
): Promise<{
  endpoints: Record<Environment, { id: string; secret: string }>;
  secrets: Record<Environment, MountedSecret>;
}> {
  const endpoints = {} as Record<Environment, { id: string; secret: string }>;
  const secrets = {} as Record<Environment, MountedSecret>;
  for (const environment of ENVIRONMENTS) {
    // Registered once, at the Service, with the secret given to every replica (the Kubernetes
    // base's way: a retried delivery lands on whichever replica is ready).
    endpoints[environment] = await registerWebhookEndpoint(
      emulatorUrl,
      FACADE_KEYS[environment].key,
      `${serviceUrl}/webhooks/platform/${environment}`,
    );
    const secret = mountedSecret(`${FACADE_KEYS[environment].key}\n`);
    chmodSync(secret.dir, 0o700);
    if (user !== undefined) chownSync(secret.dir, user.uid, user.gid);
    secrets[environment] = secret;
  }
  return { endpoints, secrets };
}

/** `npm run supergraph` with the facade Service as the facade's URL; the file it wrote. */
async function composeSupergraph(
  dir: string,
  serviceUrl: string,
  spawn: (request: SpawnRequest) => Child,
): Promise<string> {
  const out = join(dir, 'supergraph.graphql');
  const composer = spawn({
    name: 'supergraph',
    file: 'npm',
    args: [
      'run',
      '--silent',
      'supergraph',
      '--',
      '--out',
      out,
      '--facade-url',
      `${serviceUrl}/graphql`,
      // The example subgraph is not part of the game day: its fields are never asked for.
      '--support-notes-url',
      `http://127.0.0.1:${await findFreePort()}/graphql`,
    ],
    options: {
      cwd: ROOT,
      env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}` },
    },
  });
  if ((await composer.exited) !== 0)
    throw new Error(`npm run supergraph failed:\n${composer.lines().join('\n')}`);
  return out;
}

/**
 * The gateways: the CLI as the official image runs it, as many as the gateway Deployment's
 * autoscaler keeps at least, each with the Deployment's environment; what it reads from the
 * facade's settings (the issuer and audience) is what the replicas here are given.
 */
async function startGateways(
  options: TopologyOptions,
  spawn: (request: SpawnRequest) => Child,
  supergraphPath: string,
  issuer: { issuer: string; audience: string },
  gatewayCacheUrl: string,
): Promise<{ service: Service; pods: Pod[] }> {
  const deployment = shippedGatewayDeployment();
  const service = await startService(deployment.probe);
  const environment: Record<string, string> = {
    ...deployment.environment,
    AUTH_ISSUER: issuer.issuer,
    AUTH_AUDIENCE: issuer.audience,
    GATEWAY_CACHE_REDIS_URL: gatewayCacheUrl,
  };
  // The gateway's own identity (the `gateway` role its requests to the facade carry), where its
  // Deployment takes one from a Secret.
  if (deployment.secretVariables.includes('GATEWAY_CLIENT_ID')) {
    environment.GATEWAY_CLIENT_ID = GATEWAY_CLIENT.clientId;
    environment.GATEWAY_CLIENT_SECRET = GATEWAY_CLIENT.clientSecret;
  }
  const pods: Pod[] = [];
  for (let index = 1; index <= deployment.replicas; index += 1) {
    const port = await findFreePort();
    pods.push(
      podOf(`gateway-${index}`, port, service, deployment, spawn, options.children, () => ({
        file: process.execPath,
        args: [
          join(ROOT, 'node_modules/@graphql-hive/gateway/dist/bin.js'),
          'supergraph',
          supergraphPath,
          '--host',
          '127.0.0.1',
          '--port',
          String(port),
        ],
        options: {
          cwd: GATEWAY_CONFIG_DIR,
          env: {
            PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
            HOME: process.env.HOME ?? options.dir,
            ...environment,
          },
        },
      })),
    );
  }
  await Promise.all(pods.map((pod) => pod.start()));
  options.log(
    `${pods.length} gateways behind ${service.url} (deploy/kubernetes/gateway.yaml: its autoscaler's minimum, probed on ${deployment.probe.path})`,
  );
  return { service, pods };
}

/** Starts the whole topology; on failure, what was started is left to `children.stopAll()`. */
export async function startTopology(options: TopologyOptions): Promise<Topology> {
  const { children, fileSet, dir, log } = options;
  // Every process of the topology ever started, for the log counts of a name across its restarts.
  const started: Child[] = [];
  const spawn = (request: SpawnRequest): Child => {
    const child = children.spawn(request);
    started.push(child);
    return child;
  };
  const issuer = await startDevIssuer({
    accessTokenTtlSeconds: 6 * 3600,
    clients: [
      ...ENVIRONMENTS.map((environment) => ({
        clientId: `gameday-${environment}`,
        clientSecret: `gameday-${environment}-secret`,
        roles: [],
        customerIds: [CUSTOMERS[environment].customerId],
        environment,
      })),
      GATEWAY_CLIENT,
    ],
  });
  const services: Service[] = [];
  let gatewayCache: RedisServer | undefined;
  try {
    const emulatorUrl = await startEmulator(fileSet, spawn);
    log(`emulator ${emulatorUrl}`);
    const redis = await startRedisTopology(options.redis, {
      dir: join(dir, 'redis'),
      children,
      throughSentinel: options.throughSentinel,
    });
    log(`redis: ${await redis.describe()}`);
    // The gateways' response cache, as deploy/kubernetes/gateway-cache.yaml runs it (nothing kept on
    // disk): the gateways keep their answers there and the replicas drop what events make stale.
    const cacheServer = await startRedisServer();
    gatewayCache = cacheServer;
    log(`gateways' response cache: redis ${cacheServer.url} (deploy/kubernetes/gateway-cache.yaml)`);

    const deployment = shippedDeployment();
    const service = await startService(deployment.probe);
    services.push(service);
    const { endpoints, secrets } = await environmentSecrets(emulatorUrl, service.url, fileSet.user);
    const trustedDocumentsPath = join(dir, 'trusted-documents', 'trusted-documents.json');
    mkdirSync(join(dir, 'trusted-documents'), { recursive: true });
    writeFileSync(trustedDocumentsPath, JSON.stringify(shippedTrustedDocuments(), null, 2));

    // How the replicas reach Redis is the topology's to say (`redis.facadeEnv()`), not the shipped
    // addresses': the base's connection variables are left out (its REDIS_MIN_REPLICAS_ACK and
    // REDIS_KEY_PREFIX stay).
    const settings = Object.fromEntries(
      Object.entries(shippedSettings()).filter(([name]) => !REDIS_CONNECTION_VARIABLES.has(name)),
    );
    const replicaEnvironment = (): Record<string, string> => ({
      ...settings,
      // Loopback: the replicas are reached through the Service on this machine only.
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: emulatorUrl,
      AUTH_ISSUER: issuer.issuer,
      AUTH_AUDIENCE: issuer.audience,
      WEBHOOK_PUBLIC_URL: `${service.url}/webhooks/platform`,
      TRUSTED_DOCUMENTS: trustedDocumentsPath,
      ...redis.facadeEnv(),
      GATEWAY_CACHE_REDIS_URL: cacheServer.url,
      UPSTREAM_API_KEY_SANDBOX_FILE: secrets.sandbox.file,
      UPSTREAM_API_KEY_LIVE_FILE: secrets.live.file,
      WEBHOOK_SECRETS_SANDBOX: endpoints.sandbox.secret,
      WEBHOOK_SECRETS_LIVE: endpoints.live.secret,
      ...LOAD_BUDGETS,
    });
    const replicas: Pod[] = [];
    for (const name of ['facade-1', 'facade-2', 'facade-3']) {
      const port = await findFreePort();
      const metricsPort = await findFreePort();
      replicas.push(
        podOf(name, port, service, deployment, spawn, children, () =>
          imageSpawn(
            fileSet.command({
              ...replicaEnvironment(),
              PORT: String(port),
              METRICS_PORT: String(metricsPort),
            }),
          ),
        ),
      );
    }
    await Promise.all(replicas.map((replica) => replica.start()));
    log(`replicas ready behind the Service ${service.url}: ${service.ready().join(', ')}`);

    const supergraphPath = await composeSupergraph(dir, service.url, spawn);
    const gateways = await startGateways(options, spawn, supergraphPath, issuer, cacheServer.url);
    services.push(gateways.service);
    return {
      issuer,
      emulatorUrl,
      service,
      gatewayService: gateways.service,
      gatewayUrl: `${gateways.service.url}/graphql`,
      redis,
      secrets,
      keys: { sandbox: FACADE_KEYS.sandbox.key, live: FACADE_KEYS.live.key },
      trustedDocumentsPath,
      webhookEndpoints: { sandbox: endpoints.sandbox.id, live: endpoints.live.id },
      replicas,
      gateways: gateways.pods,
      signalReplicas(signal) {
        for (const replica of replicas) {
          const child = replica.child();
          if (child?.running() === true && child.process.pid !== undefined)
            process.kill(child.process.pid, signal);
        }
      },
      messages() {
        const all: Record<string, Record<string, number>> = {};
        for (const child of started) {
          const counts = (all[child.name] ??= {});
          for (const [message, count] of child.messages) counts[message] = (counts[message] ?? 0) + count;
        }
        return all;
      },
      async close() {
        await Promise.all(services.map((each) => each.close()));
        await gatewayCache?.stop();
        await issuer.close();
      },
    };
  } catch (error) {
    await Promise.all(services.map((each) => each.close()));
    await gatewayCache?.stop();
    await issuer.close();
    throw error;
  }
}
