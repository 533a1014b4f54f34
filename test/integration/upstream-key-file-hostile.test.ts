/**
 * The upstream key file swapped for something that is not a key file, as a mounted Secret's
 * `..data` symlink can be swapped: to a named pipe outside the secret's directory (no writer:
 * reading it would never end), to a file far larger than any key. In a running facade process
 * (`node src/main.ts`), each SIGHUP is refused with one line naming why and no content, the
 * upstream is not asked about it, the next good key is still taken, and the process keeps serving.
 * A key of the right form that the upstream refuses is kept out too, and is on no output line.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret } from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { waitFor } from '../support/harness/wait.ts';
import { startKeyFileFacade } from '../support/key-file-facade.ts';
import { useProcesses } from '../support/processes.ts';

const NEW_KEY = 'sk_sandbox_rotated_after_hostile_files';
/** A key of the right form that the upstream has never accepted. */
const UNKNOWN_KEY = 'sk_sandbox_never_added_at_the_upstream';

let emulator: RunningEmulator;
const processes = useProcesses();

beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator?.close();
});

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

    const { child, logged, output, customer } = await startKeyFileFacade(
      processes,
      emulator.url,
      secret.file,
    );
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
    expect(output()).not.toContain(SANDBOX_KEY);
    expect(output()).not.toContain(NEW_KEY);
    expect(output()).not.toContain(UNKNOWN_KEY);
    expect(output()).not.toContain('kkkkkkkk');
  });
});
