/**
 * What the game day takes from the files the project ships, read at each run so that a change to
 * them is what runs next: the replicas' settings (deploy/kubernetes/facade.env), their readiness
 * probe, preStop wait and grace period (deploy/kubernetes/facade-deployment.yaml), the trusted
 * documents they start with (deploy/kubernetes/trusted-documents.json), the gateway's Deployment
 * (deploy/kubernetes/gateway.yaml: its environment, probe, preStop, grace and its autoscaler's
 * minimum; its configuration is deploy/gateway.config.ts, which the CLI reads from deploy/), and the
 * event log's Redis (deploy/kubernetes/redis.yaml, started through its redis-ha.sh).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import type { ReadinessProbe } from './service.ts';

/** The checkout's root. */
export const ROOT = join(import.meta.dirname, '../..');
/** The script every member of the event log's Redis starts with, in compose and Kubernetes alike. */
export const REDIS_HA_SCRIPT = join(import.meta.dirname, '../../deploy/kubernetes/redis-ha.sh');
/** Where the Hive Gateway CLI finds `gateway.config.ts`. */
export const GATEWAY_CONFIG_DIR = join(ROOT, 'deploy');
export const KUBERNETES_DIR = join(ROOT, 'deploy/kubernetes');

/** The Deployment's parts that decide how a replica is probed, stopped and restarted. */
export interface ShippedDeployment {
  probe: ReadinessProbe;
  /** The preStop hook's `sleep` (0 when there is none). */
  preStopMs: number;
  /** `terminationGracePeriodSeconds`: SIGKILL after this much once SIGTERM was sent. */
  graceMs: number;
  /** Variables the Deployment takes from a Secret (replaced here by mounted files and registrations). */
  secretVariables: string[];
}

/** `KEY=value` lines of an env file (comments and blank lines skipped), as kustomize reads them. */
export function readEnvFile(path: string): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const equals = line.indexOf('=');
    if (equals <= 0) throw new Error(`${path}: not KEY=value: ${line}`);
    settings[line.slice(0, equals)] = line.slice(equals + 1);
  }
  return settings;
}

/** The replicas' settings: the ConfigMap's env file. */
export function shippedSettings(): Record<string, string> {
  return readEnvFile(join(KUBERNETES_DIR, 'facade.env'));
}

type Container = {
  env?: { name: string; valueFrom?: { secretKeyRef?: unknown } }[];
  readinessProbe?: {
    httpGet?: { path?: string };
    periodSeconds?: number;
    timeoutSeconds?: number;
    failureThreshold?: number;
  };
  lifecycle?: { preStop?: { exec?: { command?: string[] } } };
};

type PodSpec = { terminationGracePeriodSeconds?: number; containers: (Container & { image?: string })[] };
type Deployment = {
  kind?: string;
  metadata?: { name?: string };
  spec?: { replicas?: number; template?: { spec?: PodSpec } };
};

/** What a Deployment's first container says, with Kubernetes' defaults where it says nothing. */
function deploymentOf(pod: PodSpec): ShippedDeployment {
  const container = pod.containers[0];
  if (container === undefined) throw new Error('a Deployment has no container');
  const readiness = container.readinessProbe;
  const preStop = container.lifecycle?.preStop?.exec?.command ?? [];
  const sleepSeconds = preStop[0] === 'sleep' ? Number(preStop[1]) : 0;
  return {
    probe: {
      path: readiness?.httpGet?.path ?? '/readyz',
      periodMs: (readiness?.periodSeconds ?? 10) * 1000,
      timeoutMs: (readiness?.timeoutSeconds ?? 1) * 1000,
      failureThreshold: readiness?.failureThreshold ?? 3,
    },
    preStopMs: Number.isFinite(sleepSeconds) ? sleepSeconds * 1000 : 0,
    graceMs: (pod.terminationGracePeriodSeconds ?? 30) * 1000,
    secretVariables: (container.env ?? [])
      .filter((variable) => variable.valueFrom?.secretKeyRef !== undefined)
      .map((variable) => variable.name),
  };
}

/** The facade's Deployment, as far as the game day runs it. */
export function shippedDeployment(): ShippedDeployment {
  const deployment = parse(
    readFileSync(join(KUBERNETES_DIR, 'facade-deployment.yaml'), 'utf8'),
  ) as Deployment;
  const pod = deployment.spec?.template?.spec;
  if (pod === undefined) throw new Error('facade-deployment.yaml has no pod template');
  return deploymentOf(pod);
}

/** The gateway's Deployment as the game day runs it: its pod's probe, preStop and grace, and more. */
export interface ShippedGatewayDeployment extends ShippedDeployment {
  /** How many run: its autoscaler's `minReplicas` (the Deployment leaves the count to it), else its own. */
  replicas: number;
  /**
   * Its container's environment: plain values, and the facade's settings where it reads them from
   * the facade's ConfigMap (its issuer and audience); a variable a Secret gives is in
   * `secretVariables` instead, and PORT is left out (the CLI is given its port).
   */
  environment: Record<string, string>;
}

type EnvVariable = {
  name: string;
  value?: string;
  valueFrom?: { configMapKeyRef?: { key?: string }; secretKeyRef?: unknown };
};

