/**
 * deploy/kubernetes/ as a platform team applies it: rendered by `kubectl kustomize` (offline, no
 * cluster), every object validated against its Kubernetes schema (kubernetes-models; the
 * ServiceMonitor, a custom resource kubernetes-models does not know, against the fields of
 * Prometheus Operator's v1 API it uses, below), and the properties the facade depends on checked
 * against the facade itself: its configuration reader accepts the rendered environment and reads
 * every variable in it, each environment's upstream key is a file of a mounted Secret (never a
 * variable, never a subPath), the Deployment leaves its count to the autoscaler, the image is the
 * tag `npm run image:build` makes, the resources are those the capacity figures ask for, the probes
 * ask the facade's paths on its port, the grace period outlasts the drain, no secret value is in a
 * manifest, the metrics port stays off the Service callers reach and is scraped by a ServiceMonitor,
 * the Ingress keeps subscriptions open and unbuffered, the gateway runs deploy/gateway.config.ts,
 * the event log's Redis runs the tested start script with AOF volumes and three Sentinels the facade
 * is pointed at, and a changed trusted-documents manifest rolls the replicas.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { loadConfig } from '../../src/config.ts';
import { loadTrustedDocuments } from '../../src/edge/trusted-documents.ts';
import { EVENTS_CONFIG_DEFAULTS, WEBHOOK_PATH } from '../../src/events/config.ts';
import { SHUTDOWN_ANSWER_GRACE_MS } from '../../src/http/apollo-server.ts';
import { readComposeFile } from '../../scripts/compose-twin.ts';
import { facadeReadsSentinels, SENTINEL_SETTINGS, variablesRead } from './sentinel-support.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const BASE = join(ROOT, 'deploy/kubernetes');
const NAME = 'platform-graphql-facade';
const GATEWAY = 'platform-graphql-gateway';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/**
 * Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1), which kubernetes-models does not
 * ship: the fields this base uses, with the types and required fields of the operator's CRD, and
 * nothing else allowed (a misspelt field fails here rather than being pruned by the API server).
 */
class ServiceMonitorShape {
  private readonly object: Json;

  constructor(object: Json) {
    this.object = object;
  }

  validate(): void {
    const { metadata, spec, ...rest } = this.object;
    const fail = (why: string): never => {
      throw new Error(`ServiceMonitor: ${why}`);
    };
    const only = (value: Json, allowed: string[], where: string): void => {
      const extra = Object.keys(value ?? {}).filter((key) => !allowed.includes(key));
      if (extra.length > 0) fail(`${where} has unknown fields ${extra.join(', ')}`);
    };
    only(rest, ['apiVersion', 'kind'], 'the object');
    if (typeof metadata?.name !== 'string') fail('metadata.name is required');
    only(spec, ['selector', 'endpoints', 'namespaceSelector', 'jobLabel'], 'spec');
    const labels = spec?.selector?.matchLabels;
    if (typeof labels !== 'object' || Object.values(labels).some((value) => typeof value !== 'string'))
      fail('spec.selector.matchLabels must map names to strings');
    if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) fail('spec.endpoints is required');
    for (const endpoint of spec.endpoints) {
      only(endpoint, ['port', 'path', 'interval', 'scrapeTimeout', 'scheme'], 'an endpoint');
      if (typeof endpoint.port !== 'string') fail('an endpoint names its Service port by name');
      if (endpoint.path !== undefined && !String(endpoint.path).startsWith('/'))
        fail('path must start with /');
      for (const duration of [endpoint.interval, endpoint.scrapeTimeout]) {
        // The CRD's pattern for a Prometheus duration.
        if (
          duration !== undefined &&
          !/^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/.test(
            duration,
          )
        )
          fail(`${duration} is not a duration`);
      }
    }
  }
}

