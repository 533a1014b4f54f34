/**
 * `npm start` and `src/main.ts` as real processes: the in-process emulator when no upstream is
 * configured, configuration errors reported before anything listens, graceful exit on SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, test } from 'vitest';
import { demoToken, loggedIssuer } from '../support/demo-token.ts';

const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

function run(script: string, env: Record<string, string>): ChildProcess {
  const {
    UPSTREAM_BASE_URL: _base,
    UPSTREAM_API_KEY: _key,
    AUTH_ISSUER: _issuer,
    AUTH_AUDIENCE: _audience,
    ...inherited
  } = process.env;
  const child = spawn(process.execPath, [script], {
    cwd: new URL('../..', import.meta.url),
    // As a user runs it: vitest's NODE_ENV=test would switch off Apollo Server's own signal handling.
    env: { ...inherited, NODE_ENV: 'production', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return child;
}

async function collect(stream: NodeJS.ReadableStream | null): Promise<string> {
  let text = '';
  for await (const chunk of stream!) text += String(chunk);
  return text;
}

describe('npm start', () => {
  test('without an upstream, serves the demo data from an in-process emulator and exits 0 on SIGTERM', async () => {
    const child = run('scripts/start.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DEV_ISSUER_PORT: '0',
    });
    const lines: string[] = [];
    const stderr = collect(child.stderr);
    const listening = new Promise<string>((resolve, reject) => {
      const reader = createInterface({ input: child.stdout! });
      reader.on('line', (line) => {
        lines.push(line);
        const entry = JSON.parse(line) as { msg: string; url?: string };
        if (entry.msg === 'facade listening') resolve(entry.url!);
      });
      child.once('exit', (code) => reject(new Error(`exited with ${code} before listening`)));
    });
    const url = await listening;
    const query = JSON.stringify({ query: '{ customer(id: "cus_acme") { displayName } }' });

    // Without a token: refused, and nothing reaches the emulator.
    const anonymous = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: query,
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');

    // With the demo operator's token, got the way the printed curl gets it.
    const issuer = loggedIssuer(lines.map((line) => JSON.parse(line) as Record<string, unknown>));
    expect(issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const token = await demoToken(issuer);
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: query,
    });
    expect(await response.json()).toEqual({ data: { customer: { displayName: 'Acme Robotics Ltd' } } });

    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    const upstream = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((entry) => entry.msg === 'upstream: in-process emulator with demo data');
    expect(upstream?.upstream).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const printed = await stderr;
    expect(printed).toContain(
      'curl -s -u demo-operator:demo-operator-secret -d grant_type=client_credentials',
    );
    expect(printed).toContain('curl -s -u demo-acme:demo-acme-secret');
    expect([...lines, printed].join('\n')).not.toContain('sk_sandbox_emulator');
    expect([...lines, printed].join('\n')).not.toContain(token);
  });

  test('with a real upstream and no issuer, refuses to start and says how to proceed', async () => {
    const child = run('scripts/start.ts', {
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      UPSTREAM_API_KEY: 'sk_live_start_test',
    });
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toMatch(
      /^Invalid configuration:\n {2}- AUTH_ISSUER: is required when AUTH_MODE is oidc .*AUTH_MODE=none/,
    );
  });

  test('with an upstream URL but no key, reports the missing key and exits 1', async () => {
    const child = run('scripts/start.ts', { UPSTREAM_BASE_URL: 'http://127.0.0.1:9', AUTH_MODE: 'none' });
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toBe('Invalid configuration:\n  - UPSTREAM_API_KEY: is required\n');
  });

  test('refuses an upstream URL holding credentials without ever writing them out', async () => {
    const child = run('scripts/start.ts', {
      UPSTREAM_BASE_URL: 'http://operator:hunter2-password@127.0.0.1:9',
      UPSTREAM_API_KEY: 'sk_live_start_test',
      AUTH_MODE: 'none',
    });
    const stdout = collect(child.stdout);
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toBe(
      'Invalid configuration:\n  - UPSTREAM_BASE_URL: must not contain credentials, a query or a fragment\n',
    );
    expect(await stdout).not.toContain('hunter2-password');
  });
});

describe('src/main.ts', () => {
  test('reports every bad variable, never the key, and exits 1 without listening', async () => {
    const child = run('src/main.ts', {
      UPSTREAM_BASE_URL: 'nonsense',
      UPSTREAM_API_KEY: 'sk_live with space',
      PORT: 'eighty',
      AUTH_MODE: 'none',
    });
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    const text = await stderr;
    expect(text.split('\n')).toEqual([
      'Invalid configuration:',
      '  - PORT: must be an integer from 0 to 65535, got "eighty"',
      '  - UPSTREAM_BASE_URL: must be an absolute http(s) URL, got "nonsense"',
      '  - UPSTREAM_API_KEY: must contain only visible ASCII characters (no spaces or line breaks)',
      '',
    ]);
    expect(text).not.toContain('sk_live');
  });
});
