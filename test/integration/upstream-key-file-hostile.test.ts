/**
 * The upstream key file swapped for something that is not a key file, as a mounted Secret's
 * `..data` symlink can be swapped: to a named pipe outside the secret's directory (no writer:
 * reading it would never end), to a file far larger than any key. In a running facade process
 * (`node src/main.ts`), each SIGHUP is refused with one line naming why and no content, the
 * upstream is not asked about it, the next good key is still taken, and the process keeps serving.
 * A key of the right form that the upstream refuses is kept out too, and is on no output line.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret } from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { waitFor } from '../support/harness/wait.ts';

const NEW_KEY = 'sk_sandbox_rotated_after_hostile_files';
/** A key of the right form that the upstream has never accepted. */
const UNKNOWN_KEY = 'sk_sandbox_never_added_at_the_upstream';

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

/** Points the secret's `..data` at a new version directory whose key entry is `link`'s target. */
function swapTo(dir: string, version: string, target: string): void {
  mkdirSync(join(dir, version));
  symlinkSync(target, join(dir, version, 'api-key'));
  symlinkSync(version, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
}

describe('a key file swapped for something else', () => {
  test('a named pipe and an oversized file are refused without reading them to the end; the next good key is taken', async () => {
    const secret = mountedSecret(`${SANDBOX_KEY}\n`);
    const elsewhere = mkdtempSync(join(tmpdir(), 'not-the-secret-'));
    const pipe = join(elsewhere, 'pipe');
    execFileSync('mkfifo', [pipe]);
    const oversized = join(elsewhere, 'oversized');
    // Visible ASCII throughout: by its form alone it would pass as a key.
    writeFileSync(oversized, 'k'.repeat(2 * 1024 * 1024));

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
    const kept = (problem: string) =>
      logged('UPSTREAM_API_KEY: kept the current key').filter(
        (line) => line['reason'] === 'signal' && String(line['msg']).includes(problem),
      );

    swapTo(secret.dir, '..hostile.pipe', pipe);
    child.kill('SIGHUP');
    await waitFor(() => kept('not a regular file').length === 1, 'the pipe to be refused');

    swapTo(secret.dir, '..hostile.oversized', oversized);
    await emulator.resetUpstreamCalls();
    child.kill('SIGHUP');
    await waitFor(() => kept('more than 4096 bytes').length === 1, 'the oversized file to be refused');
    // Not one capability discovery with 2 MiB for a key.
    expect((await emulator.upstreamCalls()).total).toBe(0);
    expect(await customer()).toEqual({ status: 200, body: { data: { customer: { id: 'cus_acme' } } } });

    // A key the upstream refuses is named nowhere, though it was not taken (nor redacted as one).
    secret.replace(UNKNOWN_KEY);
    child.kill('SIGHUP');
    await waitFor(
      () => kept('the upstream refuses the new key').length === 1,
      'the unknown key to be refused',
    );

    // A reload stuck on the pipe would hold this one back forever.
    await addEmulatorKey(emulator.url, NEW_KEY, 'sandbox-read-write');
    secret.replace(NEW_KEY);
    child.kill('SIGHUP');
    await waitFor(() => logged('UPSTREAM_API_KEY: rotated').length === 1, 'the good key to be taken');
    expect(await customer()).toEqual({ status: 200, body: { data: { customer: { id: 'cus_acme' } } } });
    expect(child.exitCode).toBeNull();
    expect(output).not.toContain(SANDBOX_KEY);
    expect(output).not.toContain(NEW_KEY);
    expect(output).not.toContain(UNKNOWN_KEY);
    expect(output).not.toContain('kkkkkkkk');
  });
});
