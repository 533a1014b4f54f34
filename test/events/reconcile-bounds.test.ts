/**
 * The reconciler's work per run is bounded: a real reconciler against the emulator (counting its
 * reads) reads at most `maxCustomersPerRun` watched customers a run; the others keep their own
 * window and are read first the next run, so every watched customer is read in turn.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createMemoryEventDeduplicator } from '../../src/events/dedup/memory-event-dedup.ts';
import { createMemoryEventLog } from '../../src/events/log/memory-event-log.ts';
import { createMemoryReconcileState } from '../../src/events/reconcile/reconcile-state.ts';
import { createReconciler } from '../../src/events/reconcile/reconciler.ts';
import { createLogger } from '../../src/logger.ts';
import { createUpstreamClient, type UpstreamClient } from '../../src/upstream/client.ts';
import { createKeyEnvironments, probeKey } from '../../src/upstream/key-environments.ts';
import { SANDBOX_KEY, startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';

const CUSTOMER_ROUTE = 'GET /v3/customers/{customerId}';

let emulator: RunningEmulator;
let client: UpstreamClient;

beforeAll(async () => {
  emulator = await startEmulator();
  client = createUpstreamClient({
    baseUrl: emulator.url,
    apiKey: SANDBOX_KEY,
    connectTimeoutMs: 1_000,
    headersTimeoutMs: 2_000,
    bodyTimeoutMs: 2_000,
    connections: 2,
    maxCallsPerOperation: 1_000,
    retry: { maxAttempts: 1, budget: 0, baseDelayMs: 1, maxDelayMs: 1 },
    problemDocsUrl: 'https://docs.platform.test/v3',
    logger: createLogger({ level: 'silent' }),
  });
});

afterAll(async () => {
  await client.close();
  await emulator.close();
});

describe('a run of the reconciler', () => {
  test('reads at most its bound of watched customers; the rest are behind, read first next run', async () => {
    const logger = createLogger({ level: 'silent' });
    const state = createMemoryReconcileState();
    let clock = Date.now();
    const reconciler = createReconciler({
      log: createMemoryEventLog({ logger }),
      dedup: createMemoryEventDeduplicator(),
      state,
      upstreamClient: client,
      apiKey: SANDBOX_KEY,
      keyEnvironments: createKeyEnvironments(client, { probe: () => probeKey(client, SANDBOX_KEY) }),
      intervalSeconds: 60,
      graceSeconds: 0,
      logger,
      maxCustomersPerRun: 2,
      now: () => clock,
    });
    for (const customerId of ['cus_acme', 'cus_globex', 'cus_ada']) state.watch('sandbox', customerId);
    await emulator.resetUpstreamCalls();

    expect(await reconciler.runOnce()).toBe(0);
    expect((await emulator.upstreamCalls()).byRoute[CUSTOMER_ROUTE]).toBe(2);
    const behind = await state.behind('sandbox');
    expect(behind.size).toBe(1);
    const [waiting] = [...behind.keys()];

    clock += 60_000;
    await emulator.resetUpstreamCalls();
    expect(await reconciler.runOnce()).toBe(0);
    expect((await emulator.upstreamCalls()).byRoute[CUSTOMER_ROUTE]).toBe(2);
    // The one left behind was read this time (first), and is no longer behind.
    expect((await state.behind('sandbox')).has(waiting!)).toBe(false);
    await reconciler.stop();
  });
});
