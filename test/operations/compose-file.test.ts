/**
 * compose.yaml as Docker Compose reads it, and as the rest of the shipped topology expects it:
 * Debian's `docker-compose config` accepts it, it validates against the compose specification's
 * JSON schema (the copy Debian's docker-compose ships), and its parts agree with each other and with
 * deploy/kubernetes: the event log's Redis runs the same start script (AOF on a volume per data
 * server, three Sentinels), the facades are pointed at those Sentinels by the same names, and read
 * the upstream key from a file, as on Kubernetes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { readComposeFile } from '../../scripts/compose-twin.ts';
import { keyOfFileText } from '../../src/upstream/key-source.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const COMPOSE = join(ROOT, 'compose.yaml');
/** The compose specification's schema as Debian's docker-compose 1.29 package ships it. */
const SPEC = '/usr/lib/python3/dist-packages/compose/config/compose_spec.json';

const dockerCompose = spawnSync('docker-compose', ['version'], { encoding: 'utf8' });
const hasDockerCompose = dockerCompose.error === undefined && dockerCompose.status === 0;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** `value` without its string-valued `id` members (a property named `id` is an object: kept). */
function withoutIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutIds);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key, member]) => !(key === 'id' && typeof member === 'string'))
      .map(([key, member]) => [key, withoutIds(member)]),
  );
}

describe('compose.yaml', () => {
  it.skipIf(!hasDockerCompose)('is accepted by `docker-compose config`', () => {
    const checked = spawnSync('docker-compose', ['-f', COMPOSE, 'config', '-q'], {
      encoding: 'utf8',
      cwd: ROOT,
    });
    expect(checked.stderr).toBe('');
    expect(checked.status).toBe(0);
  });

  it.skipIf(!existsSync(SPEC))('validates against the compose specification’s schema', () => {
    const ajv = new Ajv2019({ strict: false, allErrors: true });
    // The schema's own formats: a Go duration (`2s`), and port, expose and subnet entries.
    ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/);
    ajv.addFormat('ports', true);
    ajv.addFormat('expose', true);
    ajv.addFormat('subnet_ip_address', true);
    // Its `$schema` names draft 2019-09 with a trailing `#`, which ajv does not resolve, and its `id`s
    // are draft-04's spelling (informative only): compiled as 2019-09, without either.
    const { $schema: _draft, ...schema } = JSON.parse(readFileSync(SPEC, 'utf8')) as Record<string, unknown>;
    const validate = ajv.compile(withoutIds(schema) as object);
    const document = parse(readFileSync(COMPOSE, 'utf8'), { merge: true }) as Json;
    expect(validate(document), JSON.stringify(validate.errors, null, 2)).toBe(true);
    // And the check bites: a misspelt key is refused.
    const broken = structuredClone(document);
    broken.services['redis-1'].healtcheck = broken.services['redis-1'].healthcheck;
    expect(validate(broken)).toBe(false);
  });

  it('runs the event log’s Redis as deploy/kubernetes does: the same script, AOF volumes, three Sentinels', () => {
    const { services } = readComposeFile();
    const raw = parse(readFileSync(COMPOSE, 'utf8'), { merge: true }) as Json;
    const members = Object.entries(services).filter(([, service]) =>
      service.command?.includes('/etc/redis-ha/redis-ha.sh'),
    );
    const servers = members.filter(([, service]) => service.command?.at(-1) === 'server');
    const sentinels = members.filter(([, service]) => service.command?.at(-1) === 'sentinel');
    expect(servers.map(([name]) => name)).toEqual(['redis-1', 'redis-2']);
    expect(sentinels.map(([name]) => name)).toEqual(['sentinel-1', 'sentinel-2', 'sentinel-3']);
    const announced = (list: typeof members): string =>
      list.map(([, service]) => service.environment!.REDIS_ANNOUNCE).join(',');
    for (const [name, service] of members) {
      expect(service.image, name).toBe(raw['x-redis'].image);
      expect(service.volumes, name).toContain('./deploy/kubernetes/redis-ha.sh:/etc/redis-ha/redis-ha.sh:ro');
      expect(service.environment!.REDIS_SERVERS, name).toBe(announced(servers));
      expect(service.environment!.REDIS_SENTINELS, name).toBe(announced(sentinels));
      expect(service.environment!.REDIS_ANNOUNCE, name).toMatch(new RegExp(`^${name}:\\d+$`));
    }
    // Each data server's AOF (in /data, where the script keeps it) on a named volume of its own.
    for (const [name, service] of servers) expect(service.volumes, name).toContain(`${name}:/data`);
    for (const name of ['facade-a', 'facade-b']) {
      const environment = services[name]!.environment!;
      expect(environment.REDIS_URL, name).toBeUndefined();
      expect(environment.REDIS_SENTINELS, name).toBe(announced(sentinels));
      expect(environment.REDIS_SENTINEL_MASTER, name).toBe(servers[0]![1].environment!.REDIS_SENTINEL_MASTER);
      expect(environment.REDIS_MIN_REPLICAS_ACK, name).toBe('1');
    }
    // The same image and master name as deploy/kubernetes/redis.yaml.
    const kubernetes = readFileSync(join(ROOT, 'deploy/kubernetes/redis.yaml'), 'utf8');
    expect(kubernetes).toContain(`image: ${raw['x-redis'].image}`);
    expect(readFileSync(join(ROOT, 'deploy/kubernetes/facade.env'), 'utf8')).toContain(
      `REDIS_SENTINEL_MASTER=${servers[0]![1].environment!.REDIS_SENTINEL_MASTER}`,
    );
  });

  it('gives the facades their upstream key as a file, as deploy/kubernetes does', () => {
    const raw = parse(readFileSync(COMPOSE, 'utf8'), { merge: true }) as Json;
    for (const name of ['facade-a', 'facade-b']) {
      const service = raw.services[name];
      expect(service.environment.UPSTREAM_API_KEY, name).toBeUndefined();
      const [secret] = service.secrets as string[];
      expect(service.environment.UPSTREAM_API_KEY_FILE, name).toBe(`/run/secrets/${secret}`);
      const file = join(ROOT, raw.secrets[secret!].file as string);
      expect(keyOfFileText(readFileSync(file, 'utf8'))).toEqual({ key: 'sk_sandbox_emulator' });
    }
  });
});
