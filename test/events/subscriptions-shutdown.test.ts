/**
 * `npm start` as a real process: the embedded emulator, webhooks registered at start, a live
 * subscription, then SIGTERM: the subscription completes and the process exits 0.
 */
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { useNpmStart } from '../support/npm-start.ts';
import { SANDBOX_KEY } from '../support/harness/emulator.ts';
import { connectLive } from '../support/harness/live-client.ts';
import { waitFor } from '../support/harness/wait.ts';

const processes = useNpmStart();

describe('shutdown', () => {
  test('on SIGTERM the running subscriptions complete and the process exits 0', async () => {
    const { child, lines, logged, stderr, graphqlUrl, emulatorUrl, token } = await processes.start({});
    expect(logged('registered a webhook endpoint with the upstream')).toHaveLength(1);

    const client = connectLive(graphqlUrl.replace(/^http/, 'ws'), { Authorization: `Bearer ${token}` });
    processes.keep(client);
    const received = client.subscribe(`subscription {
      accountChanged(customerId: "cus_ada", accountId: "acc_ada_sol") { type account { balances { available pending } } }
    }`);
    // A child process: only its output tells when the subscription listens (no lifecycle hook here).
    await waitFor(() => logged('subscription started').length === 1, 'the subscription to start');

    const topUp = await fetch(`${emulatorUrl}/v3/sandbox/accounts/acc_ada_sol/topup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': SANDBOX_KEY },
      body: JSON.stringify({ amount: '4.75', currency: 'USDC' }),
    });
    expect(topUp.status).toBe(200);
    await waitFor(() => received.data.length === 1, 'the top-up event');
    expect(received.data[0].accountChanged).toEqual({
      type: 'account.updated',
      account: { balances: [{ available: '850.00', pending: '10.00' }] },
    });

    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    await received.done;
    expect(received.completed).toBe(true);
    expect(received.errors).toEqual([]);
    expect(code).toBe(0);
    expect(logged('subscription completed')).toHaveLength(1);
    const everything = [...lines.map((entry) => JSON.stringify(entry)), stderr()].join('\n');
    expect(everything).not.toContain('whsec_');
    expect(everything).not.toContain(SANDBOX_KEY);
    expect(everything).not.toContain(token);
  });
});
