/**
 * One door, every transport: every refusal sent over HTTP and over each live transport of
 * `LIVE_TRANSPORTS` (graphql-ws, Apollo's multipart protocol, Server-Sent Events, and the next one
 * by construction: its client is built from how it says a client reaches it), each answered as the
 * refusal table (src/edge/refusal.ts) says, and none of them reaching the upstream.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { generateKeyPair, SignJWT } from 'jose';
import WsClient from 'ws';
import type { HowToConnect, LiveTransport } from '../../src/edge/live.ts';
import { LIVE_TRANSPORTS } from '../../src/edge/live-transports.ts';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { callbackExtension, startCallbackReceiver } from '../support/harness/callback-receiver.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { waitFor } from '../support/harness/wait.ts';
import type { Stack } from '../support/harness/stack.ts';
import { useStack } from '../support/harness/stack.ts';
import {
  bearer,
  issuerKeyId,
  issuerSignedToken,
  tokenClaims,
  tokenFor,
  type TestCallerName,
} from '../support/tokens.ts';

const ALLOWED_ORIGIN = 'https://app.example.com';
/**
 * A gateway's callback endpoint, which the facade may call: only a subscription refused as it
 * starts (another customer's) gets as far as its `check`, which it takes.
 */
const gateway = await startCallbackReceiver();
afterAll(() => gateway.close());
const CUSTOMER = '{ customer(id: "cus_acme") { id } }';
const WATCH = 'subscription Watch { accountChanged(customerId: "cus_acme") { accountId } }';
/** Another customer's changes after a cursor far ahead of the log: the scope refuses it before the cursor is judged. */
const ANOTHER_AHEAD =
  'subscription { accountChanged(customerId: "cus_globex", after: "99999999999999-0") { accountId } }';

/** What HTTP answered: the status and the first error's code. */
interface HttpAnswer {
  status: number;
  code: string | undefined;
}

/** What graphql-ws answered: the upgrade's status, the close code, or the operation's error code. */
type WsAnswer =
  { upgrade: number; code: string | undefined } | { close: number } | { error: string | undefined };

type Credentials = Record<string, string>;

async function as(caller: TestCallerName): Promise<Credentials> {
  return { Authorization: `Bearer ${await tokenFor(caller)}` };
}

async function expiredToken(): Promise<Credentials> {
  const now = Math.floor(Date.now() / 1000);
  // Well past the verifier's clock tolerance.
  return { Authorization: `Bearer ${await issuerSignedToken({ iat: now - 600, exp: now - 60 })}` };
}

async function otherAudienceToken(): Promise<Credentials> {
  return { Authorization: `Bearer ${await issuerSignedToken({ aud: 'https://another-api.example.com' })}` };
}

/** Signed by a key of the caller's own under the issuer's key id: only the signature is wrong. */
async function forgedPowerfulToken(): Promise<Credentials> {
  const { privateKey } = await generateKeyPair('RS256');
  const token = await new SignJWT(
    tokenClaims({ roles: ['operator', 'gateway', 'schema-reader'], client_id: 'test-web-app' }),
  )
    .setProtectedHeader({ alg: 'RS256', kid: issuerKeyId(), typ: 'at+jwt' })
    .sign(privateKey);
  return { Authorization: `Bearer ${token}` };
}

async function post(
  stack: Stack,
  credentials: Credentials,
  query: string,
  variables?: Record<string, unknown>,
): Promise<HttpAnswer> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...lowerCased(credentials),
    },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { errors?: { extensions?: { code?: string } }[] };
  return { status: response.status, code: body.errors?.[0]?.extensions?.code };
}

/** A connection the door refuses: how its socket closed. */
async function connectRefused(stack: Stack, credentials: Credentials): Promise<WsAnswer> {
  const { code } = await stack.connect(credentials).closed;
  return { close: code };
}

