/**
 * Who may ask what, tried as an attacker would: no token, forged and expired tokens, a caller scoped
 * to one customer reaching for another by every path, and operator-only changes. Real tokens from
 * the run's OpenID provider, real HTTP, and the emulator's request counter proving that a refused
 * request never reaches the upstream.
 */
import { importJWK, SignJWT, type JWTPayload } from 'jose';
import { describe, expect, inject, test } from 'vitest';
import { keyConfusionToken, signToken, unsignedToken, createTestKey } from '../support/issuer.ts';
import type { GraphQLResult } from '../support/harness/facade.ts';
import { useStack } from '../support/harness/stack.ts';
import { LEAKED_DEMO_SIGNING_KEY_ID, offlineSigningKey } from '../support/leaked-demo-key.ts';
import { issuerKeyId, issuerSignedToken, tokenClaims } from '../support/tokens.ts';

const stack = useStack();

const issuerSigned = (claims: JWTPayload) => issuerSignedToken(claims);
const claims = (overrides: JWTPayload = {}) => tokenClaims(overrides);

async function asToken(token: string, document: string, variables?: Record<string, unknown>) {
  return stack.query(document, variables, { authorization: `Bearer ${token}` });
}

function codes(result: GraphQLResult): (string | undefined)[] {
  return (result.body.errors ?? []).map((error) => error.extensions?.code);
}

/** A token signed offline with a key the issuer never published (as the old demo key now is). */
async function signWithLeakedKey(payload: JWTPayload, kid: string): Promise<string> {
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid })
    .sign(await offlineSigningKey());
}

const CUSTOMER = 'query ($id: ID!) { customer(id: $id) { id displayName } }';

