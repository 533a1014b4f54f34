import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';

const stack = useStack({ env: { QUERY_MAX_DEPTH: '4' } });

describe('query limits over graphql-ws', () => {
  test('a subscription nested deeper than the limit is refused before it starts, with no upstream call', async () => {
    const before = await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json();
    const live = stack.connect();
    const received = live.subscribe(
      `subscription {
        accountChanged(customerId: "cus_acme") {
          account { customer { accounts { nodes { customer { accounts { nodes { id } } } } } } }
        }
      }`,
    );
    await received.done;
    expect(received.data).toEqual([]);
    // graphql-ws hands the client the whole list of validation errors at once.
    expect(received.errors.flat()).toEqual([
      expect.objectContaining({
        message: 'The operation is nested 7 fields deep; the maximum is 4.',
        extensions: expect.objectContaining({ code: 'GRAPHQL_VALIDATION_FAILED', depth: 7, maxDepth: 4 }),
      }),
    ]);
    const after = await (await fetch(`${stack.emulator.url}/_emulator/requests`)).json();
    // The connection's key check happened before; the refused subscription itself made no call.
    expect(after.total - before.total).toBeLessThanOrEqual(1);
  });

  test('a subscription within the limit still starts', async () => {
    const live = stack.connect();
    const received = live.subscribe(
      `subscription { accountChanged(customerId: "cus_acme") { account { id } } }`,
    );
    await stack.subscriptionsStarted(1);
    expect(received.errors).toEqual([]);
    received.stop();
  });
});