/** A subscription the door refuses on an accepted connection: the error's code. */
async function subscribeRefused(
  stack: Stack,
  credentials: Credentials,
  query: string,
  variables?: Record<string, unknown>,
): Promise<WsAnswer> {
  const received = stack.connect(credentials).subscribe(query, variables);
  await received.done;
  expect(received.data).toEqual([]);
  // A refusal before execution is an `error` message (a list); one from the resolver, a result's error.
  const errors = (received.errors as unknown[]).flat() as { extensions?: { code?: string } }[];
  return { error: errors[0]?.extensions?.code };
}

/**
 * A subscription the door refuses over a live transport of streamed HTTP responses (SSE at
 * `/graphql/stream`, multipart at `/graphql`), sent as `how` says a client does: the status and
 * the first error's code, from the refusal's HTTP answer or, if a stream was opened, its first
 * message (an SSE event's data, a multipart part's payload).
 */
async function streamRefused(
  stack: Stack,
  how: HowToConnect,
  credentials: Credentials,
  query: string,
  variables?: Record<string, unknown>,
): Promise<HttpAnswer> {
  const abort = new AbortController();
  const response = await fetch(`${stack.facadeUrl}${how.path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: how.accept ?? 'application/json',
      ...lowerCased(credentials),
    },
    body: JSON.stringify({ query, variables }),
    signal: abort.signal,
  });
  const text = await response.text();
  abort.abort();
  const contentType = response.headers.get('content-type') ?? '';
  const json = contentType.startsWith('text/event-stream')
    ? (/^data: ?(.*)$/m.exec(text)?.[1] ?? '{}')
    : contentType.startsWith('multipart/mixed')
      ? firstMultipartMessage(text)
      : text;
  const body = JSON.parse(json) as { errors?: { extensions?: { code?: string } }[] };
  return { status: response.status, code: body.errors?.[0]?.extensions?.code };
}

/**
 * A subscription the door refuses over a live transport that answers at a callback URL, sent as a
 * gateway sends it (`how`'s `Accept`, `extensions.subscription` naming the gateway's callback
 * endpoint): the status and the first error's code.
 */
async function callbackRefused(
  stack: Stack,
  how: HowToConnect,
  credentials: Credentials,
  query: string,
  variables?: Record<string, unknown>,
): Promise<HttpAnswer> {
  const subscription = callbackExtension(gateway.url);
  const response = await fetch(`${stack.facadeUrl}${how.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: how.accept ?? '', ...lowerCased(credentials) },
    body: JSON.stringify({ query, variables, extensions: { subscription } }),
  });
  const body = (await response.json()) as { errors?: { extensions?: { code?: string } }[] };
  return { status: response.status, code: body.errors?.[0]?.extensions?.code };
}

/** The first part of a multipart stream that is no heartbeat, as `{ errors }`. */
function firstMultipartMessage(text: string): string {
  for (const match of text.matchAll(/\r\n\r\n(\{.*\})\r\n/g)) {
    const part = JSON.parse(match[1]!) as { payload?: { errors?: unknown } | null; errors?: unknown };
    if (part.errors !== undefined) return JSON.stringify({ errors: part.errors });
    if (part.payload !== undefined && part.payload !== null) return JSON.stringify(part.payload);
  }
  return '{}';
}

/** A browser page of another origin asking first (the preflight) to reach `path`. */
async function preflightRefused(stack: Stack, path: string): Promise<HttpAnswer> {
  const response = await fetch(`${stack.facadeUrl}${path}`, {
    method: 'OPTIONS',
    headers: { origin: 'https://evil.example.net', 'access-control-request-method': 'POST' },
  });
  const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
  return { status: response.status, code: body.errors[0]?.extensions.code };
}

function lowerCased(headers: Credentials): Credentials {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}

/** Warms the key-environment probe of the facade's own key, so a case counts only its own calls. */
async function warmUp(stack: Stack): Promise<void> {
  const received = stack.connect().subscribe(WATCH);
  await stack.subscriptionsStarted(1);
  received.stop();
  await stack.subscriptionsCompleted(1);
}

