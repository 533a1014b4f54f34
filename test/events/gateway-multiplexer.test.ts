/**
 * A graphql-ws connection a federation gateway opens multiplexes its caller's operations: Hive
 * Gateway opens one socket per caller (its connection params), so when one gateway restarts every
 * subscription of a caller moves to the other gateway's one socket. Proven by the gateway's own
 * token holding the `gateway` role (`X-Gateway-Authorization` in `connection_init`, as
 * deploy/gateway.config.ts sends it), the connection is not held to `GRAPHQL_WS_MAX_SUBSCRIPTIONS`,
 * while the caller's own cap (`RATE_LIMIT_LIVE_OPERATIONS`) still holds. Attacks: a caller claiming
 * to be a gateway with its own token, an expired gateway token, a gateway token of another issuer,
 * and a gateway token that expires while its connection is open.
 */
import { generateKeyPair, SignJWT } from 'jose';
import { describe, expect, test } from 'vitest';
import type { Received } from '../support/harness/live-client.ts';
import { useStack } from '../support/harness/stack.ts';
import { bearer, issuerKeyId, issuerSignedToken, tokenClaims, tokenFor } from '../support/tokens.ts';

const PER_CONNECTION = 2;
const PER_CALLER = 4;
const SUBSCRIPTION = 'subscription { accountChanged(customerId: "cus_acme") { eventId } }';

/** A gateway-role token of the run's issuer, expiring `inSeconds` from now. */
const gatewayToken = (inSeconds: number) =>
  issuerSignedToken({
    sub: 'test-gateway',
    client_id: 'test-gateway',
    roles: ['gateway'],
    customer_ids: [],
    exp: Math.floor(Date.now() / 1000) + inSeconds,
  });

/** Gateway-role claims signed with a key the issuer never had, under the issuer's own key id. */
async function forgedGatewayToken(): Promise<string> {
  const { privateKey } = await generateKeyPair('RS256');
  return new SignJWT(tokenClaims({ sub: 'test-gateway', roles: ['gateway'], customer_ids: [] }))
    .setProtectedHeader({ alg: 'RS256', kid: issuerKeyId(), typ: 'at+jwt' })
    .sign(privateKey);
}

/** The code of the error a refused subscription ended with. */
async function refusalOf(refused: Received & { done: Promise<void> }): Promise<string> {
  await refused.done;
  return String(
    (refused.errors.flat()[0] as { extensions?: { code?: unknown } } | undefined)?.extensions?.code,
  );
}

describe('graphql-ws connections through a gateway', () => {
  const stack = useStack({
    env: {
      GRAPHQL_WS_MAX_SUBSCRIPTIONS: String(PER_CONNECTION),
      RATE_LIMIT_LIVE_OPERATIONS: String(PER_CALLER),
      // No leeway: a token ends when its `exp` says.
      AUTH_CLOCK_TOLERANCE_SECONDS: '0',
    },
  });

  const connectAs = async (gatewayAuthorization?: string) =>
    stack.connect({
      Authorization: (await bearer('acme')).authorization,
      ...(gatewayAuthorization === undefined ? {} : { 'X-Gateway-Authorization': gatewayAuthorization }),
    });

  /** Opens `count` subscriptions on `client`, each running before the next, then one more: its refusal. */
  const oneMoreThan = async (client: Awaited<ReturnType<typeof connectAs>>, count: number) => {
    for (let opened = 0; opened < count; opened += 1) {
      client.subscribe(SUBSCRIPTION);
      await stack.subscriptionsStarted(1);
    }
    const refusal = await refusalOf(client.subscribe(SUBSCRIPTION));
    await client.dispose();
    // Their holds are given back before the next test's caller counts again.
    await stack.subscriptionsCompleted(count);
    return refusal;
  };

  test('a direct client is held to the per-connection cap', async () => {
    expect(await oneMoreThan(await connectAs(), PER_CONNECTION)).toBe('TOO_MANY_SUBSCRIPTIONS');
  });

  test("a gateway's connection carries more than the per-connection cap, up to its caller's own cap", async () => {
    const client = await connectAs(`Bearer ${await tokenFor('gateway')}`);
    expect(await oneMoreThan(client, PER_CALLER)).toBe('RATE_LIMITED');
  });

  test('a caller presenting its own token as a gateway’s, or a token of no issuer, is a direct client', async () => {
    for (const claimed of [
      (await bearer('acme')).authorization,
      // An operator's token: a role, but not the gateway's.
      `Bearer ${await tokenFor('operator')}`,
      'Bearer not-a-token',
      // The gateway role, but signed by a key of no issuer, or by the issuer for another audience or
      // as another issuer.
      `Bearer ${await forgedGatewayToken()}`,
      `Bearer ${await issuerSignedToken({ roles: ['gateway'], aud: 'another-api' })}`,
      `Bearer ${await issuerSignedToken({ roles: ['gateway'], iss: 'https://issuer.example' })}`,
      'not even a bearer',
    ]) {
      expect(await oneMoreThan(await connectAs(claimed), PER_CONNECTION), claimed.slice(0, 40)).toBe(
        'TOO_MANY_SUBSCRIPTIONS',
      );
    }
  });

  test('an expired gateway token makes no gateway', async () => {
    const client = await connectAs(`Bearer ${await gatewayToken(-5)}`);
    expect(await oneMoreThan(client, PER_CONNECTION)).toBe('TOO_MANY_SUBSCRIPTIONS');
  });

  test('once its gateway token has expired, an open connection takes no more than the per-connection cap', async () => {
    const client = await connectAs(`Bearer ${await gatewayToken(3)}`);
    const running = [0, 1, 2].map(() => client.subscribe(SUBSCRIPTION));
    await stack.subscriptionsStarted(3);
    await new Promise((resolve) => setTimeout(resolve, 3_200));
    // What it carries runs on (its caller's token still holds); nothing more is let past the cap.
    expect(await refusalOf(client.subscribe(SUBSCRIPTION))).toBe('TOO_MANY_SUBSCRIPTIONS');
    for (const subscription of running) expect(subscription.errors).toEqual([]);
    await client.dispose();
    await stack.subscriptionsCompleted(3);
  });
});
