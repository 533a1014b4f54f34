/**
 * The upstream keys as deploy/kubernetes mounts them, with a real facade: the rendered base's
 * `UPSTREAM_API_KEY_SANDBOX_FILE` and `UPSTREAM_API_KEY_LIVE_FILE`, each in the directory of its
 * Secret volume laid out as the kubelet lays one out (the file a link into `..data`, a link to a
 * timestamped directory), and the kubelet's update of a Secret: a new timestamped directory and
 * `..data` swapped to it by a rename. The facade, started on those files, takes live's new key
 * without a restart (its directory changed: the watch sees the swap), leaves the sandbox's alone,
 * serves live callers with the new key once the old one is revoked, stays ready throughout, and
 * logs no key.
 */
import { spawnSync } from 'node:child_process';
import { basename, dirname, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret, revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import { LIVE_KEY, SANDBOX_KEY } from '../support/harness/emulator.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { devIssuerEnv, startDevIssuer, type DevIssuer } from '../support/issuer.ts';

const BASE = resolve(import.meta.dirname, '../../deploy/kubernetes');
const rendered = spawnSync('kubectl', ['kustomize', BASE], { encoding: 'utf8' });
const hasKubectl = rendered.error === undefined && rendered.status === 0;
if (!hasKubectl) {
  process.stderr.write('kubernetes-key-files.test.ts: SKIPPED, kubectl is not installed.\n');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The key files the base points the facade at, by variable, and the Secret key each one is. */
function keyFilesOfTheBase(): Record<string, { file: string; secretKey: string }> {
  const objects = parseAllDocuments(rendered.stdout).map((document) => document.toJSON() as Json);
  const deployment = objects.find(
    (object) => object.kind === 'Deployment' && object.metadata.name === 'platform-graphql-facade',
  );
  const pod = deployment.spec.template.spec;
  const [container] = pod.containers;
  const settingsName = container.envFrom[0].configMapRef.name as string;
  const settings = objects.find(
    (object) => object.kind === 'ConfigMap' && object.metadata.name === settingsName,
  );
  const files: Record<string, { file: string; secretKey: string }> = {};
  for (const [name, file] of Object.entries(settings.data as Record<string, string>)) {
    if (!/^UPSTREAM_API_KEY_\w+_FILE$/.test(name)) continue;
    const mount = container.volumeMounts.find((candidate: Json) => candidate.mountPath === dirname(file));
    const volume = pod.volumes.find((candidate: Json) => candidate.name === mount.name);
    const item = volume.secret.items.find((candidate: Json) => candidate.path === basename(file));
    files[name] = { file, secretKey: item.key as string };
  }
  return files;
}

describe.skipIf(!hasKubectl)('the upstream keys as deploy/kubernetes mounts them', () => {
  let issuer: DevIssuer;
  let stack: Stack;
  const secrets = hasKubectl
    ? Object.fromEntries(
        Object.entries(keyFilesOfTheBase()).map(([variable, { file, secretKey }]) => {
          const key = variable === 'UPSTREAM_API_KEY_LIVE_FILE' ? LIVE_KEY : SANDBOX_KEY;
          // The Secret's key is the file's name in the volume (items: key -> path).
          expect(secretKey).toBe('api-key');
          return [variable, { mounted: mountedSecret(`${key}\n`, basename(file)), path: file }];
        }),
      )
    : {};

  beforeAll(async () => {
    issuer = await startDevIssuer({
      clients: [
        { clientId: 'live-ops', clientSecret: 'live-ops-secret', roles: ['operator'], environment: 'live' },
        {
          clientId: 'sandbox-ops',
          clientSecret: 'sandbox-ops-secret',
          roles: ['operator'],
          environment: 'sandbox',
        },
      ],
    });
    stack = await startStack({
      env: {
        ...devIssuerEnv(issuer),
        UPSTREAM_API_KEY: '',
        ...Object.fromEntries(
          Object.entries(secrets).map(([variable, { mounted }]) => [variable, mounted.file]),
        ),
        READINESS_CACHE_MS: '0',
        RECONCILE_INTERVAL_SECONDS: '0',
      },
    });
  });

  afterAll(async () => {
    await stack?.close();
    await issuer?.close();
  });

  const lines = (prefix: string): Record<string, unknown>[] =>
    stack
      .logs()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => String(line['msg']).startsWith(prefix));

  const customerOf = async (clientId: string, id: string) => {
    const response = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${await issuer.token(clientId)}`,
      },
      body: JSON.stringify({ query: `{ customer(id: "${id}") { id } }` }),
    });
    return (await response.json()) as { data?: unknown; errors?: unknown[] };
  };

  test('the base mounts one file per environment, and the facade reads both', async () => {
    expect(Object.keys(secrets).sort()).toEqual([
      'UPSTREAM_API_KEY_LIVE_FILE',
      'UPSTREAM_API_KEY_SANDBOX_FILE',
    ]);
    const ready = await fetch(`${stack.facadeUrl}/readyz`);
    expect(await ready.json()).toEqual({
      status: 'ready',
      environments: {
        sandbox: { reachable: true, environment: 'sandbox' },
        live: { reachable: true, environment: 'live' },
      },
    });
  });

  test('a Secret update (..data swapped) rotates that environment’s key without a restart', async () => {
    const newLiveKey = 'sk_live_rotated_by_the_kubelet';
    await addEmulatorKey(stack.emulatorUrl, newLiveKey, 'live-read-write');
    secrets.UPSTREAM_API_KEY_LIVE_FILE!.mounted.replace(`${newLiveKey}\n`);
    await waitFor(
      () => lines('UPSTREAM_API_KEY_LIVE: rotated').length === 1,
      'the facade to take the new live key from the swapped files',
    );
    expect(lines('UPSTREAM_API_KEY_LIVE: rotated')[0]).toMatchObject({
      reason: 'file-change',
      environment: 'live',
    });
    expect(lines('UPSTREAM_API_KEY_SANDBOX: rotated')).toEqual([]);

    // The old live key revoked: live callers are served with the new one, sandbox callers as before.
    await revokeEmulatorKey(stack.emulatorUrl, LIVE_KEY);
    await stack.resetUpstreamCalls();
    expect(await customerOf('live-ops', 'cus_live_northwind')).toEqual({
      data: { customer: { id: 'cus_live_northwind' } },
    });
    expect(await customerOf('sandbox-ops', 'cus_acme')).toEqual({ data: { customer: { id: 'cus_acme' } } });
    expect(await stack.emulator.upstreamCallsByKey()).toEqual({
      'live-read-write': 1,
      'sandbox-read-write': 1,
    });
    const ready = await fetch(`${stack.facadeUrl}/readyz`);
    expect(ready.status).toBe(200);
    for (const line of stack.logs()) {
      for (const key of [LIVE_KEY, SANDBOX_KEY, newLiveKey]) expect(line).not.toContain(key);
    }
  });
});