/** What every live transport is sent for a case: who, and the subscription. */
interface LiveAsk {
  as(): Promise<Credentials>;
  query: string;
  variables?: Record<string, unknown>;
}

interface RefusalCase {
  refusal: string;
  http(stack: Stack): Promise<HttpAnswer>;
  /** What each live transport is sent, or a browser page of another origin reaching it. */
  live: LiveAsk | 'a page of another origin';
  /**
   * A transport over WebSocket answers as `ws` says (a close: the connection is refused, so no
   * operation is sent); one over streamed HTTP responses answers as HTTP does, unless `stream` says
   * otherwise.
   */
  expected: { http: HttpAnswer; ws: WsAnswer; stream?: HttpAnswer };
}

const nobody = async (): Promise<Credentials> => ({});
const badToken = async (): Promise<Credentials> => ({ Authorization: 'Bearer not.a.token' });
const acme = () => as('acme');

/** The answer of `transport` to `refusal`, from a client built from how the transport says it is reached. */
async function liveAnswer(
  stack: Stack,
  transport: LiveTransport,
  { live, expected }: RefusalCase,
): Promise<WsAnswer | HttpAnswer> {
  const how = transport.rules.connects;
  if (how.wire === 'http-callback') {
    if (live === 'a page of another origin') return preflightRefused(stack, how.path);
    return callbackRefused(stack, how, await live.as(), live.query, live.variables);
  }
  if (how.wire === 'http-stream') {
    if (live === 'a page of another origin') return preflightRefused(stack, how.path);
    return streamRefused(stack, how, await live.as(), live.query, live.variables);
  }
  // A WebSocket speaks a protocol of its own: a new one needs its client here (the harness has graphql-ws's).
  if (transport.rules.name !== 'graphql-ws' || how.path !== '/graphql') {
    throw new Error(`no client for the WebSocket transport ${transport.rules.name} in this test`);
  }
  if (live === 'a page of another origin') return upgradeRefused(stack);
  return 'close' in expected.ws
    ? connectRefused(stack, await live.as())
    : subscribeRefused(stack, await live.as(), live.query, live.variables);
}

/** A WebSocket upgrade from a browser page of another origin: the upgrade's status and code. */
function upgradeRefused(stack: Stack): Promise<WsAnswer> {
  return new Promise<WsAnswer>((resolve, reject) => {
    const socket = new WsClient(stack.graphqlUrl.replace(/^http/, 'ws'), 'graphql-transport-ws', {
      origin: 'https://evil.example.net',
    });
    socket.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      response.on('end', () => {
        const body = JSON.parse(text) as { errors: { extensions: { code: string } }[] };
        resolve({ upgrade: response.statusCode ?? 0, code: body.errors[0]?.extensions.code });
      });
    });
    socket.once('open', () => reject(new Error('the upgrade was accepted')));
    socket.once('error', () => {});
  });
}

