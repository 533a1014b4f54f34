/**
 * `npm start` and `src/main.ts` as real processes: the in-process emulator when no upstream is
 * configured, configuration errors reported before anything listens, graceful exit on SIGTERM
 * (to npm's own process too), and every failed start reported as one line.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { createInterface } from 'node:readline';
import { describe, expect, test } from 'vitest';
import { demoToken, loggedIssuer } from '../support/demo-token.ts';
import { waitFor } from '../support/harness/wait.ts';
import { loadScaledMs } from '../support/load-budget.ts';
import { useNpmStart, userEnvironment } from '../support/npm-start.ts';
import { waitUntilReady } from '../support/processes.ts';

const processes = useNpmStart();

/** A loopback port another process holds until the test closes `server`. */
async function busyPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, server };
}

/** Whether a process with this id still exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether something still accepts connections at `url`. */
async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url);
    await response.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

async function collect(stream: NodeJS.ReadableStream | null): Promise<string> {
  let text = '';
  for await (const chunk of stream!) text += String(chunk);
  return text;
}

describe('npm start', () => {
  test('without an upstream, serves the demo data from an in-process emulator and exits 0 on SIGTERM', async () => {
    const child = processes.run('scripts/start.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DEV_ISSUER_PORT: '0',
    });
    const lines: string[] = [];
    const stderr = collect(child.stderr);
    let url = '';
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      const entry = JSON.parse(line) as { msg: string; url?: string };
      if (entry.msg === 'facade listening') url = entry.url!;
    });
    await waitUntilReady(child, () => url !== '', 'the facade to listen');
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
    const child = processes.run('scripts/start.ts', {
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      UPSTREAM_API_KEY: 'sk_live_start_test',
    });
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toMatch(
      /^Invalid configuration: AUTH_ISSUER: is required when AUTH_MODE is oidc .*AUTH_MODE=none/,
    );
  });

  test('with an upstream URL but no key, reports the missing key and exits 1', async () => {
    const child = processes.run('scripts/start.ts', {
      UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
      AUTH_MODE: 'none',
    });
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toBe('Invalid configuration: UPSTREAM_API_KEY: is required\n');
  });

  test('refuses an upstream URL holding credentials without ever writing them out', async () => {
    const child = processes.run('scripts/start.ts', {
      UPSTREAM_BASE_URL: 'http://operator:hunter2-password@127.0.0.1:9',
      UPSTREAM_API_KEY: 'sk_live_start_test',
      AUTH_MODE: 'none',
    });
    const stdout = collect(child.stdout);
    const stderr = collect(child.stderr);

    const [code] = (await once(child, 'exit')) as [number | null];

    expect(code).toBe(1);
    expect(await stderr).toBe(
      'Invalid configuration: UPSTREAM_BASE_URL: must not contain credentials, a query or a fragment\n',
    );
    expect(await stdout).not.toContain('hunter2-password');
  });
});

