/**
 * Callers through both gateways: each forwards the client's `Authorization` to the facade, which
 * applies the same rules to `_entities` as to its own fields. A scoped caller reaches its own
 * customer's entities and nothing of another's; without a token the facade refuses outright.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { bearer } from '../support/tokens.ts';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGateway, startApolloGateway, startHiveGateway } from '../support/harness/gateways.ts';

const NOTES_OF = `query ($customerId: ID!) {
  supportNotes(customerId: $customerId) { id customer { id displayName } }
}`;

describe.each([
  [
    'Apollo Gateway',
    (federation: FederationStack) => startApolloGateway(federation.apolloGatewaySupergraphSdl),
  ],
  ['Hive Gateway', (federation: FederationStack) => startHiveGateway(federation.supergraphSdl)],
])('a scoped caller through %s', (_name, startGateway) => {
  let federation: FederationStack;
  let gateway: RunningGateway;

  beforeAll(async () => {
    federation = await startFederationStack();
    gateway = await startGateway(federation);
  });
  afterAll(async () => {
    await gateway?.close();
    await federation?.close();
  });
  beforeEach(async () => {
    await federation.stack.resetUpstreamCalls();
  });

  test('resolves the entities of its own customer', async () => {
    const { body } = await postGraphQL(
      gateway.url,
      NOTES_OF,
      { customerId: 'cus_acme' },
      await bearer('acme'),
    );

    expect(body.errors).toBeUndefined();
    const notes = (body.data as { supportNotes: { customer: { displayName: string } }[] }).supportNotes;
    expect(notes.length).toBeGreaterThan(0);
    expect(new Set(notes.map((note) => note.customer.displayName))).toEqual(new Set(['Acme Robotics Ltd']));
    expect((await federation.stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });
  });

  test('gets NOT_FOUND for the entities of another customer, and the facade makes no upstream call', async () => {
    const { body } = await postGraphQL(
      gateway.url,
      NOTES_OF,
      { customerId: 'cus_globex' },
      await bearer('acme'),
    );

    expect(body.errors?.map((error) => error.extensions?.code)).toContain('NOT_FOUND');
    expect(JSON.stringify(body.data ?? null)).not.toContain('Globex');
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });

  test('the operator reaches every customer’s entities', async () => {
    const { body } = await postGraphQL(
      gateway.url,
      NOTES_OF,
      { customerId: 'cus_globex' },
      await bearer('operator'),
    );

    expect(body.errors).toBeUndefined();
    expect(JSON.stringify(body.data)).toContain('Globex Trading LLC');
  });

  test('without a token, the facade’s part of the answer is refused', async () => {
    const { body } = await postGraphQL(
      gateway.url,
      NOTES_OF,
      { customerId: 'cus_acme' },
      { authorization: '' },
    );

    expect(JSON.stringify(body)).toMatch(/UNAUTHENTICATED|401/);
    expect(JSON.stringify(body.data ?? null)).not.toContain('Acme');
    expect((await federation.stack.upstreamCalls()).total).toBe(0);
  });
});
