/**
 * deploy/kubernetes/ as a platform team applies it: rendered by `kubectl kustomize` (offline, no
 * cluster), every object validated against its Kubernetes schema (kubernetes-models), and the
 * properties the facade depends on checked against the facade itself: its configuration reader
 * accepts the rendered environment and reads every variable in it, the probes ask the facade's
 * paths on its port, the grace period outlasts the drain, no secret value is in a manifest, the
 * metrics port stays off the Service callers reach, and a changed trusted-documents manifest rolls
 * the replicas.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { loadConfig } from '../../src/config.ts';
import { loadTrustedDocuments } from '../../src/edge/trusted-documents.ts';
import { SHUTDOWN_ANSWER_GRACE_MS } from '../../src/http/apollo-server.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const BASE = join(ROOT, 'deploy/kubernetes');
const NAME = 'platform-graphql-facade';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The schema each kind is validated against; a kind not listed here fails the test. */
const MODELS: Record<string, new (data: Json) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
};

const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
const hasKubectl = kubectl.error === undefined && kubectl.status === 0;
if (!hasKubectl) {
  process.stderr.write(
    'kubernetes-manifests.test.ts: SKIPPED, kubectl is not installed (it renders deploy/kubernetes with `kubectl kustomize`).\n',
  );
}

function render(directory: string): { text: string; objects: Json[] } {
  const result = spawnSync('kubectl', ['kustomize', directory], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`kubectl kustomize ${directory} failed:\n${result.stderr}`);
  return {
    text: result.stdout,
    objects: parseAllDocuments(result.stdout).map((document) => document.toJSON() as Json),
  };
}

const scratch: string[] = [];
afterAll(() => {
  for (const directory of scratch) rmSync(directory, { recursive: true, force: true });
});

