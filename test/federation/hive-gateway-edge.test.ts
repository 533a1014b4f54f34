/**
 * compose's Hive Gateway configuration (deploy/gateway.config.ts) live at the edge, as the compose
 * twin runs it: real tokens of the run's OpenID provider, the supergraph's `@authenticated`,
 * `@requiresScopes`, `@cost` and `@listSize`, and the facade behind it. What the gateway refuses
 * never reaches the facade: the facade's own operation count stays at zero for it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { DEFAULT_MAX_COST } from '../../deploy/gateway.config.ts';
import { type FederationStack, postGraphQL, startFederationStack } from '../support/harness/federation.ts';
import { type RunningGateway, startEdgeHiveGateway } from '../support/harness/gateways.ts';
import { watchLifecycle, type LifecycleWatch } from '../support/harness/lifecycle-watch.ts';
import { bearer, issuerEnv, issuerSignedToken } from '../support/tokens.ts';

let federation: FederationStack;
let gateway: RunningGateway;

beforeAll(async () => {
  federation = await startFederationStack();
  const { AUTH_ISSUER, AUTH_AUDIENCE } = issuerEnv();
  gateway = await startEdgeHiveGateway(federation.supergraphSdl, {
    issuer: AUTH_ISSUER,
    audience: AUTH_AUDIENCE,
  });
});
afterAll(async () => {
  await gateway?.close();
  await federation?.close();
});
beforeEach(async () => {
  await federation.stack.resetUpstreamCalls();
});

/**
 * Full pages of every customer's accounts with their balances: `@listSize(slicingArguments:
 * ["first"])` makes each page count 100 times, `balances` `@listSize(assumedSize: 5)` five.
 */
const COSTLY =
  '{ customers(first: 100) { edges { node { id accounts(first: 100) { edges { node { id balances { available } } } } } } } }';

let facadeOperations: LifecycleWatch;
beforeEach(() => {
  facadeOperations?.close();
  facadeOperations = watchLifecycle(federation.stack.app.lifecycle);
});

describe('Hive Gateway with deploy/gateway.config.ts', () => {
  test('answers an operator, and a scoped caller within its scopes, across both subgraphs', async () => {
    const query = '{ customer(id: "cus_acme") { displayName openSupportNoteCount } }';
    for (const caller of ['operator', 'acme'] as const) {
      const { status, body } = await postGraphQL(gateway.url, query, undefined, await bearer(caller));
      expect({ status, body }).toEqual({
        status: 200,
        body: { data: { customer: { displayName: 'Acme Robotics Ltd', openSupportNoteCount: 2 } } },
      });
    }
    expect(facadeOperations.count('operationStarted')).toBeGreaterThanOrEqual(2);
  });

  test('refuses a request without a token at the gateway', async () => {
    const { status, body } = await postGraphQL(
      gateway.url,
      '{ customer(id: "cus_acme") { displayName } }',
      undefined,
      {
        authorization: '',
      },
    );
    expect(status).toBe(401);
    expect(body).toEqual({ errors: [{ message: 'Unauthenticated' }] });
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test.each([
    ['another audience', { aud: 'another-api' }],
    ['another issuer', { iss: 'https://issuer.invalid' }],
    ['an expired token', { exp: Math.floor(Date.now() / 1000) - 60 }],
    ['a key id the issuer never published', {}, 'not-a-key-of-the-issuer'],
  ])('refuses %s at the gateway', async (_name, claims, kid?: string) => {
    const { status } = await postGraphQL(
      gateway.url,
      '{ customer(id: "cus_acme") { displayName } }',
      undefined,
      {
        authorization: `Bearer ${await issuerSignedToken(claims, kid === undefined ? {} : { kid })}`,
      },
    );
    expect(status).toBe(401);
    expect(facadeOperations.count('operationStarted')).toBe(0);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test('refuses an operator-only field to a token without the operator scope, before the facade', async () => {
    const { status, body } = await postGraphQL(
      gateway.url,
      '{ customer(id: "cus_acme") { displayName } webhookEndpoints { edges { node { id } } } }',
      undefined,
      await bearer('acme'),
    );
    expect(status).toBe(401);
    expect(body).toEqual({
      data: null,
      errors: [
        {
          message: 'Unauthorized field or type',
          locations: [{ line: 1, column: 44 }],
          path: ['webhookEndpoints'],
          extensions: { code: 'UNAUTHORIZED_FIELD_OR_TYPE' },
        },
      ],
    });
    expect(facadeOperations.count('operationStarted')).toBe(0);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });

  test('lets the operator scope reach the operator-only field', async () => {
    const { status, body } = await postGraphQL(
      gateway.url,
      '{ webhookEndpoints { edges { node { id } } } }',
      undefined,
      await bearer('operator'),
    );
    expect(status).toBe(200);
    expect(body.errors).toBeUndefined();
    expect(body.data).toHaveProperty('webhookEndpoints.edges');
  });

  test(`refuses an operation estimated above ${DEFAULT_MAX_COST}, before the facade`, async () => {
    const { status, body } = await postGraphQL(gateway.url, COSTLY, undefined, await bearer('operator'));
    expect(status).toBe(200);
    expect(body.data).toBeNull();
    expect(body.errors).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/^Operation estimated cost \d+ exceeded configured maximum 1000$/),
        extensions: {
          code: 'COST_ESTIMATED_TOO_EXPENSIVE',
          cost: { estimated: expect.any(Number), max: 1000 },
        },
      }),
    ]);
    expect((body.errors![0]!.extensions!.cost as { estimated: number }).estimated).toBeGreaterThan(
      DEFAULT_MAX_COST,
    );
    expect(facadeOperations.count('operationStarted')).toBe(0);
    expect(await federation.stack.upstreamCalls()).toMatchObject({ total: 0 });
  });
});