/**
 * The gateway's Deployment in deploy/kubernetes/ (the Deployment whose container runs the Hive
 * Gateway image), with its autoscaler's minimum as the count.
 */
export function shippedGatewayDeployment(): ShippedGatewayDeployment {
  const objects = readdirSync(KUBERNETES_DIR)
    .filter((name) => /\.ya?ml$/.test(name))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(KUBERNETES_DIR, file), 'utf8')).map(
        (document) =>
          document.toJS() as
            (Deployment & { spec?: { minReplicas?: number; scaleTargetRef?: { name?: string } } }) | null,
      ),
    );
  const deployment = objects.find(
    (object) =>
      object?.kind === 'Deployment' &&
      object.spec?.template?.spec?.containers.some(
        (container) => container.image?.includes('graphql-hive/gateway') === true,
      ) === true,
  );
  const pod = deployment?.spec?.template?.spec;
  const container = pod?.containers[0];
  if (deployment === undefined || deployment === null || pod === undefined || container === undefined)
    throw new Error('deploy/kubernetes ships no Deployment of the Hive Gateway image');
  const autoscaler = objects.find(
    (object) =>
      object?.kind === 'HorizontalPodAutoscaler' &&
      object.spec?.scaleTargetRef?.name === deployment.metadata?.name,
  );
  const facade = shippedSettings();
  const environment: Record<string, string> = {};
  for (const variable of (container.env ?? []) as EnvVariable[]) {
    if (variable.name === 'PORT') continue;
    const fromConfigMap = variable.valueFrom?.configMapKeyRef?.key;
    if (variable.value !== undefined) environment[variable.name] = variable.value;
    else if (fromConfigMap !== undefined && facade[fromConfigMap] !== undefined)
      environment[variable.name] = facade[fromConfigMap];
  }
  const shipped = deploymentOf(pod);
  return {
    ...shipped,
    probe: { ...shipped.probe, path: container.readinessProbe?.httpGet?.path ?? '/readiness' },
    replicas: autoscaler?.spec?.minReplicas ?? deployment.spec?.replicas ?? 1,
    environment,
  };
}

/** The trusted documents the base ships (a graphql-codegen manifest: `{ id: body }`). */
export function shippedTrustedDocuments(): Record<string, string> {
  return JSON.parse(readFileSync(join(KUBERNETES_DIR, 'trusted-documents.json'), 'utf8')) as Record<
    string,
    string
  >;
}

/** The event log's Redis as deploy/kubernetes/redis.yaml runs it, for redis-ha.sh on loopback. */
export interface ShippedRedis {
  /** Each role's settings from its StatefulSet (addresses left out: the run gives its own). */
  environment: Record<'server' | 'sentinel', Record<string, string>>;
  /** The name the Sentinels give the primary. */
  master: string;
  /** This run's passwords where the StatefulSets take one from a Secret ('' where they take none). */
  passwords: { server: string; sentinel: string };
}

/** Variables that name where the members are: the run's own loopback addresses stand for them. */
const REDIS_ADDRESS_VARIABLES = new Set(['REDIS_ANNOUNCE', 'REDIS_SERVERS', 'REDIS_SENTINELS', 'POD_NAME']);

/**
 * The StatefulSets of deploy/kubernetes/redis.yaml: each role's plain settings, and a password of
 * this run for each variable a Secret gives (REDIS_PASSWORD, REDIS_SENTINEL_PASSWORD).
 */
export function shippedRedis(): ShippedRedis {
  const environment: ShippedRedis['environment'] = { server: {}, sentinel: {} };
  const passwords = { server: '', sentinel: '' };
  const generated: Record<string, string> = {};
  for (const document of parseAllDocuments(readFileSync(join(KUBERNETES_DIR, 'redis.yaml'), 'utf8'))) {
    const set = document.toJS() as Deployment | null;
    if (set?.kind !== 'StatefulSet') continue;
    for (const container of set.spec?.template?.spec?.containers ?? []) {
      const command = (container as { command?: string[] }).command ?? [];
      const role = command[2];
      if (command[1]?.endsWith('/redis-ha.sh') !== true || (role !== 'server' && role !== 'sentinel'))
        throw new Error(
          `redis.yaml: a container that does not start through redis-ha.sh: ${command.join(' ')}`,
        );
      for (const variable of (container.env ?? []) as {
        name: string;
        value?: string;
        valueFrom?: unknown;
      }[]) {
        if (REDIS_ADDRESS_VARIABLES.has(variable.name)) continue;
        if (variable.value !== undefined) environment[role][variable.name] = variable.value;
        else if (variable.valueFrom !== undefined)
          environment[role][variable.name] = generated[variable.name] ??= randomBytes(18).toString('hex');
      }
    }
  }
  passwords.server = generated.REDIS_PASSWORD ?? '';
  passwords.sentinel = generated.REDIS_SENTINEL_PASSWORD ?? '';
  const master = environment.sentinel.REDIS_SENTINEL_MASTER ?? environment.server.REDIS_SENTINEL_MASTER;
  if (master === undefined) throw new Error('redis.yaml names no REDIS_SENTINEL_MASTER');
  return { environment, master, passwords };
}
