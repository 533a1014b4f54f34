/**
 * What the game day takes from the files the project ships, read at each run so that a change to
 * them is what runs next: the replicas' settings (deploy/kubernetes/facade.env), their readiness
 * probe, preStop wait and grace period (deploy/kubernetes/facade-deployment.yaml), the trusted
 * documents they start with (deploy/kubernetes/trusted-documents.json), and the gateway's
 * environment (compose.yaml's `gateway` service; its configuration is deploy/gateway.config.ts,
 * which the CLI reads from deploy/).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { readComposeFile } from '../../scripts/compose-twin.ts';
import type { ReadinessProbe } from './service.ts';

/** The checkout's root. */
export const ROOT = join(import.meta.dirname, '../..');
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

/** How many gateways run when the base ships no gateway Deployment: one restarts while the other serves. */
export const DEFAULT_GATEWAY_REPLICAS = 2;

/**
 * The gateway's Deployment, when deploy/kubernetes/ ships one (a Deployment whose container runs
 * the Hive Gateway image); otherwise {@link DEFAULT_GATEWAY_REPLICAS} gateways probed on
 * `/readiness` and stopped as the facade's Deployment stops its replicas.
 */
export function shippedGatewayDeployment(): ShippedDeployment & { replicas: number; shipped: boolean } {
  for (const file of readdirSync(KUBERNETES_DIR).filter((name) => /\.ya?ml$/.test(name))) {
    for (const document of parseAllDocuments(readFileSync(join(KUBERNETES_DIR, file), 'utf8'))) {
      const deployment = document.toJS() as Deployment | null;
      const pod = deployment?.spec?.template?.spec;
      if (deployment?.kind !== 'Deployment' || pod === undefined) continue;
      if (!pod.containers.some((container) => container.image?.includes('graphql-hive/gateway') === true))
        continue;
      const shipped = deploymentOf(pod);
      return {
        ...shipped,
        probe: { ...shipped.probe, path: pod.containers[0]?.readinessProbe?.httpGet?.path ?? '/readiness' },
        replicas: deployment.spec?.replicas ?? DEFAULT_GATEWAY_REPLICAS,
        shipped: true,
      };
    }
  }
  const facade = shippedDeployment();
  return {
    ...facade,
    probe: { ...facade.probe, path: '/readiness' },
    secretVariables: [],
    replicas: DEFAULT_GATEWAY_REPLICAS,
    shipped: false,
  };
}

/** The trusted documents the base ships (a graphql-codegen manifest: `{ id: body }`). */
export function shippedTrustedDocuments(): Record<string, string> {
  return JSON.parse(readFileSync(join(KUBERNETES_DIR, 'trusted-documents.json'), 'utf8')) as Record<
    string,
    string
  >;
}

/** compose.yaml's gateway environment (PORT left out: the CLI is given its port). */
export function shippedGatewayEnvironment(): Record<string, string> {
  const gateway = readComposeFile().services.gateway;
  if (gateway === undefined) throw new Error('compose.yaml has no gateway service');
  const { PORT: _port, ...environment } = gateway.environment ?? {};
  return environment;
}