/** The schema each kind is validated against; a kind not listed here fails the test. */
const MODELS: Record<string, new (data: Json) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitorShape,
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
  const gatewayDeployment = (): Json => find('Deployment', GATEWAY);
  /** The gateway container's literal variables. */
  const gatewayEnv = (): Record<string, string> =>
    Object.fromEntries(
      gatewayDeployment()
        .spec.template.spec.containers[0].env.filter((variable: Json) => variable.value !== undefined)
        .map((variable: Json) => [variable.name, variable.value]),
    );
  const ingressHost = (): string => find('Ingress', NAME).spec.rules[0].host as string;
  /** The generated name of the ConfigMap a workload mounts as volume `volumeName`. */
  const configMapOf = (workload: Json, volumeName: string): string =>
    workload.spec.template.spec.volumes.find((volume: Json) => volume.name === volumeName).configMap.name;
  const pod = deployment?.spec.template.spec;
  const container = pod?.containers.find((candidate: Json) => candidate.name === 'facade');
  const settings = hasKubectl
    ? find('ConfigMap', container.envFrom.find((source: Json) => source.configMapRef).configMapRef.name)
    : undefined;
  const portNamed = (name: string): number =>
    container.ports.find((port: Json) => port.name === name).containerPort as number;
  /**
   * The environment the facade gets: its settings, each variable of a Secret as a placeholder, and
   * each `*_FILE` pointed at a file of the same name holding a placeholder key.
   */
  const facadeEnvironment = (): Record<string, string> => {
    const environment: Record<string, string> = { ...settings.data };
    const mounted = mkdtempSync(join(tmpdir(), 'mounted-secrets-'));
    scratch.push(mounted);
    for (const [name, file] of Object.entries(environment)) {
      if (!name.endsWith('_FILE')) continue;
      mkdirSync(join(mounted, dirname(file)), { recursive: true });
      writeFileSync(join(mounted, file), 'sk_placeholder\n');
      environment[name] = join(mounted, file);
    }
    for (const variable of container.env) {
      environment[variable.name] = variable.name.startsWith('WEBHOOK_SECRETS')
        ? generateWebhookSecret()
        : 'placeholder-secret';
    }
    return environment;
  };

  it('renders the objects a platform team needs, each valid against its Kubernetes schema', () => {
    // configMapGenerator names carry a hash of their content (see the last but one test).
    const names = objects.map((object) =>
      `${object.kind}/${object.metadata.name}`.replace(/^(ConfigMap\/.*)-[a-z0-9]{10}$/, '$1-<hash>'),
    );
    expect(names.sort()).toEqual(
      [
        `ConfigMap/${NAME}-redis-ha-<hash>`,
        `ConfigMap/${NAME}-settings-<hash>`,
        `ConfigMap/${NAME}-trusted-documents-<hash>`,
        `ConfigMap/${GATEWAY}-config-<hash>`,
        `Deployment/${NAME}`,
        `Deployment/${GATEWAY}`,
        `Deployment/${GATEWAY}-cache`,
        `HorizontalPodAutoscaler/${NAME}`,
        `HorizontalPodAutoscaler/${GATEWAY}`,
        `Ingress/${NAME}`,
        `NetworkPolicy/${NAME}`,
        `NetworkPolicy/${NAME}-redis`,
        `NetworkPolicy/${NAME}-redis-sentinel`,
        `NetworkPolicy/${GATEWAY}`,
        `NetworkPolicy/${GATEWAY}-cache`,
        `PodDisruptionBudget/${NAME}`,
        `PodDisruptionBudget/${NAME}-redis`,
        `PodDisruptionBudget/${NAME}-redis-sentinel`,
        `PodDisruptionBudget/${GATEWAY}`,
        `Service/${NAME}`,
        `Service/${NAME}-metrics`,
        `Service/${NAME}-redis`,
        `Service/${NAME}-redis-sentinel`,
        `Service/${GATEWAY}`,
        `Service/${GATEWAY}-cache`,
        `ServiceMonitor/${NAME}`,
        `ServiceMonitor/${GATEWAY}`,
        `StatefulSet/${NAME}-redis`,
        `StatefulSet/${NAME}-redis-sentinel`,
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
    const badMonitor = structuredClone(find('ServiceMonitor', NAME));
    badMonitor.spec.endpoints[0].intervall = '30s';
    expect(() => new ServiceMonitorShape(badMonitor).validate()).toThrow(/intervall/);
    badMonitor.spec.endpoints[0] = { port: 'metrics', interval: 'thirty seconds' };
    expect(() => new ServiceMonitorShape(badMonitor).validate()).toThrow(/duration/);
  });

  it('gives the facade an environment its configuration accepts, reading every variable in it', () => {
    for (const variable of container.env) {
      // A literal value in the Deployment would be a setting outside the ConfigMap: none expected.
      expect(variable.value, variable.name).toBeUndefined();
    }
    const environment = facadeEnvironment();
    const read = variablesRead(environment);
    const unread = Object.keys(environment).filter((name) => !read.has(name));
    if (facadeReadsSentinels()) expect(unread).toEqual([]);
    else {
      // Until the facade reads the Sentinel settings, those are the only ones it leaves.
      process.stderr.write(
        `kubernetes-manifests.test.ts: the facade does not read ${unread.join(', ')} yet.\n`,
      );
      expect(unread.sort()).toEqual([...SENTINEL_SETTINGS].sort());
    }
    const config = loadConfig(environment);
    expect(config.port).toBe(portNamed('http'));
    expect(config.metrics.port).toBe(portNamed('metrics'));
    expect(config.host).toBe('0.0.0.0');
    expect(config.nodeEnv).toBe('production');
    // The event log's Redis through its Sentinels, never one fixed server.
    expect(settings.data.REDIS_URL).toBeUndefined();
    expect(settings.data.REDIS_MIN_REPLICAS_ACK).toBe('1');
    // Registered once, its secret in the Secret: every replica verifies every delivery.
    expect(config.events.webhooks.register).toBe(false);
    expect(config.events.webhooks.publicUrl).toBe(`https://${ingressHost()}${WEBHOOK_PATH}`);
  });

  it('reads each environment’s upstream key from a file of a mounted Secret, which the kubelet can replace', () => {
    const files = Object.entries(settings.data as Record<string, string>).filter(([name]) =>
      /^UPSTREAM_API_KEY_\w+_FILE$/.test(name),
    );
    expect(files.map(([name]) => name).sort()).toEqual([
      'UPSTREAM_API_KEY_LIVE_FILE',
      'UPSTREAM_API_KEY_SANDBOX_FILE',
    ]);
    // No key as a variable: a variable cannot change under a running process.
    expect(
      Object.keys(settings.data).filter((name) => /^UPSTREAM_API_KEY(_SANDBOX|_LIVE)?$/.test(name)),
    ).toEqual([]);
    expect(container.env.map((variable: Json) => variable.name)).not.toContain('UPSTREAM_API_KEY');
    const secretNames = new Set<string>();
    for (const [, file] of files) {
      const directory = dirname(file);
      const mount = container.volumeMounts.find((candidate: Json) => candidate.mountPath === directory);
      expect(mount, `a volume mounted at ${directory}`).toBeDefined();
      // A subPath mount is never updated by the kubelet: the rotation would need a restart.
      expect(mount.subPath).toBeUndefined();
      expect(mount.readOnly).toBe(true);
      const volume = pod.volumes.find((candidate: Json) => candidate.name === mount.name);
      expect(volume.secret.items).toEqual([{ key: 'api-key', path: basename(file) }]);
      secretNames.add(volume.secret.secretName);
      // Readable by the facade's group alone: 0440, the pod's fsGroup being its group.
      expect(volume.secret.defaultMode).toBe(0o440);
      expect(pod.securityContext.fsGroup).toBe(pod.securityContext.runAsGroup);
    }
    // One Secret per environment: each rotated, and access-controlled, on its own.
    expect(secretNames.size).toBe(files.length);
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
  });

  it('leaves the replica count to the autoscalers: no `replicas` on a Deployment they scale', () => {
    for (const name of [NAME, GATEWAY]) {
      expect(find('Deployment', name).spec, name).not.toHaveProperty('replicas');
      expect(find('HorizontalPodAutoscaler', name).spec.scaleTargetRef).toEqual({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name,
      });
    }
  });

  it('runs the image `npm run image:build` tags, the tag compose.yaml runs too', () => {
    const built = spawnSync('bash', [join(ROOT, 'scripts/build-image.sh'), '--print-tags'], {
      encoding: 'utf8',
    });
    expect(built.status, built.stderr).toBe(0);
    const [versioned, latest] = built.stdout.trim().split('\n');
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(versioned).toBe(`${NAME}:${version}`);
    expect(latest).toBe(`${NAME}:latest`);
    expect(container.image).toBe(versioned);
    for (const service of ['facade-a', 'facade-b', 'emulator', 'support-notes']) {
      expect(readComposeFile().services[service]!.image, service).toBe(versioned);
    }
  });

  it('asks for the resources the measured figures call for (docs/operations.md, "Capacity per replica")', () => {
    const { requests, limits } = container.resources;
    // Memory: 10,000 subscribers peak at 560-720 MiB, the caches ~175 MiB more, idle 180 MiB.
    expect(limits.memory).toBe('1Gi');
    // Never evicted for using what it was promised.
    expect(requests.memory).toBe(limits.memory);
    expect(requests.cpu).toBe('500m');
    expect(limits.cpu).toBe('2');
    const operations = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8').replace(/\s+/g, ' ');
    expect(operations).toContain('memory: 1Gi');
    expect(operations).toMatch(/10,000 subscribers per replica/);
  });
  it('probes the facade where it answers: /readyz for readiness, /healthz for liveness, on its port', () => {
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(portNamed('http')).toBe(Number(settings.data.PORT));
  });

  it('keeps the replicas through a failover as the Sentinels time it, and says when one cut off from Redis leaves', () => {
    const sentinel = find('StatefulSet', `${NAME}-redis-sentinel`).spec.template.spec.containers[0];
    const downAfterMs = Number(
      sentinel.env.find((variable: Json) => variable.name === 'REDIS_SENTINEL_DOWN_AFTER_MS').value,
    );
    const graceSeconds = loadConfig(facadeEnvironment()).readinessRedisGraceSeconds;
    // Twice a failover as the game day measured it: the down-after, then 1.4 s to the promotion.
    expect(graceSeconds * 1000).toBeGreaterThanOrEqual(2 * (downAfterMs + 1_400));
    // The probe adds to the grace: up to a period before the first check that fails, up to one
    // after the grace before the check that answers 503, and its further failures. The operations
    // guide gives the sum for the shipped probe.
    const { periodSeconds, failureThreshold } = container.readinessProbe as {
      periodSeconds: number;
      failureThreshold: number;
    };
    const soonest = graceSeconds + (failureThreshold - 1) * periodSeconds;
    const latest = soonest + 2 * periodSeconds;
    const operations = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8').replace(/\s+/g, ' ');
    expect(operations).toContain(`leaves the Service between ${soonest} and ${latest} s after`);
  });

  it("answers readiness well within the probe's timeout whatever the upstream does", () => {
    const { upstreamDeadlineMs } = loadConfig(facadeEnvironment()).readiness;
    const { timeoutSeconds } = container.readinessProbe as { timeoutSeconds: number };
    // A late answer is a failed probe on every replica at once: the upstream's probe is waited for
    // at most half the probe's timeout, the rest left to a loaded node (Redis' PING waits 1 s).
    expect(upstreamDeadlineMs * 2).toBeLessThanOrEqual(timeoutSeconds * 1000);
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

  it('keeps secrets out of every manifest: keys, webhook secrets and passwords come from Secrets', () => {
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
    const fromSecrets = Object.fromEntries(
      container.env.map((variable: Json) => [variable.name, variable.valueFrom?.secretKeyRef?.name]),
    );
    expect(fromSecrets).toEqual({
      WEBHOOK_SECRETS_SANDBOX: NAME,
      WEBHOOK_SECRETS_LIVE: NAME,
      REDIS_PASSWORD: `${NAME}-redis`,
      REDIS_SENTINEL_PASSWORD: `${NAME}-redis`,
    });
    // A `*_FILE` setting is a path, not a secret.
    expect(
      Object.keys(settings.data).filter(
        (name) => /KEY|SECRET|TOKEN|PASSWORD/.test(name) && !name.endsWith('_FILE'),
      ),
    ).toEqual([]);
    // No value shaped like the upstream's keys, a webhook secret, a bearer token or a URL's password.
    expect(text).not.toMatch(
      /sk_(?:live|sandbox)_|whsec_|Bearer [\w.~+/-]{20,}|eyJ[\w-]{10,}\.|:\/\/[^/\s:@]+:[^/\s@]+@/,
    );
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
  });

  it('probes with /readyz, which keeps a replica ready while one environment takes its key', () => {
    // /readyz?environment=<name> is for alerts: a probe of one environment would take the replicas
    // out for a key every replica shares.
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(settings.data.UPSTREAM_API_KEY_SANDBOX_FILE).toBeDefined();
    expect(settings.data.UPSTREAM_API_KEY_LIVE_FILE).toBeDefined();
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

  it('routes /graphql to the gateway and the webhooks to the facade, with subscriptions kept open and unbuffered', () => {
    const ingress = find('Ingress', NAME);
    const annotations = ingress.metadata.annotations as Record<string, string>;
    // Longer than any quiet spell a live subscriber has: the facade's graphql-ws ping and SSE
    // heartbeat, and the gateway's, come every 12 s; an hour lets only a dead peer be cut.
    for (const name of ['proxy-read-timeout', 'proxy-send-timeout']) {
      const seconds = Number(annotations[`nginx.ingress.kubernetes.io/${name}`]);
      expect(seconds, name).toBeGreaterThanOrEqual(3600);
      expect(seconds * 1000).toBeGreaterThan(10 * EVENTS_CONFIG_DEFAULTS.GRAPHQL_WS_KEEP_ALIVE_MS);
    }
    expect(annotations['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
    const [rule] = ingress.spec.rules;
    expect(ingress.spec.rules).toHaveLength(1);
    const routes = rule.http.paths.map((path: Json) => ({
      path: path.path,
      pathType: path.pathType,
      service: path.backend.service.name,
      port: path.backend.service.port.name,
    }));
    expect(routes).toEqual([
      { path: '/graphql', pathType: 'Exact', service: GATEWAY, port: 'http' },
      { path: WEBHOOK_PATH, pathType: 'Prefix', service: NAME, port: 'http' },
    ]);
    for (const { service, port } of routes) {
      expect(find('Service', service).spec.ports.map((candidate: Json) => candidate.name)).toContain(port);
    }
    expect(ingress.spec.tls[0].hosts).toEqual([rule.host]);
    // The facade believes one proxy: the Ingress for webhooks, the gateway (told of the Ingress) for GraphQL.
    expect(settings.data.TRUST_PROXY).toBe('1');
    expect(gatewayEnv().GATEWAY_TRUST_PROXY).toBe('1');
  });

  it('scrapes the facade’s metrics port and the gateway’s /metrics with ServiceMonitors', () => {
    const scraped = (monitorName: string): { service: Json; port: Json; endpoint: Json } => {
      const monitor = find('ServiceMonitor', monitorName);
      const services = objects.filter(
        (object) =>
          object.kind === 'Service' &&
          Object.entries(monitor.spec.selector.matchLabels).every(
            ([key, value]) => object.metadata.labels?.[key] === value,
          ),
      );
      expect(services, monitorName).toHaveLength(1);
      const [endpoint] = monitor.spec.endpoints;
      const port = services[0].spec.ports.find((candidate: Json) => candidate.name === endpoint.port);
      expect(port, `${monitorName}: port ${endpoint.port}`).toBeDefined();
      return { service: services[0], port, endpoint };
    };
    const facade = scraped(NAME);
    expect(facade.service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    expect(facade.port.targetPort).toBe('metrics');
    expect(facade.endpoint.path).toBe('/metrics');
    expect(portNamed('metrics')).toBe(Number(settings.data.METRICS_PORT));
    const gateway = scraped(GATEWAY);
    expect(gateway.service.spec.selector).toEqual(gatewayDeployment().spec.selector.matchLabels);
    expect(gateway.endpoint.path).toBe('/metrics');
    expect(gatewayEnv().GATEWAY_METRICS).toBe('true');
    // The Service callers reach still carries the API port only.
    expect(find('Service', NAME).spec.ports.map((port: Json) => port.name)).toEqual(['http']);
  });

  it('runs the gateway as its own Deployment with deploy/gateway.config.ts, trusting the facade’s issuer', () => {
    const gatewayPod = gatewayDeployment().spec.template.spec;
    const [gateway] = gatewayPod.containers;
    expect(gateway.image).toBe(readComposeFile().services.gateway!.image);
    const configMount = gateway.volumeMounts.find(
      (mount: Json) => mount.mountPath === '/gateway/gateway.config.ts',
    );
    const configVolume = gatewayPod.volumes.find((volume: Json) => volume.name === configMount.name);
    const config = find('ConfigMap', configVolume.configMap.name);
    expect(config.data[configMount.subPath]).toBe(
      readFileSync(join(ROOT, 'deploy/gateway.config.ts'), 'utf8'),
    );
    const supergraphArgument = gateway.args[gateway.args.indexOf('supergraph') + 1] as string;
    const supergraphMount = gateway.volumeMounts.find(
      (mount: Json) => mount.mountPath === dirname(supergraphArgument),
    );
    expect(supergraphMount).toBeDefined();
    const byRef = Object.fromEntries(
      gateway.env.map((variable: Json) => [variable.name, variable.valueFrom?.configMapKeyRef]),
    );
    for (const name of ['AUTH_ISSUER', 'AUTH_AUDIENCE']) {
      expect(byRef[name], name).toEqual({ name: settings.metadata.name, key: name });
    }
    expect(gateway.readinessProbe.httpGet).toEqual({ path: '/readiness', port: 'http' });
    const clientSecret = gateway.env.find((variable: Json) => variable.name === 'GATEWAY_CLIENT_SECRET');
    expect(clientSecret.valueFrom.secretKeyRef).toMatchObject({ name: GATEWAY, optional: true });
  });

  it('mounts every file of the gateway configuration, and gives gateway and facade one response-cache Redis only they reach', () => {
    const gatewayPod = gatewayDeployment().spec.template.spec;
    const [gateway] = gatewayPod.containers;
    for (const file of ['gateway-response-cache.ts', 'gateway-multipart-subscriptions.ts']) {
      const mount = gateway.volumeMounts.find(
        (candidate: Json) => candidate.mountPath === `/gateway/${file}`,
      );
      const volume = gatewayPod.volumes.find((candidate: Json) => candidate.name === mount.name);
      expect(find('ConfigMap', volume.configMap.name).data[mount.subPath], file).toBe(
        readFileSync(join(ROOT, 'deploy', file), 'utf8'),
      );
    }
    const byRef = Object.fromEntries(
      gateway.env.map((variable: Json) => [variable.name, variable.valueFrom?.configMapKeyRef]),
    );
    expect(byRef.GATEWAY_CACHE_REDIS_URL).toEqual({
      name: settings.metadata.name,
      key: 'GATEWAY_CACHE_REDIS_URL',
    });
    const cache = find('Service', `${GATEWAY}-cache`);
    expect(settings.data.GATEWAY_CACHE_REDIS_URL).toBe(
      `redis://${cache.metadata.name}:${cache.spec.ports[0].port}`,
    );
    const [redis] = find('Deployment', `${GATEWAY}-cache`).spec.template.spec.containers;
    // Nothing kept on disk; a full cache refuses answers rather than evict an index of tags.
    expect(redis.args).toEqual([
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory',
      '200mb',
      '--maxmemory-policy',
      'noeviction',
    ]);
    const from = (component: string) => ({
      podSelector: {
        matchLabels: { 'app.kubernetes.io/name': NAME, 'app.kubernetes.io/component': component },
      },
    });
    expect(find('NetworkPolicy', `${GATEWAY}-cache`).spec.ingress).toEqual([
      { from: [from('gateway'), from('facade')], ports: [{ port: 'redis', protocol: 'TCP' }] },
    ]);
  });

  it('runs the event log’s Redis from the tested start script: two AOF servers, three Sentinels the facade asks', () => {
    const script = find('ConfigMap', configMapOf(find('StatefulSet', `${NAME}-redis`), 'redis-ha'));
    expect(script.data['redis-ha.sh']).toBe(readFileSync(join(BASE, 'redis-ha.sh'), 'utf8'));
    const members = (name: string): string[] => {
      const set = find('StatefulSet', name);
      const headless = find('Service', set.spec.serviceName);
      expect(headless.spec.clusterIP).toBe('None');
      // A starting member must find the others before they are ready.
      expect(headless.spec.publishNotReadyAddresses).toBe(true);
      const port = headless.spec.ports[0].port as number;
      return Array.from(
        { length: set.spec.replicas as number },
        (_, index) => `${name}-${index}.${headless.metadata.name}:${port}`,
      );
    };
    const servers = members(`${NAME}-redis`);
    const sentinels = members(`${NAME}-redis-sentinel`);
    expect(servers).toHaveLength(2);
    expect(sentinels).toHaveLength(3);
    expect(settings.data.REDIS_SENTINELS).toBe(sentinels.join(','));
    for (const name of [`${NAME}-redis`, `${NAME}-redis-sentinel`]) {
      const set = find('StatefulSet', name);
      const [member] = set.spec.template.spec.containers;
      expect(member.command).toEqual([
        'sh',
        '/etc/redis-ha/redis-ha.sh',
        name.endsWith('sentinel') ? 'sentinel' : 'server',
      ]);
      const env = Object.fromEntries(member.env.map((variable: Json) => [variable.name, variable.value]));
      expect(env.REDIS_SERVERS, name).toBe(servers.join(','));
      expect(env.REDIS_SENTINELS, name).toBe(sentinels.join(','));
      expect(env.REDIS_SENTINEL_MASTER, name).toBe(settings.data.REDIS_SENTINEL_MASTER);
      expect(env.REDIS_ANNOUNCE, name).toBe(
        `$(POD_NAME).${set.spec.serviceName}:${name.endsWith('sentinel') ? 26379 : 6379}`,
      );
      const secrets = member.env
        .filter((variable: Json) => variable.valueFrom?.secretKeyRef)
        .map((variable: Json) => variable.name);
      expect(secrets.sort(), name).toEqual(['REDIS_PASSWORD', 'REDIS_SENTINEL_PASSWORD']);
    }
    // Each server's AOF on a volume of its own, where the script keeps it (/data).
    const servers_ = find('StatefulSet', `${NAME}-redis`);
    expect(servers_.spec.volumeClaimTemplates.map((claim: Json) => claim.metadata.name)).toEqual(['data']);
    expect(servers_.spec.template.spec.containers[0].volumeMounts).toContainEqual({
      name: 'data',
      mountPath: '/data',
    });
    expect(readFileSync(join(BASE, 'redis-ha.sh'), 'utf8')).toContain(
      "printf 'appendonly yes\\nappendfsync everysec",
    );
  });

  it('lets only the facade and the Redis members reach Redis', () => {
    const from = (component: string) => ({
      podSelector: {
        matchLabels: { 'app.kubernetes.io/name': NAME, 'app.kubernetes.io/component': component },
      },
    });
    expect(find('NetworkPolicy', `${NAME}-redis`).spec.ingress).toEqual([
      {
        from: [from('facade'), from('redis'), from('redis-sentinel')],
        ports: [{ port: 'redis', protocol: 'TCP' }],
      },
    ]);
    expect(find('NetworkPolicy', `${NAME}-redis-sentinel`).spec.ingress).toEqual([
      {
        from: [from('facade'), from('redis'), from('redis-sentinel')],
        ports: [{ port: 'sentinel', protocol: 'TCP' }],
      },
    ]);
  });
});
