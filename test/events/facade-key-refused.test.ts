/**
 * The facade's own upstream key refused (revoked at the upstream before an operator installs its
 * successor), against the real emulator and a key file rotated as the kubelet rotates a Secret. It
 * is the facade's outage, not its callers' refusal: a caller with a valid token is told to retry
 * (`UPSTREAM_UNAVAILABLE`, `credential_refused`, retryable), never that its own credentials are
 * wrong, and learns nothing of the key; a write refused so did nothing and is done once when sent
 * again with its key; a subscriber is sent nothing while the key is refused and, once the new key
 * is installed, every event of that time once, in order, as an upstream outage leaves it. A live
 * connection opened while the key is refused is asked to come back (1013), not closed as
 * unauthorised. A caller's own key the upstream refuses is still that caller's UNAUTHENTICATED.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, test } from 'vitest';
import { addEmulatorKey, mountedSecret, revokeEmulatorKey } from '../../scripts/key-rotation.ts';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { useStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer } from '../support/tokens.ts';

/** The identity of the emulator's sandbox key, which a successor key is added to. */
const SANDBOX_IDENTITY = 'sandbox-read-write';
/** The platform's own writer in these tests: another key of that identity, never revoked. */
const PLATFORM_KEY = 'sk_sandbox_platform_writer';

const ACCOUNT_CHANGED = `subscription {
  accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { cursor eventId replayed account { id } }
}`;
const TOP_UP = `mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { idempotencyKey replayed } }`;

interface Change {
  accountChanged: { cursor: string; eventId: string; replayed: boolean; account: { id: string } | null };
}

async function topUpAtTheEmulator(stack: Stack): Promise<void> {
  const response = await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
    key: PLATFORM_KEY,
    body: { amount: '5.00', currency: 'USDC' },
  });
  expect(response.status).toBe(200);
}

/** Account webhooks the emulator delivered (answered 2xx), and the ids of their events. */
async function deliveredEvents(stack: Stack): Promise<string[]> {
  const response = await fetch(`${stack.emulatorUrl}/_emulator/webhook-deliveries`);
  const { data } = (await response.json()) as {
    data: { eventId: string; eventType: string; outcome: string }[];
  };
  return data
    .filter((delivery) => delivery.eventType === 'account.updated' && delivery.outcome === 'delivered')
    .map((delivery) => delivery.eventId);
}

async function balanceAtTheEmulator(stack: Stack): Promise<number> {
  const response = await stack.emulator.rest('GET', '/v3/customers/cus_globex/accounts/acc_globex_eth', {
    key: PLATFORM_KEY,
  });
  const { data } = response.body as { data: { balances: { available: string }[] } };
  return Number(data.balances[0]!.available);
}

