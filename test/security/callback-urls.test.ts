/**
 * A callback subscription names the URL the facade then POSTs to: a server-side request forgery
 * door unless the URL is held to the configured prefixes. Every hostile callback URL here is
 * refused before anything is sent and before any upstream call (the emulator's counts, and the
 * requests each loopback server received: none), whatever form it takes (no allow-list, a `..`
 * segment, an encoded one, another port, a prefix without its segment boundary, credentials, a
 * query, the metadata address); and a gateway that answers with a redirect, a huge body, or never,
 * holds the facade for no longer than the message's deadline and is never followed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  callbackExtension,
  startCallbackReceiver,
  subscribeByCallback,
  TAKE,
  type CallbackReceiver,
} from '../support/harness/callback-receiver.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { liveGauges } from '../support/harness/stalled-readers.ts';
import { waitFor } from '../support/harness/wait.ts';
import { tokenFor } from '../support/tokens.ts';

const ACCOUNT =
  'subscription { accountChanged(customerId: "cus_acme", accountId: "acc_acme_eth") { eventId } }';

/** The gateway's callback endpoint (allowed), and a service beside it on loopback (never allowed). */
let gateway: CallbackReceiver;
let internal: CallbackReceiver;
/** A facade that may call the gateway back; one configured with no prefix at all. */
let stack: Stack;
let unconfigured: Stack;

beforeAll(async () => {
  [gateway, internal] = await Promise.all([startCallbackReceiver(), startCallbackReceiver()]);
  stack = await startStack({
    env: { WEBHOOK_REGISTER: 'true', SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `${gateway.url}/callback/` },
  });
  unconfigured = await startStack();
  // Each facade key's environment learnt once (its first live connection asks the upstream).
  for (const each of [stack, unconfigured]) {
    const watching = each.connect().subscribe(ACCOUNT);
    await each.subscriptionsStarted(1);
    watching.stop();
    await each.subscriptionsCompleted(1);
  }
});

afterAll(async () => {
  await unconfigured?.close();
  await stack?.close();
  await Promise.all([gateway?.close(), internal?.close()]);
});

beforeEach(async () => {
  gateway.answerWith(TAKE);
  gateway.received.length = 0;
  internal.received.length = 0;
  await Promise.all([stack.resetUpstreamCalls(), unconfigured.resetUpstreamCalls()]);
});

const acme = async () => ({ authorization: `Bearer ${await tokenFor('acme')}` });

/** A subscription naming `callbackUrl`, otherwise as a gateway sends it. */
async function subscribe(to: Stack, callbackUrl: unknown, heartbeatIntervalMs = 0) {
  const subscription = { ...callbackExtension(gateway.url, heartbeatIntervalMs), callbackUrl };
  return subscribeByCallback(to.graphqlUrl, await acme(), ACCOUNT, subscription);
}

/** What must hold after every refusal: no request anywhere, no upstream call, nothing running. */
async function nothingReached(of: Stack): Promise<void> {
  expect(gateway.received).toEqual([]);
  expect(internal.received).toEqual([]);
  expect((await of.upstreamCalls()).total).toBe(0);
  expect(await liveGauges(of, 'callback')).toEqual({ connections: 0, subscriptions: 0 });
}

