/**
 * SIGHUP reads UPSTREAM_API_KEY_FILE again in a running facade process (`node src/main.ts`, as the
 * image runs it): a bad file is logged and kept out, a good one is taken, the old key can then be
 * revoked at the upstream, and the process keeps serving; no key is ever on its stdout or stderr.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret, revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { waitFor } from '../support/harness/wait.ts';
import { startKeyFileFacade } from '../support/key-file-facade.ts';
import { useProcesses } from '../support/processes.ts';

const NEW_KEY = 'sk_sandbox_rotated_by_signal';

let emulator: RunningEmulator;
const processes = useProcesses();

beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator?.close();
});

describe('SIGHUP and the upstream key file', () => {
  test('a bad file is kept out, a good one is taken, the process keeps serving', async () => {
    const secret = mountedSecret(`${SANDBOX_KEY}\n`);
    const { child, logged, output, customer } = await startKeyFileFacade(
      processes,
      emulator.url,
      secret.file,
    );

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
    expect(output()).not.toContain(SANDBOX_KEY);
    expect(output()).not.toContain(NEW_KEY);
  });
});