describe('a caller without a valid token', () => {
  test('is answered 401 with a Bearer challenge, and the upstream is never called', async () => {
    const anonymous = await stack.queryAnonymously(CUSTOMER, { id: 'cus_acme' });
    const topUp = await stack.queryAnonymously(
      'mutation { sandboxTopUp(input: { idempotencyKey: "callers-1", accountId: "acc_acme_eth", amount: "5.00", currency: "USDC" }) { replayed } }',
    );
    const archive = await stack.queryAnonymously(
      'mutation { archiveWebhookEndpoint(input: { idempotencyKey: "callers-2", webhookEndpointId: "we_any" }) { replayed } }',
    );

    for (const result of [anonymous, topUp, archive]) {
      expect(result.status).toBe(401);
      expect(result.headers.get('www-authenticate')).toBe('Bearer');
      expect(result.body).toEqual({
        errors: [
          {
            message: 'Authentication required: send a valid access token as "Authorization: Bearer <token>".',
            extensions: { code: 'UNAUTHENTICATED' },
          },
        ],
      });
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('gets no schema detail either: an invalid document is refused before validation speaks', async () => {
    const result = await stack.queryAnonymously('{ custmer(id: "cus_acme") { id } }');

    expect(result.status).toBe(401);
    expect(JSON.stringify(result.body)).not.toMatch(/Did you mean/);
  });

  test('a token in the URL is never read', async () => {
    const token = await issuerSigned({});
    const response = await fetch(
      `${stack.graphqlUrl}?query=${encodeURIComponent('{ apiStatus { reachable } }')}&access_token=${token}`,
      { headers: { 'apollo-require-preflight': 'true' } },
    );

    expect(response.status).toBe(401);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test.each([
    ['expired', async () => issuerSigned({ exp: Math.floor(Date.now() / 1000) - 60 })],
    ['not yet valid', async () => issuerSigned({ nbf: Math.floor(Date.now() / 1000) + 600 })],
    ['for another audience', async () => issuerSigned({ aud: 'another-api' })],
    ['from another issuer', async () => issuerSigned({ iss: 'https://evil.example' })],
    [
      'from the issuer with a trailing slash',
      async () => issuerSigned({ iss: `${inject('issuer').issuer}/` }),
    ],
    [
      'signed with an unknown key',
      async () => signToken(claims(), { key: await createTestKey('unknown-kid') }),
    ],
    [
      'signed with an unknown key under the issuer key id',
      async () => signToken(claims(), { key: await createTestKey('x'), kid: issuerKeyId() }),
    ],
    ['unsigned (alg none)', async () => unsignedToken(claims(), issuerKeyId())],
    [
      'HS256 with the public key as secret',
      async () => {
        const key = await createTestKey(issuerKeyId());
        key.publicKey = (await importJWK(
          {
            ...inject('issuer').signingKey,
            d: undefined,
            p: undefined,
            q: undefined,
            dp: undefined,
            dq: undefined,
            qi: undefined,
          },
          'RS256',
        )) as CryptoKey;
        return keyConfusionToken(claims(), key);
      },
    ],
    [
      'signed offline with a key the issuer never published, under the old demo key id (an operator token)',
      async () =>
        signWithLeakedKey(
          claims({ roles: ['operator'], customer_ids: undefined }),
          LEAKED_DEMO_SIGNING_KEY_ID,
        ),
    ],
    [
      'signed offline with a key the issuer never published, under the issuer key id',
      async () => signWithLeakedKey(claims({ roles: ['operator'] }), issuerKeyId()),
    ],
    ['without a subject', async () => issuerSigned({ sub: undefined })],
    [
      'tampered after signing',
      async () => {
        const [header, , signature] = (await issuerSigned({})).split('.');
        const payload = Buffer.from(JSON.stringify(claims({ roles: ['operator'] }))).toString('base64url');
        return `${header}.${payload}.${signature}`;
      },
    ],
  ])('a token %s is refused with 401 invalid_token, never echoed, no upstream call', async (_name, make) => {
    const token = await make();
    const result = await asToken(token, CUSTOMER, { id: 'cus_acme' });

    expect(result.status).toBe(401);
    expect(result.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    expect(codes(result)).toEqual(['UNAUTHENTICATED']);
    expect(JSON.stringify(result.body)).not.toContain(token.slice(0, 20));
    const logs = stack.logs().join('\n');
    expect(logs).not.toContain(token);
    for (const part of token.split('.').filter((segment) => segment.length >= 16)) {
      expect(logs).not.toContain(part.slice(0, 16));
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a platform key sent as X-API-Key is refused: the facade never lends its own key', async () => {
    const result = await stack.queryWithKey('sk_sandbox_emulator', CUSTOMER, { id: 'cus_acme' });

    expect(result.status).toBe(401);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('a caller scoped to one customer', () => {
  test('reads its own customer', async () => {
    const result = await stack.queryAs('acme', CUSTOMER, { id: 'cus_acme' });

    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } } });
  });

  test('gets NOT_FOUND for another customer exactly as for one that does not exist, with no upstream call', async () => {
    const unknown = await stack.queryAs('operator', CUSTOMER, { id: 'cus_nobody' });
    await stack.resetUpstreamCalls();
    const other = await stack.queryAs('acme', CUSTOMER, { id: 'cus_globex' });
    const otherUnknown = await stack.queryAs('acme', CUSTOMER, { id: 'cus_nobody' });

    expect((await stack.upstreamCalls()).total).toBe(0);
    const withoutCorrelation = (result: GraphQLResult) =>
      JSON.parse(
        JSON.stringify(result.body)
          .replaceAll(/"correlationId":"[^"]*"/g, '"correlationId":"-"')
          .replaceAll('cus_globex', 'cus_nobody'),
      ) as unknown;
    expect(withoutCorrelation(other)).toEqual(withoutCorrelation(unknown));
    expect(withoutCorrelation(otherUnknown)).toEqual(withoutCorrelation(unknown));
    expect(codes(other)).toEqual(['NOT_FOUND']);
  });

  test('cannot reach another customer through a record lookup, a list or a nested field', async () => {
    const result = await stack.queryAs(
      'acme',
      `{
        account(customerId: "cus_globex", id: "acc_globex_eth") { id }
        relatedParty(customerId: "cus_globex", id: "rp_any") { id }
      }`,
    );

    expect(result.body.data).toEqual({ account: null, relatedParty: null });
    expect(codes(result)).toEqual(['NOT_FOUND', 'NOT_FOUND']);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('cannot reach another customer through _entities', async () => {
    const result = await stack.queryAs(
      'acme',
      `query ($representations: [_Any!]!) { _entities(representations: $representations) {
        ... on Customer { id } ... on Account { id }
      } }`,
      {
        representations: [
          { __typename: 'Customer', id: 'cus_globex' },
          { __typename: 'Account', customerId: 'cus_globex', id: 'acc_globex_eth' },
          { __typename: 'Customer', id: 'cus_acme' },
        ],
      },
    );

    expect(result.body.data).toEqual({ _entities: [null, null, { id: 'cus_acme' }] });
    expect(codes(result)).toEqual(['NOT_FOUND', 'NOT_FOUND']);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });
  });

  test('lists only its own customers, without the platform-wide list', async () => {
    const result = await stack.queryAs(
      'acme',
      '{ customers(first: 10) { nodes { id } pageInfo { hasNextPage } } }',
    );

    expect(result.body).toEqual({
      data: { customers: { nodes: [{ id: 'cus_acme' }], pageInfo: { hasNextPage: false } } },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/customers/{customerId}': 1 });
  });

  test('a caller with no customer lists none, and the operator lists them all', async () => {
    const nobody = await stack.queryAs('nobody', '{ customers(first: 10) { nodes { id } } }');
    const operator = await stack.queryAs('operator', '{ customers(first: 10) { nodes { id } } }');

    expect(nobody.body).toEqual({ data: { customers: { nodes: [] } } });
    expect(
      (operator.body.data as { customers: { nodes: unknown[] } }).customers.nodes.length,
    ).toBeGreaterThan(1);
  });

  test.each([
    [
      'createCustomer',
      'mutation { createCustomer(input: { idempotencyKey: "callers-3", type: "individual", externalId: "x-1" }) { replayed } }',
    ],
    [
      'sandboxSetCapabilityStatus',
      'mutation { sandboxSetCapabilityStatus(input: { idempotencyKey: "callers-4", customerId: "cus_acme", capabilityId: "cap_acme_ach", status: "ready" }) { replayed } }',
    ],
    [
      'createWebhookEndpoint',
      'mutation { createWebhookEndpoint(input: { idempotencyKey: "callers-5", url: "https://evil.example/hook", events: ["account.updated"] }) { replayed } }',
    ],
    [
      'archiveWebhookEndpoint',
      'mutation { archiveWebhookEndpoint(input: { idempotencyKey: "callers-6", webhookEndpointId: "we_any" }) { replayed } }',
    ],
    ['webhookEndpoints', '{ webhookEndpoints { nodes { id } } }'],
  ])('is FORBIDDEN to run the operator-only %s, with no upstream call', async (_name, document) => {
    const result = await stack.queryAs('acme', document);

    expect(codes(result)).toEqual(['FORBIDDEN']);
    expect(result.body.errors?.[0]?.message).toBe('You are not allowed to do this.');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('tops up an account of its own customer, proven by reading it there first', async () => {
    const result = await stack.queryAs(
      'acme',
      'mutation { sandboxTopUp(input: { idempotencyKey: "callers-7", accountId: "acc_acme_eth", amount: "1.00", currency: "USDC" }) { replayed topUp { state } } }',
    );

    expect(result.body).toEqual({
      data: { sandboxTopUp: { replayed: false, topUp: { state: 'completed' } } },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
      'POST /v3/sandbox/accounts/{accountId}/topup': 1,
    });
  });

  test('cannot top up another customer’s account: NOT_FOUND, and no top-up is sent', async () => {
    const result = await stack.queryAs(
      'acme',
      'mutation { sandboxTopUp(input: { idempotencyKey: "callers-8", accountId: "acc_globex_eth", amount: "1.00", currency: "USDC" }) { replayed } }',
    );

    expect(codes(result)).toEqual(['NOT_FOUND']);
    expect(result.body.errors?.[0]?.message).toBe('No account with id acc_globex_eth exists.');
    expect((await stack.upstreamCalls()).byRoute).toEqual({
      'GET /v3/customers/{customerId}/accounts/{accountId}': 1,
    });
  });

  test('cannot change another customer through a mutation’s input', async () => {
    const result = await stack.queryAs(
      'acme',
      'mutation { archiveAccount(input: { idempotencyKey: "callers-9", customerId: "cus_globex", accountId: "acc_globex_bank" }) { replayed } }',
    );

    expect(codes(result)).toEqual(['NOT_FOUND']);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('may read what any caller may: apiStatus and institutions', async () => {
    const result = await stack.queryAs(
      'nobody',
      '{ apiStatus { reachable } institutions(first: 1) { nodes { id } } }',
    );

    expect(result.body.errors).toBeUndefined();
    expect(result.body.data).toMatchObject({ apiStatus: { reachable: true } });
  });
});

describe('anonymous requests that stay allowed', () => {
  test.each([
    [
      'fifteen aliases of _service',
      `{ ${Array.from({ length: 15 }, (_, index) => `s${index}: _service { sdl }`).join(' ')} }`,
    ],
    ['one aliased _service', '{ copy: _service { sdl } }'],
    ['_service twice', '{ _service { sdl } _service { sdl } }'],
    ['_service in each of two operations', 'query A { _service { sdl } } query B { _service { sdl } }'],
    ['an aliased sdl', '{ _service { a: sdl b: sdl } }'],
  ])('without a token, %s is refused with 401 before it runs', async (_name, document) => {
    const result = await stack.queryAnonymously(document);
    expect(result.status).toBe(401);
    expect(JSON.stringify(result.body)).not.toContain('type Customer');
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a gateway reads _service { sdl } without a token, and nothing else rides along', async () => {
    const sdl = await stack.queryAnonymously('{ _service { sdl } }');
    const smuggled = await stack.queryAnonymously('{ _service { sdl } customer(id: "cus_acme") { id } }');

    expect(sdl.status).toBe(200);
    expect((sdl.body.data as { _service: { sdl: string } })._service.sdl).toContain('type Customer');
    expect(smuggled.status).toBe(401);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('introspection needs a token by default', async () => {
    const anonymous = await stack.queryAnonymously('{ __schema { queryType { name } } }');
    const authenticated = await stack.queryAs('nobody', '{ __schema { queryType { name } } }');

    expect(anonymous.status).toBe(401);
    expect(authenticated.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });

  test('the Sandbox page is served to a browser, and holds no data', async () => {
    const response = await fetch(stack.graphqlUrl, { headers: { accept: 'text/html' } });

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('INTROSPECTION=public and INTROSPECTION=off', () => {
  const open = useStack({ env: { INTROSPECTION: 'public' } });
  const closed = useStack({ env: { INTROSPECTION: 'off' } });

  test('public: anyone may introspect, but still read nothing else', async () => {
    const schema = await open.queryAnonymously('{ __schema { queryType { name } } }');
    const data = await open.queryAnonymously('{ __schema { queryType { name } } apiStatus { reachable } }');

    expect(schema.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
    expect(data.status).toBe(401);
  });

  test('off: the SDL is read with a service credential (schema-reader) or an operator, by nobody else', async () => {
    const anonymous = await closed.queryAnonymously('{ _service { sdl } }');
    const acme = await closed.queryAs('acme', '{ _service { sdl } }');
    const reader = await closed.queryAs(
      'schemaReader',
      'query __ApolloGetServiceDefinition__ { _service { sdl } }',
    );
    const operator = await closed.queryAs('operator', '{ _service { sdl } }');
    const readerData = await closed.queryAs('schemaReader', '{ customer(id: "cus_acme") { id } }');

    expect({ status: anonymous.status, codes: codes(anonymous), data: anonymous.body.data }).toEqual({
      status: 401,
      codes: ['UNAUTHENTICATED'],
      data: undefined,
    });
    expect({ status: acme.status, codes: codes(acme), data: acme.body.data }).toEqual({
      status: 403,
      codes: ['FORBIDDEN'],
      data: undefined,
    });
    expect((reader.body.data as { _service: { sdl: string } })._service.sdl).toContain('type Customer');
    expect((operator.body.data as { _service: { sdl: string } })._service.sdl).toContain('type Customer');
    // The service credential reaches no customer.
    expect(readerData.body.data).toEqual({ customer: null });
  });

  test('off: nobody introspects, and validation errors make no suggestions', async () => {
    const schema = await closed.queryAs('operator', '{ __schema { queryType { name } } }');
    const typo = await closed.queryAs('operator', '{ custmer(id: "cus_acme") { id } }');

    expect(codes(schema)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(codes(typo)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(JSON.stringify(typo.body)).not.toMatch(/Did you mean/);
  });
});