describe('callback URLs outside the allow-list', () => {
  test('with no prefix configured (the default), every callback subscription is refused', async () => {
    const answer = await subscribe(unconfigured, `${gateway.url}/callback/x`);
    expect(answer.status).toBe(403);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    await nothingReached(unconfigured);
  });

  const hostile: [string, (base: string, other: string) => unknown][] = [
    ['a `..` segment out of the prefix', (base) => `${base}/callback/../admin`],
    ['an encoded `..` segment', (base) => `${base}/callback/%2e%2e/admin`],
    ['an encoded slash', (base) => `${base}/callback%2fadmin`],
    ['a backslash', (base) => `${base}/callback\\..\\admin`],
    ['a `..;` segment a proxy reads as `..`', (base) => `${base}/callback/..;/admin`],
    ['a `..` encoded twice', (base) => `${base}/callback/%252e%252e/admin`],
    ['a NUL between dots', (base) => `${base}/callback/.%00./admin`],
    ['an overlong UTF-8 dot', (base) => `${base}/callback/%C0%AE%C0%AE/admin`],
    ['a path parameter', (base) => `${base}/callback/x;jsessionid=1`],
    ['the prefix without its segment boundary', (base) => `${base}/callbacks/x`],
    ['another port on the same host', (_base, other) => `${other}/callback/x`],
    ['the same port under another name', (base) => `${base.replace('127.0.0.1', 'localhost')}/callback/x`],
    ['credentials', (base) => base.replace('http://', 'http://user:secret@') + '/callback/x'],
    [
      'the allowed origin as credentials of another host',
      (base) => `http://${base.slice(7)}@example.net/callback/x`,
    ],
    ['a query', (base) => `${base}/callback/x?next=/admin`],
    ['a fragment', (base) => `${base}/callback/x#admin`],
    ['the cloud metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['a file', () => 'file:///etc/passwd'],
    ['no string at all', () => ({ href: 'http://127.0.0.1/' })],
    ['a URL of 3,000 characters', (base) => `${base}/callback/${'x'.repeat(3_000)}`],
  ];

  test.each(hostile)('%s: 403, nothing sent, no upstream call', async (_name, urlOf) => {
    const answer = await subscribe(stack, urlOf(gateway.url, internal.url));
    expect(answer.status).toBe(403);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // The refusal never repeats the configured prefixes.
    expect(JSON.stringify(answer.body)).not.toContain(gateway.url);
    await nothingReached(stack);
  });

  test('the same subscription under the prefix is served (the cases above fail only for their URL)', async () => {
    const answer = await subscribe(stack, `${gateway.url}/callback/x`);
    expect(answer.status).toBe(200);
    await stack.subscriptionsStarted(1);
    gateway.answerWith((_request, res) => {
      res.statusCode = 404;
      res.end();
    });
    await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
      body: { amount: '1.00', currency: 'USDC' },
    });
    await stack.subscriptionsCompleted(1);
  });
});

describe('a gateway that answers with a redirect, a huge body, or never', () => {
  test('a redirect is never followed: the subscription is refused, the other server never called', async () => {
    gateway.answerWith((_request, res) => {
      res.writeHead(307, { location: `${internal.url}/admin` }).end();
    });
    const answer = await subscribe(stack, `${gateway.url}/callback/x`, 2_000);
    expect(answer.status).toBe(400);
    expect(gateway.received.map((request) => request.body.action)).toEqual(['check']);
    expect(internal.received).toEqual([]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('an answer that never comes refuses the subscription within its deadline (half the heartbeat)', async () => {
    gateway.answerWith(() => {
      // Never answered.
    });
    const started = Date.now();
    const answer = await subscribe(stack, `${gateway.url}/callback/x`, 2_000);
    expect(answer.status).toBe(400);
    expect(answer.body.errors?.[0]?.message).toContain('did not answer in time');
    expect(Date.now() - started).toBeLessThan(2_000);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a body of 64 MiB after a 2xx is not read: the facade reads a few KiB and goes on', async () => {
    let written = 0;
    gateway.answerWith((request, res) => {
      if (request.body.action !== 'next') {
        TAKE(request, res);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const pump = (): void => {
        while (written < 64 * 1024 * 1024 && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const answer = await subscribe(stack, `${gateway.url}/callback/x`, 4_000);
    expect(answer.status).toBe(200);
    await stack.subscriptionsStarted(1);
    for (let made = 0; made < 2; made += 1) {
      await stack.emulator.rest('POST', '/v3/sandbox/accounts/acc_acme_eth/topup', {
        body: { amount: '1.00', currency: 'USDC' },
      });
    }
    // Both events reach the gateway: the first answer's body held nothing up.
    await waitFor(
      () => gateway.received.filter((request) => request.body.action === 'next').length === 2,
      'both events at the gateway',
    );
    // Cut long before the whole body: what the kernel's buffers took, not 64 MiB.
    expect(written).toBeLessThan(32 * 1024 * 1024);
    gateway.answerWith((_request, res) => {
      res.statusCode = 404;
      res.end();
    });
    await stack.subscriptionsCompleted(1);
  });
});
