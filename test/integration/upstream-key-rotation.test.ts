/**
 * Rotating the facade's upstream key without a blip: the key comes from a file laid out as a
 * mounted Kubernetes Secret (UPSTREAM_API_KEY_FILE), a change there is picked up without a
 * restart, every attempt sends the key current at that moment, and a key the upstream does not
 * accept (an empty, half-written or not yet added key) never replaces the working one. A real
 * emulator (its keys added and revoked at runtime), a real file, a real facade.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import {
  addEmulatorKey,
  ledgerBalance,
  mountedSecret,
  revokeEmulatorKey,
  runRotationLoad,
  TOP_UP_AMOUNT,
} from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer } from '../support/tokens.ts';

/** The identity of the emulator's sandbox key: new keys of it share its data and idempotency keys. */
const SANDBOX_IDENTITY = 'sandbox-read-write';

/** Lines of the key source (`UPSTREAM_API_KEY: ...`), parsed. */
function keyLines(stack: Stack): Record<string, unknown>[] {
  return stack
    .logs()
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => typeof line['msg'] === 'string' && line['msg'].startsWith('UPSTREAM_API_KEY'));
}

function rotatedLines(stack: Stack): number {
  return keyLines(stack).filter((line) => String(line['msg']).includes('rotated')).length;
}

/** No line the facade wrote holds any of `keys` (its test logger redacts nothing). */
function expectNoKeyLogged(stack: Stack, keys: readonly string[]): void {
  for (const line of stack.logs()) for (const key of keys) expect(line).not.toContain(key);
}

const CUSTOMER = /* GraphQL */ `
  query RotationCustomer {
    customer(id: "cus_acme") {
      id
      externalId
    }
  }
`;

describe('UPSTREAM_API_KEY_FILE', () => {
  const secret = mountedSecret(`${SANDBOX_KEY}\n`);
  const stack = useStack({
    env: { UPSTREAM_API_KEY: '', UPSTREAM_API_KEY_FILE: secret.file, CACHE_ENABLED: 'true' },
  });

  test('a bad file keeps the current key, says why in one line without a key, and costs no call', async () => {
    const before = keyLines(stack).length;
    writeFileSync(`${secret.dir}/..data/api-key`, '');
    const empty = await stack.app.reloadUpstreamKey();
    expect(empty).toEqual({ outcome: 'kept', problem: 'the file is empty' });

    // Half-written: the first characters of a key the upstream has never seen.
    secret.replace('sk_sandbox_half');
    await stack.resetUpstreamCalls();
    const half = await stack.app.reloadUpstreamKey();
    expect(half.outcome).toBe('kept');
    // One probe of the candidate, refused; the current key was not touched.
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });

    const lines = keyLines(stack).slice(before);
    expect(lines.map((line) => line['msg'])).toEqual(
      expect.arrayContaining([
        'UPSTREAM_API_KEY: kept the current key: the file is empty',
        'UPSTREAM_API_KEY: kept the current key: the upstream refuses the new key (401 unauthorized); add it at the upstream first',
      ]),
    );
    expect(lines.every((line) => line['level'] === 'error')).toBe(true);
    expectNoKeyLogged(stack, [SANDBOX_KEY, 'sk_sandbox_half']);

    // Calls still go out with the working key.
    const answer = await stack.query<{ customer: { id: string } }>(CUSTOMER);
    expect(answer.body.errors).toBeUndefined();
    expect(answer.body.data?.customer.id).toBe('cus_acme');
    secret.replace(`${SANDBOX_KEY}\n`);
    expect(await stack.app.reloadUpstreamKey()).toEqual({ outcome: 'unchanged' });
  });

  test('under load, a rotation fails no operation and doubles no write', async () => {
    const newKey = 'sk_sandbox_rotated_load';
    const startBalance = await ledgerBalance(stack.emulatorUrl, SANDBOX_KEY);
    const rotations = rotatedLines(stack);
    const headers = await bearer('operator');
    let stopped = false;
    const load = runRotationLoad({
      graphqlUrl: stack.graphqlUrl,
      headers: () => headers,
      workers: 3,
      stop: () => stopped,
    });

    await new Promise((resolve) => setTimeout(resolve, 300));
    // The operator's procedure: the new key at the upstream, then the Secret, then the reload line.
    await addEmulatorKey(stack.emulatorUrl, newKey, SANDBOX_IDENTITY);
    secret.replace(`${newKey}\n`);
    await waitFor(() => rotatedLines(stack) > rotations, 'the facade logs the rotation');
    await new Promise((resolve) => setTimeout(resolve, 200));
    // After the window the old key goes; calls from here on can only succeed with the new one.
    await revokeEmulatorKey(stack.emulatorUrl, SANDBOX_KEY);
    await new Promise((resolve) => setTimeout(resolve, 400));
    stopped = true;
    const operations = await load;

    const failed = operations.filter((operation) => !operation.ok);
    expect(failed).toEqual([]);
    const acknowledged = operations.filter((operation) => operation.acknowledged === true).length;
    expect(acknowledged).toBeGreaterThan(3);
    const endBalance = await ledgerBalance(stack.emulatorUrl, newKey);
    // Every acknowledged top-up credited once, and nothing else was credited.
    expect(Math.round((endBalance - startBalance) * 100)).toBe(
      acknowledged * Math.round(Number(TOP_UP_AMOUNT) * 100),
    );

    const rotated = keyLines(stack).find((line) => String(line['msg']).includes('rotated'));
    expect(rotated).toMatchObject({ level: 'info', environment: 'sandbox', reason: 'file-change' });
    expectNoKeyLogged(stack, [SANDBOX_KEY, newKey]);
  });

  test('a rotation neither misses nor flushes the response cache, and costs one probe', async () => {
    const next = 'sk_sandbox_rotated_cache';
    await addEmulatorKey(stack.emulatorUrl, next, SANDBOX_IDENTITY);
    expect((await stack.query(CUSTOMER)).body.errors).toBeUndefined();
    await stack.resetUpstreamCalls();
    secret.replace(next);
    expect(await stack.app.reloadUpstreamKey()).toEqual({ outcome: 'rotated', environment: 'sandbox' });
    // The answer kept under the old key is served under the new one: no upstream read.
    expect((await stack.query(CUSTOMER)).body.data).toEqual({
      customer: { id: 'cus_acme', externalId: expect.any(String) as string },
    });
    // The one call of the rotation: the new key's probe (the old key's environment was known).
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
    expectNoKeyLogged(stack, [next]);
  });
});