describe.skipIf(!hasKubectl)('deploy/kubernetes', () => {
  const { text, objects } = hasKubectl ? render(BASE) : { text: '', objects: [] };
  const find = (kind: string, name: string): Json => {
    const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
    if (found === undefined) throw new Error(`no ${kind} ${name} rendered`);
    return found;
  };
  const deployment = hasKubectl ? find('Deployment', NAME) : undefined;
  const pod = deployment?.spec.template.spec;
  const container = pod?.containers.find((candidate: Json) => candidate.name === 'facade');
  const settings = hasKubectl
    ? find('ConfigMap', container.envFrom.find((source: Json) => source.configMapRef).configMapRef.name)
    : undefined;
  const portNamed = (name: string): number =>
    container.ports.find((port: Json) => port.name === name).containerPort as number;

  it('renders the objects a platform team needs, each valid against its Kubernetes schema', () => {
    // configMapGenerator names carry a hash of their content (see the last but one test).
    const names = objects.map((object) =>
      `${object.kind}/${object.metadata.name}`.replace(/^(ConfigMap\/.*)-[a-z0-9]{10}$/, '$1-<hash>'),
    );
    expect(names.sort()).toEqual(
      [
        `ConfigMap/${NAME}-settings-<hash>`,
        `ConfigMap/${NAME}-trusted-documents-<hash>`,
        `Deployment/${NAME}`,
        `HorizontalPodAutoscaler/${NAME}`,
        `NetworkPolicy/${NAME}`,
        `NetworkPolicy/${NAME}-redis`,
        `PodDisruptionBudget/${NAME}`,
        `Service/${NAME}`,
        `Service/${NAME}-redis`,
        `StatefulSet/${NAME}-redis`,
      ].sort(),
    );
    for (const object of objects) {
      const Model = MODELS[`${object.apiVersion}/${object.kind}`];
      expect(Model, `a schema for ${object.apiVersion} ${object.kind}`).toBeDefined();
      expect(() => new Model!(object).validate(), `${object.kind}/${object.metadata.name}`).not.toThrow();
    }
  });

  it('the validation refuses what the API server would: a wrong type, a missing required field', () => {
    const wrongType = structuredClone(deployment);
    wrongType.spec.replicas = 'two';
    expect(() => new Deployment(wrongType).validate()).toThrow(/replicas/);
    const noImage = structuredClone(deployment);
    delete noImage.spec.template.spec.containers[0].name;
    expect(() => new Deployment(noImage).validate()).toThrow(/name/);
    const badPort = structuredClone(find('Service', NAME));
    badPort.spec.ports[0].port = 'eighty';
    expect(() => new Service(badPort).validate()).toThrow(/port/);
  });

  it('gives the facade an environment its configuration accepts, reading every variable in it', () => {
    const environment: Record<string, string> = { ...settings.data };
    for (const variable of container.env) {
      // A literal value in the Deployment would be a setting outside the ConfigMap: none expected.
      expect(variable.value, variable.name).toBeUndefined();
      environment[variable.name] =
        variable.name === 'WEBHOOK_SECRETS' ? generateWebhookSecret() : 'sk_placeholder';
    }
    const read = new Set<string>();
    const recorded = new Proxy(environment, {
      get(target, name) {
        if (typeof name === 'string') read.add(name);
        return target[name as string];
      },
    });
    const config = loadConfig(recorded);
    expect([...Object.keys(environment)].filter((name) => !read.has(name))).toEqual([]);
    expect(config.port).toBe(portNamed('http'));
    expect(config.metrics.port).toBe(portNamed('metrics'));
    expect(config.host).toBe('0.0.0.0');
    expect(config.nodeEnv).toBe('production');
    expect(config.events.redisUrl).toBe('redis://platform-graphql-facade-redis:6379');
    // Registered once, its secret in the Secret: every replica verifies every delivery.
    expect(config.events.webhooks.register).toBe(false);
    expect(config.events.webhooks.publicUrl).toMatch(/\/webhooks\/platform$/);
  });

  it('probes the facade where it answers: /readyz for readiness, /healthz for liveness, on its port', () => {
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(portNamed('http')).toBe(Number(settings.data.PORT));
  });

  it('ends a replica after its drain, never during it', () => {
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    const preStopSeconds = Number(preStop[1]);
    const drainSeconds = Number(settings.data.SHUTDOWN_DRAIN_MS) / 1000;
    // preStop runs inside the grace period; then SIGTERM, the drain, the answers' grace.
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(
      preStopSeconds + drainSeconds + SHUTDOWN_ANSWER_GRACE_MS / 1000,
    );
    // A rolling update replaces one replica at a time, never below the desired count.
    expect(deployment.spec.strategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
  });

  it('keeps secrets out of every manifest: the key and the webhook secret come from a Secret', () => {
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
    const fromSecrets = Object.fromEntries(
      container.env.map((variable: Json) => [variable.name, variable.valueFrom?.secretKeyRef?.name]),
    );
    expect(fromSecrets).toEqual({ UPSTREAM_API_KEY: NAME, WEBHOOK_SECRETS: NAME });
    expect(Object.keys(settings.data).filter((name) => /KEY|SECRET|TOKEN|PASSWORD/.test(name))).toEqual([]);
    // No value shaped like the upstream's keys, a webhook secret, a bearer token or a URL's password.
    expect(text).not.toMatch(/sk_(?:live|sandbox)_|whsec_|Bearer |eyJ[\w-]{10,}\.|:\/\/[^/\s:@]+:[^/\s@]+@/);
  });

  it('exposes the API port to callers and keeps the metrics port internal', () => {
    const service = find('Service', NAME);
    expect(service.spec.ports.map((port: Json) => port.targetPort)).toEqual(['http']);
    expect(service.spec.type ?? 'ClusterIP').toBe('ClusterIP');
    const policy = find('NetworkPolicy', NAME);
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    // A rule without `from` admits everyone: it names the API port only.
    const open = policy.spec.ingress.filter((rule: Json) => rule.from === undefined);
    expect(open.flatMap((rule: Json) => rule.ports.map((port: Json) => port.port))).toEqual(['http']);
    const metricsRules = policy.spec.ingress.filter((rule: Json) =>
      rule.ports.some((port: Json) => port.port === 'metrics' || port.port === portNamed('metrics')),
    );
    expect(metricsRules).toHaveLength(1);
    expect(metricsRules[0].from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
  });

  it('keeps replicas available through disruptions and scales on CPU', () => {
    const budget = find('PodDisruptionBudget', NAME);
    expect(budget.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    const autoscaler = find('HorizontalPodAutoscaler', NAME);
    expect(autoscaler.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: NAME });
    expect(autoscaler.spec.minReplicas).toBeGreaterThan(budget.spec.maxUnavailable);
    expect(container.resources.requests.cpu).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
  });

  it('mounts the trusted-documents manifest where TRUSTED_DOCUMENTS points, and the facade loads it', async () => {
    const volume = pod.volumes.find((candidate: Json) => candidate.name === 'trusted-documents');
    const mount = container.volumeMounts.find((candidate: Json) => candidate.name === 'trusted-documents');
    const configMap = find('ConfigMap', volume.configMap.name);
    const [file] = Object.keys(configMap.data);
    expect(settings.data.TRUSTED_DOCUMENTS).toBe(`${mount.mountPath}/${file}`);
    const directory = mkdtempSync(join(tmpdir(), 'trusted-documents-'));
    scratch.push(directory);
    writeFileSync(join(directory, file!), configMap.data[file!]);
    const store = await loadTrustedDocuments(join(directory, file!));
    // The base ships the example web app's manifest (docs/operations.md says so): kept equal to it.
    expect(JSON.parse(configMap.data[file!] as string)).toEqual(
      JSON.parse(readFileSync(join(ROOT, 'examples/web/src/gql/persisted-documents.json'), 'utf8')),
    );
    expect(store.size).toBe(Object.keys(JSON.parse(readFileSync(join(BASE, file!), 'utf8'))).length);
  });

  it('rolls the replicas when the trusted documents change: a new ConfigMap name in the pod template', () => {
    const copy = mkdtempSync(join(tmpdir(), 'kustomize-'));
    scratch.push(copy);
    cpSync(BASE, copy, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(copy, 'trusted-documents.json'), 'utf8')) as Record<
      string,
      string
    >;
    manifest['sha256:added'] = 'query Added { __typename }';
    writeFileSync(join(copy, 'trusted-documents.json'), JSON.stringify(manifest));
    const changed = render(copy).objects.find((object) => object.kind === 'Deployment');
    const before = pod.volumes.find((candidate: Json) => candidate.name === 'trusted-documents').configMap
      .name;
    const after = changed.spec.template.spec.volumes.find(
      (candidate: Json) => candidate.name === 'trusted-documents',
    ).configMap.name;
    expect(after).not.toBe(before);
    expect(after).toMatch(new RegExp(`^${NAME}-trusted-documents-`));
    // Nothing else of the pod template moved.
    expect({ ...changed.spec.template.spec, volumes: [] }).toEqual({ ...pod, volumes: [] });
  });

  it('runs Redis where REDIS_URL points, reachable from the facade only', () => {
    const url = new URL(settings.data.REDIS_URL);
    const redisService = find('Service', url.hostname);
    expect(redisService.spec.ports.map((port: Json) => port.port)).toEqual([Number(url.port)]);
    const redis = find('StatefulSet', `${NAME}-redis`);
    expect(redisService.spec.selector).toEqual(redis.spec.template.metadata.labels);
    const policy = find('NetworkPolicy', `${NAME}-redis`);
    expect(policy.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: deployment.spec.selector.matchLabels } }],
        ports: [{ port: 'redis', protocol: 'TCP' }],
      },
    ]);
  });
});