describe('npm start, run by npm', () => {
  test('SIGTERM to npm itself stops the facade, its emulator and its OpenID provider', async () => {
    const npm = processes.spawn('npm', ['start'], {
      cwd: new URL('../..', import.meta.url),
      env: userEnvironment({ PORT: '0', HOST: '127.0.0.1', DEV_ISSUER_PORT: '0', LOG_LEVEL: 'info' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, unknown>[] = [];
    createInterface({ input: npm.stdout! }).on('line', (line) => {
      if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    });
    const logged = (msg: string) => lines.find((entry) => entry.msg === msg);
    await waitUntilReady(npm, () => logged('facade listening') !== undefined, 'the facade to listen', {
      quietMs: 30_000,
    });
    const graphqlUrl = logged('facade listening')!.url as string;
    const issuer = loggedIssuer(lines);
    // npm's child is the facade's own process (no shell in between left to orphan it).
    const [facadePid] = readFileSync(`/proc/${npm.pid}/task/${npm.pid}/children`, 'utf8')
      .trim()
      .split(' ')
      .map(Number);
    expect(facadePid).toBeGreaterThan(0);
    const facadeCommand = readFileSync(`/proc/${facadePid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(facadeCommand.slice(-1)).toEqual(['scripts/start.ts']);
    expect(await answers(`${issuer}/jwks`)).toBe(true);

    npm.kill('SIGTERM');
    const [code] = (await once(npm, 'exit')) as [number | null];

    expect(code).toBe(0);
    await waitFor(() => !alive(facadePid!), 'the facade process to exit', loadScaledMs(15_000));
    expect(logged('shutting down')).toMatchObject({ signal: 'SIGTERM' });
    expect(await answers(graphqlUrl)).toBe(false);
    expect(await answers(`${issuer}/jwks`)).toBe(false);
  });
});

describe('a start that cannot succeed', () => {
  test('a busy PORT is one line on stderr, exit 1, and nothing printed as started', async () => {
    const { port, server } = await busyPort();
    try {
      const { code, stdout, stderr } = await processes.runToExit('scripts/start.ts', {
        PORT: String(port),
        HOST: '127.0.0.1',
        DEV_ISSUER_PORT: '0',
      });
      expect(code).toBe(1);
      expect(stderr).toBe(
        `Cannot start the facade on 127.0.0.1:${port}: the port is in use by another process. ` +
          'Stop that process, or set PORT to another port (0: any free port).\n',
      );
      expect(stdout).not.toContain('facade listening');
    } finally {
      server.close();
    }
  });

  test('a busy METRICS_PORT names METRICS_PORT', async () => {
    const { port, server } = await busyPort();
    try {
      const { code, stderr } = await processes.runToExit('src/main.ts', {
        PORT: '0',
        HOST: '127.0.0.1',
        METRICS_PORT: String(port),
        UPSTREAM_BASE_URL: 'http://127.0.0.1:9',
        UPSTREAM_API_KEY: 'sk_live_start_test',
        AUTH_MODE: 'none',
      });
      expect(code).toBe(1);
      expect(stderr).toBe(
        `Cannot start the facade on 127.0.0.1:${port}: the port is in use by another process. ` +
          'Stop that process, or set METRICS_PORT to another port (0: any free port).\n',
      );
    } finally {
      server.close();
    }
  });

  test('a busy DEV_ISSUER_PORT is one line naming DEV_ISSUER_PORT, and no token is offered', async () => {
    const { port, server } = await busyPort();
    try {
      const { code, stdout, stderr } = await processes.runToExit('scripts/start.ts', {
        PORT: '0',
        HOST: '127.0.0.1',
        DEV_ISSUER_PORT: String(port),
      });
      expect(code).toBe(1);
      expect(stderr).toBe(
        `Cannot start the demo OpenID provider on 127.0.0.1:${port}: the port is in use by another process. ` +
          'Stop that process, or set DEV_ISSUER_PORT to another port (0: any free port).\n',
      );
      expect(stdout).not.toContain('facade listening');
      expect(stdout).not.toContain('OpenID provider with demo clients');
    } finally {
      server.close();
    }
  });

  test('DEV_ISSUER_PORT=abc is one line, before anything starts', async () => {
    const { code, stdout, stderr } = await processes.runToExit('scripts/start.ts', {
      PORT: '0',
      HOST: '127.0.0.1',
      DEV_ISSUER_PORT: 'abc',
    });
    expect(code).toBe(1);
    expect(stderr).toBe(
      'DEV_ISSUER_PORT must be a port number from 0 to 65535 (0: any free port); got "abc".\n',
    );
    expect(stdout).toBe('');
  });

  test('PORT=abc is refused before anything starts: no token instructions, no log line', async () => {
    const { code, stdout, stderr } = await processes.runToExit('scripts/start.ts', {
      PORT: 'abc',
      HOST: '127.0.0.1',
      DEV_ISSUER_PORT: '0',
    });
    expect(code).toBe(1);
    expect(stderr).toBe('Invalid configuration: PORT: must be an integer from 0 to 65535, got "abc"\n');
    expect(stdout).toBe('');
  });
});

describe('src/main.ts', () => {
  test('reports every bad variable, never the key, and exits 1 without listening', async () => {
    const child = processes.run('src/main.ts', {
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
