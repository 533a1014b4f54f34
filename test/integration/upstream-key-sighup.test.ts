/**
 * SIGHUP reads UPSTREAM_API_KEY_FILE again in a running facade process (`node src/main.ts`, as the
 * image runs it): a bad file is logged and kept out, a good one is taken, the old key can then be
 * revoked at the upstream, and the process keeps serving; no key is ever on its stdout or stderr.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret, revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { waitFor } from '../support/harness/wait.ts';

const NEW_KEY = 'sk_sandbox_rotated_by_signal';

let emulator: RunningEmulator;
let child: ChildProcess | undefined;
const lines: Record<string, unknown>[] = [];
let output = '';

beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  if (child !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await emulator?.close();
});

const logged = (prefix: string) =>
  lines.filter((line) => typeof line['msg'] === 'string' && line['msg'].startsWith(prefix));

describe('SIGHUP and the upstream key file', () => {
  test('a bad file is kept out, a good one is taken, the process keeps serving', async () => {
    const secret = mountedSecret(`${SANDBOX_KEY}\n`);
    const { UPSTREAM_API_KEY: _key, ...inherited } = process.env;
    child = spawn(process.execPath, ['src/main.ts'], {
      cwd: new URL('../..', import.meta.url),
      env: {
        ...inherited,
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
        AUTH_MODE: 'none',
        UPSTREAM_BASE_URL: emulator.url,
        UPSTREAM_API_KEY_FILE: secret.file,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr!.on('data', (chunk) => (output += String(chunk)));
    child.stdout!.on('data', (chunk) => (output += String(chunk)));
    createInterface({ input: child.stdout! }).on('line', (line) =>
      lines.push(JSON.parse(line) as Record<string, unknown>),
    );
    await waitFor(() => logged('facade listening').length === 1, 'the facade to listen', 30_000);
    const graphqlUrl = logged('facade listening')[0]!['url'] as string;
    const customer = async () => {
      const response = await fetch(graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ customer(id: "cus_acme") { id } }' }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    secret.replace('');
    child.kill('SIGHUP');
    await waitFor(
      () => logged('UPSTREAM_API_KEY: kept the current key').some((line) => line['reason'] === 'signal'),
      'the kept key on SIGHUP to be logged',
    );
    expect(await customer()).toEqual({ status: 200, body: { data: { customer: { id: 'cus_acme' } } } });

    await addEmulatorKey(emulator.url, NEW_KEY, 'sandbox-read-write');
    secret.replace(NEW_KEY);
    child.kill('SIGHUP');
    await waitFor(() => logged('UPSTREAM_API_KEY: rotated').length === 1, 'the rotation to be logged');
    expect(logged('UPSTREAM_API_KEY: rotated')[0]).toMatchObject({ level: 'info', environment: 'sandbox' });
    await revokeEmulatorKey(emulator.url, SANDBOX_KEY);
    expect(await customer()).toEqual({ status: 200, body: { data: { customer: { id: 'cus_acme' } } } });
    expect(child.exitCode).toBeNull();
    expect(output).not.toContain(SANDBOX_KEY);
    expect(output).not.toContain(NEW_KEY);
  });
});
