/**
 * The gateway role beside the caller's own token: a request whose `X-Gateway-Authorization` holds a
 * valid token of the issuer with the `gateway` role, and which asks for a trace, gets an inline
 * trace (`ftv1`), while the caller's `Authorization` alone still decides what it may read. Anything
 * else in that header (a customer's token, a forged or expired gateway token, a malformed value)
 * gets no trace, costs no upstream call, and leaves the answer as it was.
 */
import { Trace } from '@apollo/usage-reporting-protobuf';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { startEmulator, type RunningEmulator } from '../support/harness/emulator.ts';
import { startFacade, type RunningFacade } from '../support/harness/facade.ts';
import { bearer, issuerSignedToken, tokenFor } from '../support/tokens.ts';

const ASK_FOR_TRACE = { 'apollo-federation-include-trace': 'ftv1' };
const ACME = '{ customer(id: "cus_acme") { displayName } }';
const GLOBEX = '{ customer(id: "cus_globex") { displayName } }';

let emulator: RunningEmulator;
let facade: RunningFacade;

beforeAll(async () => {
  emulator = await startEmulator();
  facade = await startFacade(emulator.url);
});

afterAll(async () => {
  await facade?.close();
  await emulator?.close();
});

beforeEach(async () => {
  await emulator.resetUpstreamCalls();
});

async function ask(
  query: string,
  gatewayAuthorization: string | undefined,
  headers: Record<string, string> = ASK_FOR_TRACE,
) {
  const answer = await facade.query<Record<string, { displayName: string } | null>>(query, undefined, {
    ...(await bearer('acme')),
    ...headers,
    ...(gatewayAuthorization === undefined ? {} : { 'x-gateway-authorization': gatewayAuthorization }),
  });
  const { extensions } = answer.body as { extensions?: Record<string, unknown> };
  return { ...answer, ftv1: extensions?.ftv1 };
}

describe('X-Gateway-Authorization', () => {
  test("a gateway-role token there gets a trace of the caller's operation, which the caller's token still scopes", async () => {
    const gatewayToken = await tokenFor('gateway');
    const answer = await ask(ACME, `Bearer ${gatewayToken}`);
    expect(answer.body.data).toEqual({ customer: { displayName: 'Acme Robotics Ltd' } });
    expect(typeof answer.ftv1).toBe('string');
    const trace = Trace.decode(Buffer.from(answer.ftv1 as string, 'base64'));
    expect(trace.root?.child?.map((node) => node.responseName)).toEqual(['customer']);

    // The gateway token grants nothing to read: acme's token cannot see globex, with or without it.
    const refused = await ask(GLOBEX, `Bearer ${gatewayToken}`);
    expect(refused.body.data).toEqual({ customer: null });
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await emulator.upstreamCalls()).byRoute['GET /v3/customers/{customerId}']).toBe(1);
  });

  test('without asking for a trace, a gateway token changes nothing', async () => {
    const answer = await ask(ACME, `Bearer ${await tokenFor('gateway')}`, {});
    expect(answer.body.data).toEqual({ customer: { displayName: 'Acme Robotics Ltd' } });
    expect(answer.ftv1).toBeUndefined();
  });

  test.each([
    ['a customer’s own token', async () => `Bearer ${await tokenFor('acme')}`],
    ['an operator’s token', async () => `Bearer ${await tokenFor('operator')}`],
    [
      'an expired gateway token',
      async () => `Bearer ${await issuerSignedToken({ roles: ['gateway'], exp: 1_000 })}`,
    ],
    [
      'a gateway token of another audience',
      async () => `Bearer ${await issuerSignedToken({ roles: ['gateway'], aud: 'another-service' })}`,
    ],
    ['a gateway token signed by a key the issuer does not publish', async () => forgedToken()],
    [
      'a value that is not a bearer token',
      async () => `Basic ${Buffer.from('gateway:gateway').toString('base64')}`,
    ],
    ['an empty value', async () => ''],
  ])('%s there gets no trace, and the answer is the caller’s as before', async (_name, value) => {
    const answer = await ask(ACME, await value());
    expect(answer.status).toBe(200);
    expect(answer.body.data).toEqual({ customer: { displayName: 'Acme Robotics Ltd' } });
    expect(answer.ftv1).toBeUndefined();
    expect((await emulator.upstreamCalls()).total).toBe(1);
  });
});

/** A token shaped like the issuer's, with the gateway role, signed by a key of this test's own. */
async function forgedToken(): Promise<string> {
  const { generateKeyPair, SignJWT } = await import('jose');
  const { privateKey } = await generateKeyPair('RS256');
  const genuine = await issuerSignedToken({ roles: ['gateway'] });
  const [header, payload] = genuine.split('.') as [string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  const { kid } = JSON.parse(Buffer.from(header, 'base64url').toString()) as { kid: string };
  return `Bearer ${await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid, typ: 'at+jwt' }).sign(privateKey)}`;
}
