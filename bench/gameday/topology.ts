/**
 * The production topology of the game day on one machine, started from the shipped files:
 *
 * - the OpenID issuer (dev-issuer/, in this process) with one client per environment;
 * - the emulator (the upstream), from the image's file set as compose.yaml runs it;
 * - Redis ({@link startRedisTopology}: a single AOF Redis, or primary + replica + three sentinels);
 * - three facade replicas, each the image's CMD from the image's file set (scripts/image-file-set.ts)
 *   as its `node` user, with deploy/kubernetes/facade.env's settings and, where the Deployment
 *   takes a Secret, what a deployment serving both environments is given: a key per environment
 *   from a mounted Secret file (`UPSTREAM_API_KEY_<ENV>_FILE`, rotated by a symlink swap as the
 *   kubelet does) and the signing secret of the webhook endpoint registered once per environment
 *   at the Service (`WEBHOOK_SECRETS_<ENV>`);
 * - the Service in front of them (service.ts), probing `/readyz` as the Deployment does;
 * - the supergraph, composed by `npm run supergraph` with the Service as the facade's URL;
 * - the Hive Gateway CLI over it, with deploy/gateway.config.ts and compose.yaml's environment.
 *
 * The methods are what faults need: kill, stop and start a replica or the gateway, signal the
 * replicas, read what each process logged.
 */
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startDevIssuer, type DevIssuer } from '../../dev-issuer/index.ts';
import { mountedSecret, type MountedSecret } from '../../scripts/key-rotation.ts';
import type { ImageFileSet } from '../../scripts/image-file-set.ts';
import { findFreePort } from '../processes.ts';
import { answers, waitReady, type Child, type Children, type SpawnRequest } from './children.ts';
import { startRedisTopology, type RedisTopology, type RedisVariant } from './redis-topology.ts';
import { startService, type Service } from './service.ts';
import {
  GATEWAY_CONFIG_DIR,
  ROOT,
  shippedDeployment,
  shippedGatewayEnvironment,
  shippedSettings,
  shippedTrustedDocuments,
  type ShippedDeployment,
} from './shipped.ts';

