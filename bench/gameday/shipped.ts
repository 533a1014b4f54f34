/**
 * What the game day takes from the files the project ships, read at each run so that a change to
 * them is what runs next: the replicas' settings (deploy/kubernetes/facade.env), their readiness
 * probe, preStop wait and grace period (deploy/kubernetes/facade-deployment.yaml), the trusted
 * documents they start with (deploy/kubernetes/trusted-documents.json), and the gateway's
 * environment (compose.yaml's `gateway` service; its configuration is deploy/gateway.config.ts,
 * which the CLI reads from deploy/).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
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

/** The facade's Deployment, as far as the game day runs it (Kubernetes' defaults where it says nothing). */
export function shippedDeployment(): ShippedDeployment {
  const documents = readFileSync(join(KUBERNETES_DIR, 'facade-deployment.yaml'), 'utf8');
  const deployment = parse(documents) as {
    spec: {
      template: {
        spec: { terminationGracePeriodSeconds?: number; containers: Container[] };
      };
    };
  };
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  if (container === undefined) throw new Error('facade-deployment.yaml has no container');
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
