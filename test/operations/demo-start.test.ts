/**
 * `npm start`'s demo authentication, tried as a stranger would: a token minted offline with the key
 * earlier versions published is refused, and the demo refuses to listen beyond loopback unless told
 * that the network may reach it, and then says so at start. These run the source tree, with every
 * development dependency installed; what the image holds and runs is tried in image-runtime.test.ts.
 */
import { SignJWT } from 'jose';
import { describe, expect, test } from 'vitest';
import { readComposeFile } from '../../scripts/compose-twin.ts';
import { demoExposure, isLoopbackHost } from '../../src/demo-network-exposure.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loggedIssuer } from '../support/demo-token.ts';
import {
  LEAKED_DEMO_PUBLIC_MODULUS,
  LEAKED_DEMO_SIGNING_KEY_ID,
  offlineSigningKey,
} from '../support/leaked-demo-key.ts';
import { useNpmStart } from '../support/npm-start.ts';

const processes = useNpmStart();

/** `scripts/start.ts` with `env`, on free ports, to its exit. */
function runStart(env: Record<string, string>): ReturnType<typeof processes.runToExit> {
  return processes.runToExit('scripts/start.ts', {
    PORT: '0',
    DEV_ISSUER_PORT: '0',
    METRICS_PORT: '0',
    ...env,
  });
}

describe('the demo issuer key', () => {
  test('an operator token signed with the key earlier versions published is refused by npm start', async () => {
    const started = await processes.start({});
    const issuer = loggedIssuer(started.lines);
    const now = Math.floor(Date.now() / 1000);
    const forged = async (kid: string) =>
      new SignJWT({
        iss: issuer,
        aud: 'platform-graphql-facade',
        sub: 'demo-operator',
        client_id: 'demo-operator',
        roles: ['operator'],
        iat: now,
        exp: now + 600,
      })
        .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid })
        .sign(await offlineSigningKey());
    const { keys } = (await (await fetch(`${issuer}/jwks`)).json()) as { keys: { kid: string; n: string }[] };
    expect(keys.map((key) => key.n)).not.toContain(LEAKED_DEMO_PUBLIC_MODULUS);

    for (const kid of [LEAKED_DEMO_SIGNING_KEY_ID, keys[0]!.kid]) {
      const response = await fetch(started.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${await forged(kid)}` },
        body: JSON.stringify({ query: '{ customers(first: 1) { nodes { id } } }' }),
      });
      expect(response.status).toBe(401);
      expect(await response.text()).not.toContain('cus_');
    }
    // The demo operator's real token still works: the refusal is the key's, not the door's.
    const genuine = await fetch(started.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${started.token}` },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(genuine.status).toBe(200);
  });
});

describe('compose.yaml', () => {
  test("compose publishes every port on the host's loopback only, and lets no demo reach the network", () => {
    const { services } = readComposeFile();
    const published = Object.entries(services).flatMap(([name, service]) =>
      ((service as { ports?: string[] }).ports ?? []).map((port) => `${name} ${port}`),
    );
    expect(published.length).toBeGreaterThan(0);
    for (const entry of published) expect(entry).toMatch(/^\S+ 127\.0\.0\.1:\d+:\d+$/);
    for (const service of Object.values(services)) {
      expect(service.environment ?? {}).not.toHaveProperty('DEMO_ALLOW_NETWORK');
    }
  });
});

describe('the demo beyond loopback', () => {
  test('HOST=0.0.0.0 with the embedded issuer refuses to start, saying what to do instead', async () => {
    const { code, stdout, stderr } = await runStart({ HOST: '0.0.0.0' });
    expect(code).toBe(1);
    expect(stderr).toContain('Refusing to start: HOST=0.0.0.0 listens beyond loopback');
    expect(stderr).toContain('DEMO_ALLOW_NETWORK=true');
    expect(stdout).not.toContain('facade listening');
    expect(stdout).not.toContain('in-process OpenID provider');
  });

  test('DEMO_ALLOW_NETWORK=true starts it, with a warning, and keeps the issuer on loopback', async () => {
    const started = await processes.start({ HOST: '0.0.0.0', DEMO_ALLOW_NETWORK: 'true' });
    const warnings = started.lines.filter((line) => line.level === 'warn');
    expect(warnings.map((line) => line.msg)).toContainEqual(
      expect.stringContaining(
        'DEMO_ALLOW_NETWORK=true: the demo facade, its demo data and its demo callers listen on 0.0.0.0',
      ),
    );
    expect(new URL(loggedIssuer(started.lines)).hostname).toBe('127.0.0.1');
    await waitFor(() => started.logged('facade listening').length === 1, 'the facade to listen');
  });

  test('only loopback names pass; any other address needs DEMO_ALLOW_NETWORK=true exactly', () => {
    expect(demoExposure('0.0.0.0', {})).toMatchObject({ kind: 'refused' });
    expect(demoExposure('::', { DEMO_ALLOW_NETWORK: 'yes' })).toMatchObject({ kind: 'refused' });
    expect(demoExposure('192.168.1.20', { DEMO_ALLOW_NETWORK: 'true' })).toMatchObject({ kind: 'allowed' });
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) {
      expect(isLoopbackHost(host), host).toBe(true);
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'facade.example', '128.0.0.1']) {
      expect(isLoopbackHost(host), host).toBe(false);
    }
  });
});