const admissionCases: RefusalCase[] = [
  {
    refusal: 'no token',
    http: (stack) => post(stack, {}, CUSTOMER),
    live: { as: nobody, query: WATCH },
    expected: { http: { status: 401, code: 'UNAUTHENTICATED' }, ws: { close: 4401 } },
  },
  {
    refusal: 'a bad token',
    http: async (stack) => post(stack, await badToken(), CUSTOMER),
    live: { as: badToken, query: WATCH },
    expected: { http: { status: 401, code: 'UNAUTHENTICATED' }, ws: { close: 4401 } },
  },
  {
    refusal: 'an expired token',
    http: async (stack) => post(stack, await expiredToken(), CUSTOMER),
    live: { as: expiredToken, query: WATCH },
    expected: { http: { status: 401, code: 'UNAUTHENTICATED' }, ws: { close: 4401 } },
  },
  {
    refusal: 'a token of the issuer for another audience',
    http: async (stack) => post(stack, await otherAudienceToken(), CUSTOMER),
    live: { as: otherAudienceToken, query: WATCH },
    expected: { http: { status: 401, code: 'UNAUTHENTICATED' }, ws: { close: 4401 } },
  },
  {
    // The roles a caller would want (operator, gateway) in a token the issuer never signed.
    refusal: 'a token with every role, signed by a key of its own under the issuer’s key id',
    http: async (stack) => post(stack, await forgedPowerfulToken(), CUSTOMER),
    live: { as: forgedPowerfulToken, query: WATCH },
    expected: { http: { status: 401, code: 'UNAUTHENTICATED' }, ws: { close: 4401 } },
  },
  {
    refusal: 'a page of another origin',
    // The browser asks first (a JSON POST is not a simple request); the answer stops it there.
    http: (stack) => preflightRefused(stack, '/graphql'),
    live: 'a page of another origin',
    expected: { http: { status: 403, code: 'FORBIDDEN' }, ws: { upgrade: 403, code: 'FORBIDDEN' } },
  },
  {
    refusal: 'the other transport’s operation type',
    http: async (stack) => post(stack, await acme(), WATCH),
    live: { as: acme, query: CUSTOMER },
    expected: { http: { status: 400, code: 'BAD_REQUEST' }, ws: { error: 'BAD_REQUEST' } },
  },
  {
    refusal: 'too deep',
    http: async (stack) =>
      post(
        stack,
        await acme(),
        '{ customer(id: "cus_acme") { accounts { nodes { customer { accounts { nodes { customer { accounts { nodes { id } } } } } } } } } }',
      ),
    live: {
      as: acme,
      query:
        'subscription { accountChanged(customerId: "cus_acme") { account { customer { accounts { nodes { customer { accounts { nodes { id } } } } } } } } }',
    },
    expected: {
      http: { status: 400, code: 'GRAPHQL_VALIDATION_FAILED' },
      ws: { error: 'GRAPHQL_VALIDATION_FAILED' },
    },
  },
  {
    refusal: 'too costly',
    http: async (stack) => post(stack, await acme(), '{ customers(first: 60) { nodes { id } } }'),
    live: {
      as: acme,
      query:
        'subscription { accountChanged(customerId: "cus_acme") { account { customer { accounts(first: 60) { nodes { id } } } } } }',
    },
    expected: {
      http: { status: 400, code: 'GRAPHQL_VALIDATION_FAILED' },
      ws: { error: 'GRAPHQL_VALIDATION_FAILED' },
    },
  },
  {
    refusal: 'too costly once the variables are known',
    http: async (stack) =>
      post(stack, await acme(), 'query($n: Int) { customers(first: $n) { nodes { id } } }', { n: 60 }),
    live: {
      as: acme,
      query:
        'subscription($n: Int) { accountChanged(customerId: "cus_acme") { account { customer { accounts(first: $n) { nodes { id } } } } } }',
      variables: { n: 60 },
    },
    expected: {
      http: { status: 400, code: 'GRAPHQL_VALIDATION_FAILED' },
      ws: { error: 'GRAPHQL_VALIDATION_FAILED' },
    },
  },
  {
    refusal: 'too many aliases',
    http: async (stack) =>
      post(stack, await acme(), `{ ${Array.from({ length: 16 }, (_, i) => `a${i}: __typename`).join(' ')} }`),
    live: {
      as: acme,
      query: `subscription { accountChanged(customerId: "cus_acme") { ${Array.from({ length: 16 }, (_, i) => `a${i}: accountId`).join(' ')} } }`,
    },
    expected: {
      http: { status: 400, code: 'GRAPHQL_VALIDATION_FAILED' },
      ws: { error: 'GRAPHQL_VALIDATION_FAILED' },
    },
  },
  {
    refusal: 'too many tokens',
    http: async (stack) => post(stack, await acme(), `{ ${'__typename '.repeat(120)}}`),
    live: {
      as: acme,
      query: `subscription { accountChanged(customerId: "cus_acme") { ${'accountId '.repeat(120)}} }`,
    },
    expected: { http: { status: 400, code: 'GRAPHQL_PARSE_FAILED' }, ws: { error: 'GRAPHQL_PARSE_FAILED' } },
  },
  {
    refusal: 'a malformed input string',
    http: async (stack) =>
      post(stack, await acme(), 'query($id: ID!) { customer(id: $id) { id } }', { id: '\udfffcus' }),
    live: {
      as: acme,
      query: 'subscription($id: ID!) { accountChanged(customerId: $id) { accountId } }',
      variables: { id: '\udfffcus' },
    },
    expected: { http: { status: 400, code: 'BAD_USER_INPUT' }, ws: { error: 'BAD_USER_INPUT' } },
  },
  {
    // Refused by the door before execution over every transport, never an INTERNAL_SERVER_ERROR of the facade.
    refusal: 'a variable its type cannot hold',
    http: async (stack) =>
      post(stack, await acme(), 'query($id: ID!) { customer(id: $id) { id } }', { id: { a: 1 } }),
    live: {
      as: acme,
      query: 'subscription($id: ID!) { accountChanged(customerId: $id) { accountId } }',
      variables: { id: { a: 1 } },
    },
    expected: { http: { status: 400, code: 'BAD_USER_INPUT' }, ws: { error: 'BAD_USER_INPUT' } },
  },
  {
    // Refused by the scope before anything shared is touched: no queue, no cursor judged, no watch.
    refusal: 'another customer’s id (a subscription with a cursor far ahead of the log)',
    http: async (stack) => post(stack, await acme(), '{ customer(id: "cus_globex") { id } }'),
    live: { as: acme, query: ANOTHER_AHEAD },
    expected: { http: { status: 200, code: 'NOT_FOUND' }, ws: { error: 'NOT_FOUND' } },
  },
  {
    refusal: 'a required variable left out',
    http: async (stack) => post(stack, await acme(), 'query($id: ID!) { customer(id: $id) { id } }', {}),
    live: {
      as: acme,
      query: 'subscription($id: ID!) { accountChanged(customerId: $id) { accountId } }',
      variables: {},
    },
    expected: { http: { status: 400, code: 'BAD_USER_INPUT' }, ws: { error: 'BAD_USER_INPUT' } },
  },
];

