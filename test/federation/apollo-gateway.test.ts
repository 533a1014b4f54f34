import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { composeSupergraph } from '../../scripts/compose-supergraph.ts';
import { tokenFor } from '../support/tokens.ts';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGateway, startApolloGateway } from '../support/harness/gateways.ts';

const ACCOUNT_READ = 'GET /v3/customers/{customerId}/accounts/{accountId}';
const CUSTOMER_READ = 'GET /v3/customers/{customerId}';

describe('the supergraph under Apollo Gateway', () => {
  let federation: FederationStack;
  let gateway: RunningGateway;

  beforeAll(async () => {
    federation = await startFederationStack();
    gateway = await startApolloGateway(federation.apolloGatewaySupergraphSdl);
  });
  afterAll(async () => {
    await gateway?.close();
    await federation?.close();
  });
  beforeEach(async () => {
    await federation.stack.resetUpstreamCalls();
  });

  const query = (document: string, variables?: Record<string, unknown>, headers?: Record<string, string>) =>
    postGraphQL(gateway.url, document, variables, headers);

  test('extends a facade Customer with the support-notes fields, reading the customer once', async () => {
    const { status, body } = await query(`{
      customer(id: "cus_acme") {
        id
        displayName
        openSupportNoteCount
        supportNotes { id status subject }
      }
    }`);
    expect(status).toBe(200);
    expect(body).toEqual({
      data: {
        customer: {
          id: 'cus_acme',
          displayName: 'Acme Robotics Ltd',
          openSupportNoteCount: 2,
          supportNotes: [
            { id: 'note_003', status: 'OPEN', subject: 'Pending balance on Polygon wallet' },
            { id: 'note_002', status: 'OPEN', subject: 'Developer fee question' },
            { id: 'note_001', status: 'RESOLVED', subject: 'Sweep rule set up' },
            { id: 'note_004', status: 'RESOLVED', subject: 'Onboarding call' },
          ],
        },
      },
    });
    expect(await federation.stack.upstreamCalls()).toEqual({ total: 1, byRoute: { [CUSTOMER_READ]: 1 } });
  });

  test('resolves the notes’ facade Accounts with balances and fees: one read per distinct account', async () => {
    const { status, body } = await query(`{
      supportNotes {
        id
        account {
          id
          customerId
          label
          balances { currency available }
          fees { breakdown { developer { fixed bips } } }
        }
        customer { id displayName }
      }
    }`);
    expect(status).toBe(200);
    expect(body.errors).toBeUndefined();
    const notes = body.data?.supportNotes as {
      id: string;
      account: Record<string, unknown> | null;
      customer: { id: string; displayName: string };
    }[];

    const ethereum = {
      id: 'acc_acme_eth',
      customerId: 'cus_acme',
      label: 'Acme treasury (Ethereum)',
      balances: [{ currency: 'USDC', available: '12500.00' }],
      fees: { breakdown: { developer: { fixed: '0.50', bips: 25 } } },
    };
    const solana = {
      id: 'acc_ada_sol',
      customerId: 'cus_ada',
      label: 'Everyday (Solana)',
      balances: [{ currency: 'USDC', available: '845.25' }],
      fees: { breakdown: { developer: null } },
    };
    const polygon = {
      id: 'acc_acme_polygon',
      customerId: 'cus_acme',
      label: 'Acme collections (Polygon)',
      balances: [{ currency: 'USDC', available: '0.00' }],
      fees: { breakdown: { developer: null } },
    };
    const acme = { id: 'cus_acme', displayName: 'Acme Robotics Ltd' };
    const ada = { id: 'cus_ada', displayName: 'Ada Lovelace' };
    const globex = { id: 'cus_globex', displayName: 'Globex Trading LLC' };
    expect(notes).toEqual([
      { id: 'note_005', account: solana, customer: ada },
      { id: 'note_003', account: polygon, customer: acme },
      { id: 'note_002', account: ethereum, customer: acme },
      { id: 'note_007', account: null, customer: globex },
      { id: 'note_001', account: ethereum, customer: acme },
      { id: 'note_006', account: solana, customer: ada },
      { id: 'note_004', account: null, customer: acme },
    ]);

    // 5 notes point at 3 distinct accounts; 7 notes at 3 distinct customers. Fees come with the
    // account record, so the fees endpoint is never called.
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 6,
      byRoute: { [ACCOUNT_READ]: 3, [CUSTOMER_READ]: 3 },
    });
  });

  test('crosses back and forth in one query, one read per resource per facade call of the plan', async () => {
    const { body } = await query(`{
      customer(id: "cus_ada") {
        supportNotes(status: OPEN) {
          id
          account { id isDefault customer { id openSupportNoteCount } }
        }
      }
    }`);
    expect(body).toEqual({
      data: {
        customer: {
          supportNotes: [
            {
              id: 'note_005',
              account: {
                id: 'acc_ada_sol',
                isDefault: expect.any(Boolean),
                customer: { id: 'cus_ada', openSupportNoteCount: 1 },
              },
            },
          ],
        },
      },
    });
    // The gateway's plan calls the facade twice (the root customer, then the note's account with
    // its customer). Loaders live for one subgraph request, so each call reads the customer once.
    expect(await federation.stack.upstreamCalls()).toEqual({
      total: 3,
      byRoute: { [CUSTOMER_READ]: 2, [ACCOUNT_READ]: 1 },
    });
  });

  test('keeps extensions.code and extensions.problem of a facade error, with the caller’s request id', async () => {
    const { status, body } = await query(
      '{ customer(id: "cus_does_not_exist") { id displayName openSupportNoteCount } }',
      undefined,
      { 'x-request-id': 'federation-test-not-found' },
    );
    expect(status).toBe(200);
    expect(body.data).toEqual({ customer: null });
    expect(body.errors).toEqual([
      {
        message: 'No customer with id cus_does_not_exist exists.',
        path: ['customer'],
        extensions: {
          code: 'NOT_FOUND',
          problem: {
            type: 'https://docs.platform.test/v3/errors/not-found',
            title: 'Not Found',
            status: 404,
            code: 'not_found',
            detail: 'No customer with id cus_does_not_exist exists.',
            correlationId: 'federation-test-not-found',
          },
          // Apollo Gateway adds the name of the subgraph the error came from.
          serviceName: 'platform',
        },
      },
    ]);
  });

  test('keeps a facade error raised inside an entity fetch, while the other notes resolve', async () => {
    // A retryable upstream failure for exactly one account read; the facade retries reads, so
    // make every attempt at that route fail until it gives up.
    await federation.stack.setFaults({
      rules: [{ route: ACCOUNT_READ, kind: 'internal_error', rate: 1 }],
    });
    try {
      const { status, body } = await query(`{
        supportNotes(customerId: "cus_acme") { id account { id label } customer { id displayName } }
      }`);
      expect(status).toBe(200);
      const notes = body.data?.supportNotes as { id: string; account: unknown; customer: unknown }[];
      expect(notes.map((note) => note.id)).toEqual(['note_003', 'note_002', 'note_001', 'note_004']);
      expect(notes.map((note) => note.account)).toEqual([null, null, null, null]);
      expect(notes[0]!.customer).toEqual({ id: 'cus_acme', displayName: 'Acme Robotics Ltd' });
      // Each failed entity's error is moved by the gateway from `_entities.N` to the client's path.
      expect(body.errors?.map((error) => error.path)).toEqual([
        ['supportNotes', 0, 'account'],
        ['supportNotes', 1, 'account'],
        ['supportNotes', 2, 'account'],
      ]);
      for (const error of body.errors ?? []) {
        expect(error.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
        expect(error.extensions?.problem).toMatchObject({
          status: 500,
          code: 'internal_error',
          retryable: true,
        });
        expect(error.extensions?.serviceName).toBe('platform');
      }
    } finally {
      await federation.stack.clearFaults();
    }
  });

  test('the running subgraphs’ own _service SDL, read without a token, composes to the supergraph composed from source', async () => {
    // A gateway or rover composing the supergraph reads `_service` anonymously (docs/federation.md).
    const sdlOf = async (url: string) =>
      (
        (await postGraphQL(url, '{ _service { sdl } }', undefined, { authorization: '' })).body.data
          ?._service as { sdl: string }
      ).sdl;
    const live = composeSupergraph([
      {
        name: 'platform',
        url: federation.stack.graphqlUrl,
        typeDefs: await sdlOf(federation.stack.graphqlUrl),
      },
      {
        name: 'support-notes',
        url: federation.supportNotesUrl,
        typeDefs: await sdlOf(federation.supportNotesUrl),
      },
    ]);
    expect(live.supergraphSdl).toBe(federation.supergraphSdl);
  });

  test('cannot carry subscriptions, which clients take from the facade’s graphql-ws endpoint directly', async () => {
    const subscription = `subscription {
      accountChanged(customerId: "cus_ada", since: "2000-01-01T00:00:00Z") { replayed accountId account { id label } }
    }`;
    const refused = await query(subscription);
    expect(refused.status).toBe(500);
    expect(refused.body.errors?.[0]?.message).toBe('Execution of subscriptions not supported by gateway');

    // The same operation on the facade's own endpoint: replays Ada's three accounts, then stays live.
    const client = createClient({
      url: federation.stack.graphqlUrl.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { Authorization: `Bearer ${await tokenFor('operator')}` },
    });
    const events: unknown[] = [];
    try {
      for await (const event of client.iterate({ query: subscription })) {
        events.push(event);
        if (events.length === 3) break;
      }
    } finally {
      await client.dispose();
    }
    expect(events).toEqual([
      {
        data: {
          accountChanged: {
            replayed: true,
            accountId: 'acc_ada_sol',
            account: { id: 'acc_ada_sol', label: 'Everyday (Solana)' },
          },
        },
      },
      {
        data: {
          accountChanged: {
            replayed: true,
            accountId: 'acc_ada_polygon',
            account: { id: 'acc_ada_polygon', label: 'Savings (Polygon)' },
          },
        },
      },
      {
        data: {
          accountChanged: {
            replayed: true,
            accountId: 'acc_ada_external',
            account: { id: 'acc_ada_external', label: 'Hardware wallet' },
          },
        },
      },
    ]);
  });
});