describe('while the upstream refuses the facade’s own key', () => {
  const secret = mountedSecret(`${SANDBOX_KEY}\n`);
  const stack = useStack({
    env: {
      UPSTREAM_API_KEY: '',
      UPSTREAM_API_KEY_FILE: secret.file,
      WEBHOOK_REGISTER: 'true',
      RECONCILE_INTERVAL_SECONDS: '0',
    },
  });
  let current = SANDBOX_KEY;
  afterAll(() => rmSync(secret.dir, { recursive: true, force: true }));

  /** Revokes the key the facade holds, at the upstream. */
  const revoke = () => revokeEmulatorKey(stack.emulatorUrl, current);
  /** An operator installs a successor through the mounted file, as the kubelet swaps a Secret. */
  const installSuccessor = async (): Promise<void> => {
    current = `sk_sandbox_successor_${randomUUID().slice(0, 8)}`;
    await addEmulatorKey(stack.emulatorUrl, current, SANDBOX_IDENTITY);
    secret.replace(`${current}\n`);
  };

  test('a subscriber is sent nothing while it is refused, then every event of that time once, in order, once the new key is in', async () => {
    await addEmulatorKey(stack.emulatorUrl, PLATFORM_KEY, SANDBOX_IDENTITY);
    const client = stack.connect({ Authorization: (await bearer('acme')).authorization });
    const live = client.subscribe(ACCOUNT_CHANGED);
    await stack.subscriptionsStarted(1);
    const before = (await deliveredEvents(stack)).length;
    await topUpAtTheEmulator(stack);
    await waitFor(() => live.data.length === 1, 'the first event');

    await revoke();
    // The platform's own changes go on; their webhooks are taken (200), and wait for the key.
    await topUpAtTheEmulator(stack);
    await topUpAtTheEmulator(stack);
    let delivered = 0;
    await waitFor(
      () => delivered >= before + 3,
      'the two webhooks of the refused time delivered',
      undefined,
      async () => {
        delivered = (await deliveredEvents(stack)).length;
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(live.errors).toEqual([]);
    expect(live.data).toHaveLength(1);

    await installSuccessor();
    await waitFor(() => live.data.length === 3, 'the events of the refused time');
    const events = (await deliveredEvents(stack)).slice(before);
    expect((live.data as Change[]).map((change) => change.accountChanged.eventId)).toEqual(events);
    for (const change of live.data as Change[]) {
      expect(change.accountChanged.account).toEqual({ id: 'acc_acme_eth' });
      expect(change.accountChanged.replayed).toBe(false);
    }
    expect(live.errors).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(live.data).toHaveLength(3);
    for (const line of stack.logs()) expect(line).not.toContain(current);
    await client.dispose();
  });

  test('queries and writes answer a retryable UPSTREAM_UNAVAILABLE that names no key; a refused write is done once when sent again', async () => {
    await revoke();
    const read = await stack.query('{ customer(id: "cus_acme") { id } }');
    expect(read.status).toBe(200);
    expect(read.body.data).toEqual({ customer: null });
    const [error] = read.body.errors ?? [];
    expect(error?.extensions).toEqual({
      code: 'UPSTREAM_UNAVAILABLE',
      reason: 'credential_refused',
      retryable: true,
      requestId: expect.any(String),
    });
    expect(error?.message).toBe(
      "The upstream API refused this service's own credential: nothing was done. Retry shortly; the service works again once its operators replace the credential.",
    );
    expect(JSON.stringify(read.body)).not.toContain(current);
    // One call, refused: a 401 is not retried.
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });

    // A write refused so did nothing; its key sends it again later, and it is done once.
    const idempotencyKey = randomUUID();
    const input = { accountId: 'acc_globex_eth', amount: '10.00', currency: 'USDC', idempotencyKey };
    const balanceBefore = await balanceAtTheEmulator(stack);
    const refusedWrite = await stack.query(TOP_UP, { input });
    expect(refusedWrite.body.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      reason: 'credential_refused',
      retryable: true,
      idempotencyKey,
    });
    expect(await balanceAtTheEmulator(stack)).toBeCloseTo(balanceBefore, 6);

    await installSuccessor();
    let answered: Awaited<ReturnType<Stack['query']>> | undefined;
    await waitFor(
      () => answered?.body.errors === undefined,
      'the write answered with the new key',
      undefined,
      async () => {
        answered = await stack.query(TOP_UP, { input });
      },
    );
    // Sent again until the new key was taken: done once, whatever the number of tries.
    expect(answered?.body.data).toMatchObject({ sandboxTopUp: { idempotencyKey } });
    expect(await balanceAtTheEmulator(stack)).toBeCloseTo(balanceBefore + 10, 6);
  });
});

describe('a facade started with a key the upstream refuses', () => {
  const stack = useStack({ env: { UPSTREAM_API_KEY: 'sk_sandbox_revoked' } });

  test('asks a live connection with a valid token to come back (1013), never calls it unauthorised', async () => {
    const client = stack.connect({ Authorization: (await bearer('acme')).authorization });
    const closed = await client.closed;
    expect(closed).toEqual({ code: 1013, reason: 'Try again later; retry after 5 s' });
    expect(stack.logs().join('\n')).not.toContain('sk_sandbox_revoked');
  });

  test('a caller’s own key the upstream refuses is still that caller’s UNAUTHENTICATED', async () => {
    const result = await stack.queryWithKey('sk_unknown_caller', '{ customer(id: "cus_acme") { id } }');
    expect(result.status).toBe(401);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});