describe('every admission refusal, over HTTP and every live transport', () => {
  const stack = useStack({
    env: {
      CORS_ORIGINS: ALLOWED_ORIGIN,
      QUERY_MAX_COST: '50',
      QUERY_MAX_TOKENS: '100',
      SUBSCRIPTION_CALLBACK_ALLOWED_URLS: `${gateway.url}/callback/`,
      // Each bad credential is tried once per transport from one address: room for every transport.
      RATE_LIMIT_FAILED_AUTH: '100',
    },
  });

  test('warm-up: the facade key’s environment is learnt once', async () => {
    await warmUp(stack);
    await stack.resetUpstreamCalls();
    await warmUp(stack);
    // A second live connection of the same key asks the upstream nothing about the key again (the
    // probe, `GET /v3/capabilities`), so each case below counts only its own calls.
    expect((await stack.upstreamCalls()).byRoute['GET /v3/capabilities'] ?? 0).toBe(0);
  });

  test.each(admissionCases)('$refusal', async (refusal) => {
    await stack.resetUpstreamCalls();
    expect(await refusal.http(stack)).toEqual(refusal.expected.http);
    for (const transport of LIVE_TRANSPORTS) {
      const { wire } = transport.rules.connects;
      const expected =
        wire === 'websocket' ? refusal.expected.ws : (refusal.expected.stream ?? refusal.expected.http);
      expect({ [transport.rules.name]: await liveAnswer(stack, transport, refusal) }).toEqual({
        [transport.rules.name]: expected,
      });
    }
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('budget and trusted-document refusals, over HTTP and over graphql-ws', () => {
  const LISTED_QUERY = 'query Mine { customer(id: "cus_acme") { id } }';
  const budgets = useStack({
    env: {
      RATE_LIMIT_REQUESTS: '4',
      RATE_LIMIT_SUBSCRIPTIONS: '1',
    },
  });
  let manifestStack: Stack | undefined;
  // The facade key's environment learnt first, so a refused subscription below counts no probe.
  beforeAll(() => warmUp(budgets));

  test('over the operation budget: 429 over HTTP, RATE_LIMITED over graphql-ws, nothing upstream', async () => {
    const globex = await as('globex');
    for (let i = 0; i < 4; i += 1) {
      expect((await post(budgets, globex, '{ __typename }')).status).toBe(200);
    }
    await budgets.resetUpstreamCalls();
    expect(await post(budgets, globex, '{ __typename }')).toEqual({ status: 429, code: 'RATE_LIMITED' });
    expect(await subscribeRefused(budgets, globex, WATCH)).toEqual({ error: 'RATE_LIMITED' });
    expect((await budgets.upstreamCalls()).total).toBe(0);
  });

  test('over the running-subscription cap: RATE_LIMITED over graphql-ws (HTTP runs no subscription)', async () => {
    const operator = await as('operator');
    const running = budgets.connect(operator).subscribe(WATCH);
    await budgets.subscriptionsStarted(1);
    await budgets.resetUpstreamCalls();
    expect(await subscribeRefused(budgets, operator, WATCH)).toEqual({ error: 'RATE_LIMITED' });
    expect(await post(budgets, operator, WATCH)).toEqual({ status: 400, code: 'BAD_REQUEST' });
    expect((await budgets.upstreamCalls()).total).toBe(0);
    running.stop();
    await budgets.subscriptionsCompleted(1);
  });

  test('not in the trusted documents: PERSISTED_QUERY_NOT_IN_LIST over both, nothing upstream', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'door-trusted-'));
    const manifest = join(directory, 'manifest.json');
    await writeFile(manifest, JSON.stringify({ 'mine-v1': LISTED_QUERY, 'watch-v1': WATCH }));
    const { startStack } = await import('../support/harness/stack.ts');
    manifestStack = await startStack({ env: { TRUSTED_DOCUMENTS: manifest } });
    try {
      await warmUp(manifestStack);
      await manifestStack.resetUpstreamCalls();
      const acme = await as('acme');
      expect(await post(manifestStack, acme, CUSTOMER)).toEqual({
        status: 400,
        code: 'PERSISTED_QUERY_NOT_IN_LIST',
      });
      expect(
        await subscribeRefused(
          manifestStack,
          acme,
          'subscription { accountChanged(customerId: "cus_acme") { type } }',
        ),
      ).toEqual({ error: 'PERSISTED_QUERY_NOT_IN_LIST' });
      expect((await manifestStack.upstreamCalls()).total).toBe(0);

      // The listed ones run, by body or by id, over both.
      expect((await post(manifestStack, acme, LISTED_QUERY)).status).toBe(200);
      const byId = await fetch(manifestStack.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await bearer('acme')) },
        body: JSON.stringify({ documentId: 'mine-v1' }),
      });
      expect(await byId.json()).toEqual({ data: { customer: { id: 'cus_acme' } } });
      const watching = manifestStack.connect(acme).subscribe(WATCH);
      await manifestStack.subscriptionsStarted(1);
      expect(watching.errors).toEqual([]);
      watching.stop();
    } finally {
      await manifestStack.close();
    }
  });
});

