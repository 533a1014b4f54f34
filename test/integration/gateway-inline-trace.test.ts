/**
 * Federated inline traces (`ftv1`) for a trusted gateway only: with 200 ms held back on the
 * upstream's capabilities route (the emulator's `delay` fault rule), a gateway-role token that asks
 * gets a trace, decoded with Apollo's own protobuf type, whose `capabilities` node lasts at least
 * that long; a customer's or an operator's own `apollo-federation-include-trace` header gets none.
 */
import { Trace } from '@apollo/usage-reporting-protobuf';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { bearer, type TestCallerName } from '../support/tokens.ts';

const DELAY_MS = 200;
/**
 * The capabilities are read below a list, not looked ahead beside a read by id (src/graph/look-ahead.ts
 * would start them with the customer and give part of the wait to the parent's node): the field's
 * resolver starts the REST call, so its node holds the whole delay.
 */
const QUERY = '{ customers { nodes { id capabilities { nodes { id } } } } }';
const ASK_FOR_TRACE = { 'apollo-federation-include-trace': 'ftv1' };

let emulator: RunningEmulator;
let facade: RunningFacade;

beforeAll(async () => {
  emulator = await startEmulator();
  facade = await startFacade(emulator.url);
  await emulator.setFaults({ rules: [{ route: 'listCapabilities', kind: 'delay', delayMs: DELAY_MS }] });
});

afterAll(async () => {
  await facade?.close();
  await emulator?.close();
});

beforeEach(async () => {
  await emulator.resetUpstreamCalls();
});

async function queryAs(caller: TestCallerName, headers: Record<string, string>) {
  const answer = await facade.query<{ customers: { nodes: { id: string }[] } }>(QUERY, undefined, {
    ...(await bearer(caller)),
    ...headers,
  });
  const { extensions } = answer.body as { extensions?: Record<string, unknown> };
  return { ...answer, extensions };
}

/** Every node of a trace's tree, depth first. */
function nodesOf(node: Trace.INode | null | undefined): Trace.INode[] {
  if (node == null) return [];
  return [node, ...(node.child ?? []).flatMap((child) => nodesOf(child))];
}

describe('inline traces (ftv1)', () => {
  test('a gateway-role token that asks gets a trace whose capabilities node lasts the injected delay', async () => {
    const answer = await queryAs('gateway', ASK_FOR_TRACE);

    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    expect(answer.body.data?.customers.nodes.map((node) => node.id)).toEqual(['cus_acme']);
    const ftv1 = answer.extensions?.['ftv1'];
    expect(typeof ftv1).toBe('string');
    const trace = Trace.decode(Buffer.from(ftv1 as string, 'base64'));
    const nodes = nodesOf(trace.root);
    const customers = nodes.find((node) => node.responseName === 'customers');
    const capabilities = nodes.find((node) => node.responseName === 'capabilities');
    expect(customers).toBeDefined();
    expect(capabilities).toBeDefined();
    // Nanoseconds from the trace's start: the field waited for the delayed REST call.
    const lasted = Number(capabilities?.endTime) - Number(capabilities?.startTime);
    expect(lasted).toBeGreaterThanOrEqual(DELAY_MS * 1_000_000);
    expect(Number(trace.durationNs)).toBeGreaterThanOrEqual(lasted);
    const calls = await emulator.upstreamCalls();
    expect(calls.byRoute['GET /v3/customers/{customerId}/capabilities']).toBe(1);
  });

  test.each<[TestCallerName, string]>([
    ['acme', 'a customer'],
    ['operator', 'an operator'],
  ])('%s (%s) asking with the header gets no trace', async (caller) => {
    const answer = await queryAs(caller, ASK_FOR_TRACE);
    expect(answer.status).toBe(200);
    expect(answer.body.errors).toBeUndefined();
    expect(answer.body.data?.customers.nodes.map((node) => node.id)).toContain('cus_acme');
    expect(answer.extensions?.['ftv1']).toBeUndefined();
  });

  test('a gateway that does not ask gets no trace', async () => {
    const answer = await queryAs('gateway', {});
    expect(answer.status).toBe(200);
    expect(answer.extensions?.['ftv1']).toBeUndefined();
  });

  test('an anonymous request with the header gets no trace', async () => {
    const answer = await fetch(facade.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...ASK_FOR_TRACE },
      body: JSON.stringify({ query: '{ _service { sdl } }' }),
    });
    const body = (await answer.json()) as { extensions?: Record<string, unknown> };
    expect(body.extensions?.['ftv1']).toBeUndefined();
  });
});
