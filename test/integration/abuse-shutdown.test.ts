/**
 * SIGTERM with work in flight, as a real process: an operation that outlives the drain window gets
 * a GraphQL answer (SHUTTING_DOWN, retryable, with the mutation's key) instead of a reset, and a
 * graphql-ws connection is closed with 1001 once its subscription completed.
 */
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { connectLive } from '../support/harness/live-client.ts';
import { waitFor } from '../support/harness/wait.ts';
import { useNpmStart } from '../support/npm-start.ts';

const processes = useNpmStart();

describe('shutdown without resets', () => {
  test('on SIGTERM a long query and a mutation answer SHUTTING_DOWN after the drain window; graphql-ws closes with 1001', async () => {
    const started = await processes.start({ SHUTDOWN_DRAIN_MS: '1000' });
    const { child, logged, graphqlUrl, emulatorUrl, token } = started;
    const live = connectLive(graphqlUrl.replace(/^http/, 'ws'), { Authorization: `Bearer ${token}` });
    processes.keep(live);
    const subscription = live.subscribe('subscription { accountChanged(customerId: "cus_ada") { type } }');
    // A child process: only its output tells when the subscription listens (no lifecycle hook here).
    await waitFor(() => logged('subscription started').length === 1, 'the subscription to start');

    // Both upstream calls stall: only the shutdown can end them.
    await fetch(`${emulatorUrl}/_emulator/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        rules: [
          { route: 'getAccount', kind: 'stall' },
          { route: 'sandboxTopUp', kind: 'stall' },
        ],
      }),
    });
    const post = (query: string) =>
      fetch(graphqlUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json',
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify({ query }),
      }).then(async (response) => ({
        status: response.status,
        body: (await response.json()) as { data?: unknown; errors?: Record<string, unknown>[] },
      }));
    const query = post(`{
        customer(id: "cus_ada") { id }
        account(customerId: "cus_ada", id: "acc_ada_sol") { id }
      }`);
    const mutation = post(`mutation {
        sandboxTopUp(input: { accountId: "acc_ada_sol", amount: "1.00", currency: "USDC", idempotencyKey: "shutdown-1" }) {
          replayed
        }
      }`);
    // SIGTERM only once the customer was read and both stalled calls have reached the upstream.
    let stalled = 0;
    let customerRead = false;
    await waitFor(
      () => stalled === 2 && customerRead,
      'the customer read and both stalled calls to reach the upstream',
      undefined,
      async () => {
        const log = (await (await fetch(`${emulatorUrl}/_emulator/requests`)).json()) as {
          requests: { route: string; status: number | null }[];
        };
        stalled = log.requests.filter((request) => request.status === null).length;
        customerRead = log.requests.some(
          (request) => request.route === 'GET /v3/customers/{customerId}' && request.status === 200,
        );
      },
    );

    child.kill('SIGTERM');

    const [queryAnswer, mutationAnswer] = await Promise.all([query, mutation]);
    expect(queryAnswer.status).toBe(200);
    expect(queryAnswer.body).toEqual({
      data: { customer: { id: 'cus_ada' }, account: null },
      errors: [
        expect.objectContaining({
          message: 'The facade is shutting down; send the request again.',
          path: ['account'],
          extensions: { code: 'SHUTTING_DOWN', retryable: true, requestId: expect.any(String) },
        }),
      ],
    });
    expect(mutationAnswer.body.errors).toEqual([
      expect.objectContaining({
        path: ['sandboxTopUp'],
        extensions: expect.objectContaining({
          code: 'SHUTTING_DOWN',
          retryable: true,
          idempotencyKey: 'shutdown-1',
        }),
      }),
    ]);

    await subscription.done;
    expect(subscription.completed).toBe(true);
    expect(await live.closed).toEqual({ code: 1001, reason: 'Server shutting down' });
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });
});