/** The upstream environments, each with its own key, webhook route and callers. */
export const ENVIRONMENTS = ['sandbox', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** The emulator's keys the replicas start with (emulator/README.md). */
export const FACADE_KEYS: Record<Environment, { key: string; identity: string }> = {
  sandbox: { key: 'sk_sandbox_emulator', identity: 'sandbox-read-write' },
  live: { key: 'sk_live_emulator', identity: 'live-read-write' },
};

/** The platform's own writers (events that do not come from the facade), an identity each. */
export const PRODUCER_KEYS: Record<Environment, { key: string; identity: string }> = {
  sandbox: { key: 'sk_sandbox_gameday_producer', identity: 'gameday-producer-sandbox' },
  live: { key: 'sk_live_gameday_producer', identity: 'gameday-producer-live' },
};

/** A read-only sandbox key, for reading the ledger whatever the facade's key is. */
export const LEDGER_KEY = 'sk_sandbox_emulator_readonly';

/** What each environment's callers may read: one customer each (the tokens' customer ids claim). */
export const CUSTOMERS: Record<Environment, { customerId: string; accountId: string }> = {
  sandbox: { customerId: 'cus_globex', accountId: 'acc_globex_eth' },
  live: { customerId: 'cus_live_northwind', accountId: 'acc_live_northwind_eth' },
};

export const REPLICA_NAMES = ['facade-1', 'facade-2', 'facade-3'] as const;
export type ReplicaName = (typeof REPLICA_NAMES)[number];

/** Budgets sized for the game day's load: its two identities stand for hundreds of clients. */
const LOAD_BUDGETS = {
  RATE_LIMIT_REQUESTS: '1000000',
  RATE_LIMIT_WS_CONNECTS: '1000000',
  RATE_LIMIT_SUBSCRIPTIONS: '1000000',
};

interface Replica {
  name: ReplicaName;
  port: number;
  metricsPort: number;
  child: Child | undefined;
}

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
  readonly service: Service;
  readonly gatewayUrl: string;
  readonly redis: RedisTopology;
  readonly deployment: ShippedDeployment;
  /** Each environment's mounted key file. */
  readonly secrets: Record<Environment, MountedSecret>;
  /** The key each environment's file holds now (a rotation changes it). */
  readonly keys: Record<Environment, string>;
  /** The trusted-documents manifest the replicas read (TRUSTED_DOCUMENTS). */
  readonly trustedDocumentsPath: string;
  /** Each environment's webhook endpoint at the emulator. */
  readonly webhookEndpoints: Record<Environment, string>;
  /** The environment of every replica (the latest start's), PATH and HOME aside. */
  replicaEnvironment(): Record<string, string>;
  replicas(): readonly { name: ReplicaName; child: Child | undefined; port: number }[];
  /** `kill -9` of a replica's process group; resolves once it has exited. */
  killReplica(name: ReplicaName): Promise<void>;
  /** Termination as the kubelet does it: out of the endpoints, preStop, SIGTERM, SIGKILL after the grace. */
  terminateReplica(name: ReplicaName): Promise<{ drainMs: number; exit: number | string }>;
  /** Starts a stopped replica again (same ports); resolves once it is in the Service's endpoints. */
  startReplica(name: ReplicaName): Promise<number>;
  /** Sends `signal` to every running replica. */
  signalReplicas(signal: NodeJS.Signals): void;
  /** SIGTERM to the gateway, then the same command again; resolves once it answers /readiness. */
  restartGateway(): Promise<{ downMs: number }>;
  /** Every process's JSON log lines counted by `level: msg`, by process name. */
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

/** Starts the whole topology; on failure, what was started is left to `children.stopAll()`. */
export async function startTopology(options: TopologyOptions): Promise<Topology> {
  const { children, fileSet, dir, log } = options;
  const user = fileSet.user;
  const giveToImageUser = (path: string): void => {
    if (user !== undefined) chownSync(path, user.uid, user.gid);
  };
  const deployment = shippedDeployment();
  // Every process of the topology ever started, for the log counts of a name across its restarts.
  const started: Child[] = [];
  const spawn = (request: SpawnRequest): Child => {
    const child = children.spawn(request);
    started.push(child);
    return child;
  };

  const issuer = await startDevIssuer({
    accessTokenTtlSeconds: 6 * 3600,
    clients: ENVIRONMENTS.map((environment) => ({
      clientId: `gameday-${environment}`,
      clientSecret: `gameday-${environment}-secret`,
      roles: [],
      customerIds: [CUSTOMERS[environment].customerId],
      environment,
    })),
  });
  let service: Service | undefined;
  try {
    // The upstream, from the image as compose.yaml runs it (`npm run emulator`: node emulator/main.ts).
    const emulatorPort = await findFreePort();
    const emulatorUrl = `http://127.0.0.1:${emulatorPort}`;
    const emulatorCommand = fileSet.nodeCommand(['emulator/main.ts'], {
      EMULATOR_HOST: '127.0.0.1',
      EMULATOR_PORT: String(emulatorPort),
      EMULATOR_DATA: 'demo',
    });
    const emulator = spawn({ name: 'emulator', ...emulatorCommand });
    await waitReady(emulator, () => answers(`${emulatorUrl}/_emulator/health`, 200), 'the emulator');
    for (const environment of ENVIRONMENTS)
      await addIdentity(emulatorUrl, environment, PRODUCER_KEYS[environment]);
    log(`emulator ${emulatorUrl}`);

    const redis = await startRedisTopology(options.redis, {
      dir: join(dir, 'redis'),
      children,
      throughSentinel: options.throughSentinel,
    });
    log(`redis: ${await redis.describe()}`);

    service = await startService(deployment.probe);
    const webhookEndpoints = {} as Record<Environment, string>;
    const webhookSecrets = {} as Record<Environment, string>;
    const secrets = {} as Record<Environment, MountedSecret>;
    for (const environment of ENVIRONMENTS) {
      // Registered once, at the Service, with the secret given to every replica (the Kubernetes
      // base's way: a retried delivery lands on whichever replica is ready).
      const endpoint = await registerWebhookEndpoint(
        emulatorUrl,
        FACADE_KEYS[environment].key,
        `${service.url}/webhooks/platform/${environment}`,
      );
      webhookEndpoints[environment] = endpoint.id;
      webhookSecrets[environment] = endpoint.secret;
      const secret = mountedSecret(`${FACADE_KEYS[environment].key}\n`);
      chmodSync(secret.dir, 0o700);
      giveToImageUser(secret.dir);
      secrets[environment] = secret;
    }
    const trustedDocumentsDir = join(dir, 'trusted-documents');
    mkdirSync(trustedDocumentsDir, { recursive: true });
    const trustedDocumentsPath = join(trustedDocumentsDir, 'trusted-documents.json');
    writeFileSync(trustedDocumentsPath, JSON.stringify(shippedTrustedDocuments(), null, 2));

    const settings = shippedSettings();
    delete settings.REDIS_URL;
    const replicaEnvironment = (): Record<string, string> => ({
      ...settings,
      // Loopback: the replicas are reached through the Service on this machine only.
      HOST: '127.0.0.1',
      UPSTREAM_BASE_URL: emulatorUrl,
      AUTH_ISSUER: issuer.issuer,
      AUTH_AUDIENCE: issuer.audience,
      WEBHOOK_PUBLIC_URL: `${service!.url}/webhooks/platform`,
      TRUSTED_DOCUMENTS: trustedDocumentsPath,
      ...redis.facadeEnv(),
      UPSTREAM_API_KEY_SANDBOX_FILE: secrets.sandbox.file,
      UPSTREAM_API_KEY_LIVE_FILE: secrets.live.file,
      WEBHOOK_SECRETS_SANDBOX: webhookSecrets.sandbox,
      WEBHOOK_SECRETS_LIVE: webhookSecrets.live,
      ...LOAD_BUDGETS,
    });

    const replicas: Replica[] = [];
    for (const name of REPLICA_NAMES) {
      const replica = {
        name,
        port: await findFreePort(),
        metricsPort: await findFreePort(),
        child: undefined,
      };
      replicas.push(replica);
      service.add(name, replica.port);
    }
    const replicaOf = (name: ReplicaName): Replica => replicas.find((replica) => replica.name === name)!;
    const start = async (replica: Replica): Promise<number> => {
      const started = Date.now();
      const command = fileSet.command({
        ...replicaEnvironment(),
        PORT: String(replica.port),
        METRICS_PORT: String(replica.metricsPort),
      });
      const child = spawn({ name: replica.name, ...command });
      replica.child = child;
      // The kubelet: a running container is probed; an exited one leaves the endpoints at once.
      service!.markServing(replica.name, true);
      void child.exited.then(() => {
        if (replica.child === child) service!.markServing(replica.name, false);
      });
      await service!.waitReady(replica.name);
      return Date.now() - started;
    };
    await Promise.all(replicas.map(start));
    log(`replicas ready behind the Service ${service.url}: ${service.ready().join(', ')}`);

    // The supergraph, composed by `npm run supergraph` with the Service as the facade's URL.
    const supergraphPath = join(dir, 'supergraph.graphql');
    const composer = children.spawn({
      name: 'supergraph',
      file: 'npm',
      args: [
        'run',
        '--silent',
        'supergraph',
        '--',
        '--out',
        supergraphPath,
        '--facade-url',
        `${service.url}/graphql`,
        '--support-notes-url',
        `http://127.0.0.1:${await findFreePort()}/graphql`,
      ],
      options: {
        cwd: ROOT,
        env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}` },
      },
    });
    const composed = await composer.exited;
    if (composed !== 0) throw new Error(`npm run supergraph failed:\n${composer.lines().join('\n')}`);

    // The gateway CLI, as the official image runs it, with compose.yaml's environment.
    const gatewayPort = await findFreePort();
    const rewrite = (value: string): string =>
      value
        .replace(/^https?:\/\/dev-issuer:\d+$/, issuer.issuer)
        .replace(/^https?:\/\/platform:\d+/, service!.url);
    const gatewayEnvironment = Object.fromEntries(
      Object.entries(shippedGatewayEnvironment()).map(([name, value]) => [name, rewrite(value)]),
    );
    let gateway: Child | undefined;
    const startGateway = async (): Promise<void> => {
      gateway = spawn({
        name: 'gateway',
        file: process.execPath,
        args: [
          join(ROOT, 'node_modules/@graphql-hive/gateway/dist/bin.js'),
          'supergraph',
          supergraphPath,
          '--host',
          '127.0.0.1',
          '--port',
          String(gatewayPort),
        ],
        options: {
          cwd: GATEWAY_CONFIG_DIR,
          env: {
            PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
            HOME: process.env.HOME ?? dir,
            ...gatewayEnvironment,
          },
        },
      });
      await waitReady(
        gateway,
        () => answers(`http://127.0.0.1:${gatewayPort}/readiness`, 200),
        'hive-gateway /readiness',
      );
    };
    await startGateway();
    log(`gateway http://127.0.0.1:${gatewayPort}/graphql`);

    const stop = async (replica: Replica, how: 'kill' | 'term'): Promise<number | string> => {
      const child = replica.child;
      if (child === undefined) throw new Error(`${replica.name} is not running`);
      if (how === 'kill') await children.kill(child);
      else await children.stop(child, deployment.graceMs);
      return child.exited;
    };
    return {
      issuer,
      emulatorUrl,
      service,
      gatewayUrl: `http://127.0.0.1:${gatewayPort}/graphql`,
      redis,
      deployment,
      secrets,
      keys: { sandbox: FACADE_KEYS.sandbox.key, live: FACADE_KEYS.live.key },
      trustedDocumentsPath,
      webhookEndpoints,
      replicaEnvironment,
      replicas: () => replicas,
      async killReplica(name) {
        await stop(replicaOf(name), 'kill');
      },
      async terminateReplica(name) {
        const replica = replicaOf(name);
        service!.markServing(name, false);
        await sleep(deployment.preStopMs);
        const signalled = Date.now();
        const exit = await stop(replica, 'term');
        return { drainMs: Date.now() - signalled, exit };
      },
      startReplica: (name) => start(replicaOf(name)),
      signalReplicas(signal) {
        for (const replica of replicas) {
          const pid = replica.child?.running() === true ? replica.child.process.pid : undefined;
          if (pid !== undefined) process.kill(pid, signal);
        }
      },
      async restartGateway() {
        const stopped = Date.now();
        if (gateway !== undefined) await children.stop(gateway, 30_000);
        await startGateway();
        return { downMs: Date.now() - stopped };
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
        await service?.close();
        await issuer.close();
      },
    };
  } catch (error) {
    await service?.close();
    await issuer.close();
    throw error;
  }
}