describe('operations over graphql-ws in the log and the metrics, as over HTTP', () => {
  const stack = useStack();

  const operationLines = (transport: string) =>
    stack
      .logs()
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line['msg'] === 'graphql operation' && line['transport'] === transport);

  async function metric(pattern: RegExp): Promise<number> {
    const text = await (await fetch(stack.metricsUrl)).text();
    const line = text.split('\n').find((candidate) => pattern.test(candidate));
    return line === undefined ? 0 : Number(line.split(' ').pop());
  }

  test('a subscription is logged and counted when it ends, with its transport named', async () => {
    const received = stack.connect().subscribe(WATCH);
    await stack.subscriptionsStarted(1);
    received.stop();
    await stack.subscriptionsCompleted(1);

    expect(operationLines('graphql-ws')).toContainEqual(
      expect.objectContaining({ operationName: 'Watch', errorCodes: [], requestId: expect.any(String) }),
    );
    expect(
      await metric(
        /^graphql_operations_total\{.*operation_name="Watch".*operation_type="subscription".*outcome="ok"/,
      ),
    ).toBe(1);
  });

  test('a query over graphql-ws is refused, logged and counted like a refused HTTP operation', async () => {
    expect(await subscribeRefused(stack, await as('operator'), 'query Over { __typename }')).toEqual({
      error: 'BAD_REQUEST',
    });
    expect(operationLines('graphql-ws')).toContainEqual(
      expect.objectContaining({ errorCodes: ['BAD_REQUEST'] }),
    );
    expect(await metric(/^graphql_operations_total\{.*operation_type="unknown".*outcome="error"/)).toBe(1);

    // The same query over HTTP runs, with its own line.
    expect((await post(stack, await as('operator'), 'query Over { __typename }')).status).toBe(200);
    expect(operationLines('http')).toContainEqual(
      expect.objectContaining({ operationName: 'Over', errorCodes: [] }),
    );
  });
});

describe('over the call budget, over HTTP and over graphql-ws', () => {
  const secret = generateWebhookSecret();
  const stack = useStack({ env: { UPSTREAM_MAX_CALLS_PER_OPERATION: '1', WEBHOOK_SECRETS: secret } });

  test('the field past the budget answers TOO_MANY_UPSTREAM_CALLS, and no call beyond it is made', async () => {
    await warmUp(stack);
    await stack.resetUpstreamCalls();
    const http = await stack.query(
      '{ a: customer(id: "cus_acme") { id } b: customer(id: "cus_globex") { id } }',
    );
    expect(http.status).toBe(200);
    expect(http.body.errors?.map((error) => error.extensions?.code)).toEqual(['TOO_MANY_UPSTREAM_CALLS']);
    expect((await stack.upstreamCalls()).total).toBe(1);

    const received = stack
      .connect()
      .subscribe(
        'subscription { accountChanged(customerId: "cus_acme") { account { id customer { id } } } }',
      );
    await stack.subscriptionsStarted(1);
    await stack.resetUpstreamCalls();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    await waitFor(() => received.data.length > 0, 'the event');
    const errors = received.errors as { extensions?: { code?: string } }[];
    expect(errors.map((error) => error.extensions?.code)).toEqual(['TOO_MANY_UPSTREAM_CALLS']);
    expect((await stack.upstreamCalls()).total).toBe(1);
    received.stop();
  });
});

describe('a valid credential from an address that has just failed 21 times', () => {
  const stack = useStack();

  test('is served over HTTP and over graphql-ws, while the failing attempts are refused', async () => {
    const bad = { Authorization: 'Bearer not.a.token' };
    const statuses: number[] = [];
    for (let i = 0; i < 21; i += 1) statuses.push((await post(stack, bad, CUSTOMER)).status);
    expect(statuses.slice(0, 20)).toEqual(Array.from({ length: 20 }, () => 401));
    expect(statuses[20]).toBe(429);

    expect(await post(stack, await as('acme'), CUSTOMER)).toEqual({ status: 200, code: undefined });
    const received = stack.connect(await as('acme')).subscribe(WATCH);
    await stack.subscriptionsStarted(1);
    expect(received.errors).toEqual([]);
    received.stop();
    await stack.subscriptionsCompleted(1);
  });
});