describe('UPSTREAM_API_KEY_FILE with slow retries', () => {
  const secret = mountedSecret(SANDBOX_KEY);
  const stack = useStack({
    env: {
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_FILE: secret.file,
      // Long enough to rotate and revoke between an attempt and its retry.
      UPSTREAM_RETRY_BASE_DELAY_MS: '3000',
      UPSTREAM_RETRY_MAX_DELAY_MS: '3000',
    },
  });

  test('a retry after the switch sends the new key', async () => {
    const next = 'sk_sandbox_rotated_retry';
    await addEmulatorKey(stack.emulatorUrl, next, SANDBOX_IDENTITY);
    // The first attempt fails (500) with the old key; before its retry (1.5 to 3 s later) the old
    // key is revoked and then the key rotates, so the retry can only succeed with the new key.
    await stack.setFaults({ rules: [{ route: 'getCustomer', kind: 'internal_error', rate: 1, times: 1 }] });
    const answer = stack.query<{ customer: { id: string } }>(CUSTOMER);
    let failedOnce = false;
    await waitFor(
      () => failedOnce,
      'the first attempt fails',
      10_000,
      async () => {
        failedOnce = (await stack.upstreamCalls()).byRoute['GET /v3/customers/{customerId}'] === 1;
      },
    );
    await revokeEmulatorKey(stack.emulatorUrl, SANDBOX_KEY);
    secret.replace(next);
    expect(await stack.app.reloadUpstreamKey()).toEqual({ outcome: 'rotated', environment: 'sandbox' });
    const result = await answer;
    expect(result.body.errors).toBeUndefined();
    expect(result.body.data?.customer.id).toBe('cus_acme');
    const log = (await (await fetch(`${stack.emulatorUrl}/_emulator/requests`)).json()) as {
      requests: { route: string; status: number }[];
    };
    expect(
      log.requests
        .filter((request) => request.route === 'GET /v3/customers/{customerId}')
        .map((request) => request.status),
    ).toEqual([500, 200]);
    expectNoKeyLogged(stack, [SANDBOX_KEY, next]);
  });
});
