/**
 * What the facade sends Apollo Router's response cache, against the Router's documented contract
 * (docs "Response caching: Invalidation"; `invalidation_endpoint.rs` and `invalidation.rs` at v2.13.1).
 * The Router binary cannot run on this project's machines: a real HTTP server in this test answers
 * as that endpoint does and records every request the facade makes to it.
 *
 * - The answers the Router may keep carry `Cache-Control: private, max-age` and their cache tags
 *   (`apolloCacheTags`, one `apolloEntityCacheTags` entry per entity); all others stay `no-store`.
 * - For each event (before its webhook is acknowledged) and each write (before its answer), one
 *   `POST` of `cache_tag` invalidations for the facade's subgraph, the shared key as the whole
 *   `Authorization`, naming tags the kept answers carry; retried on a 5xx, never on a refusal;
 *   counted in `facade_gateway_invalidations_total`.
 */
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { generateWebhookSecret } from '../../emulator/webhooks/signature.ts';
import { acmeAccountUpdated, postSignedEvent } from '../support/harness/events.ts';
import { startStack, type Stack } from '../support/harness/stack.ts';
import { waitFor } from '../support/harness/wait.ts';
import { bearer } from '../support/tokens.ts';

const SHARED_KEY = 'router-shared-key-of-this-test';
const secret = generateWebhookSecret();

/** One request the Router's endpoint received. */
type Received = { method: string; path: string; headers: IncomingHttpHeaders; body: string };

/** How the endpoint answers the next requests: the Router's own answer unless told otherwise. */
type Behaviour = 'router' | { status: number } | 'hold';

/**
 * Apollo Router's invalidation endpoint as v2.13.1 implements it: no `Authorization` is 401 ("Missing
 * authorization header"); a body that is not an array of invalidation requests (`kind` `subgraph`,
 * `type` or `cache_tag`, no other field) is 400; a key other than the subgraph's `shared_key` is 401;
 * another method 405; else 202 with the count of entries removed (here, one per request).
 */
function routerAnswer(request: Received): { status: number; body: unknown } {
  if (request.headers.authorization === undefined)
    return { status: 401, body: { errors: [{ message: 'Missing authorization header' }] } };
  if (request.method !== 'POST') return { status: 405, body: { errors: [{ message: '' }] } };
  let requests: unknown;
  try {
    requests = JSON.parse(request.body);
  } catch {
    return {
      status: 400,
      body: { errors: [{ message: 'failed to deserialize the request body into JSON' }] },
    };
  }
  if (!Array.isArray(requests) || !requests.every(isInvalidationRequest))
    return {
      status: 400,
      body: { errors: [{ message: 'failed to deserialize the request body into JSON' }] },
    };
  if (request.headers.authorization !== SHARED_KEY)
    return { status: 401, body: { errors: [{ message: 'Invalid authorization header' }] } };
  return { status: 202, body: { count: requests.length } };
}

function isInvalidationRequest(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const fields = Object.keys(value).sort().join(',');
  const { kind, subgraph, subgraphs, type, cache_tag: tag } = value as Record<string, unknown>;
  switch (kind) {
    case 'subgraph':
      return fields === 'kind,subgraph' && typeof subgraph === 'string';
    case 'type':
      return fields === 'kind,subgraph,type' && typeof subgraph === 'string' && typeof type === 'string';
    case 'cache_tag':
      return (
        fields === 'cache_tag,kind,subgraphs' &&
        typeof tag === 'string' &&
        Array.isArray(subgraphs) &&
        subgraphs.every((name) => typeof name === 'string')
      );
    default:
      return false;
  }
}

let server: Server;
let invalidationUrl: string;
const received: Received[] = [];
let behaviours: Behaviour[] = [];
const held: (() => void)[] = [];
let stack: Stack;

beforeAll(async () => {
  server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const one: Received = { method: request.method!, path: request.url!, headers: request.headers, body };
      received.push(one);
      const behaviour = behaviours.shift() ?? 'router';
      const answer = (status: number, payload: unknown) => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(payload));
      };
      if (behaviour === 'hold') held.push(() => answer(202, { count: 1 }));
      else if (behaviour === 'router') {
        const { status, body: payload } = routerAnswer(one);
        answer(status, payload);
      } else answer(behaviour.status, { errors: [{ message: 'injected' }] });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  invalidationUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/invalidation`;
  stack = await startStack({
    env: {
      CACHE_ENABLED: 'true',
      WEBHOOK_SECRETS: secret,
      ROUTER_INVALIDATION_URL: invalidationUrl,
      ROUTER_INVALIDATION_SHARED_KEY: SHARED_KEY,
      GATEWAY_INVALIDATION_WAIT_MS: '2000',
    },
  });
});

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await stack?.close();
  server?.closeAllConnections();
  server?.close();
});

beforeEach(() => {
  received.length = 0;
  behaviours = [];
});

/** Posts `query` to the facade as the Router does for the `platform` subgraph: the caller's token and `x-gateway-cache: tags`. */
async function asTheRouter(
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-gateway-cache': 'tags',
      ...(await bearer('acme')),
      ...headers,
    },
    body: JSON.stringify({ query, variables }),
  });
  type Body = { data?: Record<string, unknown>; errors?: unknown[]; extensions?: Record<string, unknown> };
  return { cacheControl: response.headers.get('cache-control'), body: (await response.json()) as Body };
}

const ACCOUNTS =
  '{ customer(id: "cus_acme") { id accounts { nodes { id balances { currency available } } } } }';

/** The invalidations of the requests received, as the Router reads them. */
const invalidationsReceived = (): unknown[] =>
  received.flatMap((request) => JSON.parse(request.body) as unknown[]);

/** Waits until `facade_gateway_invalidations_total{gateway="router",outcome}` reaches `total`. */
async function invalidationsReach(outcome: 'done' | 'failed', total: number): Promise<void> {
  let counted = 0;
  await waitFor(
    () => counted === total,
    `${total} invalidations ${outcome}`,
    undefined,
    async () => {
      counted = await invalidationsCounted(outcome);
    },
  );
}

/** The count of `facade_gateway_invalidations_total` with these labels. */
async function invalidationsCounted(outcome: 'done' | 'failed'): Promise<number> {
  const { values } = await stack.app.metrics.gatewayInvalidations.get();
  return (
    values.find((value) => value.labels.gateway === 'router' && value.labels.outcome === outcome)?.value ?? 0
  );
}

describe('answers the Router may keep', () => {
  test('carry Cache-Control private with a max-age and the tags of every read, in apolloCacheTags', async () => {
    const { cacheControl, body } = await asTheRouter(ACCOUNTS);
    expect(cacheControl).toMatch(/^private, max-age=(2[0-9]|30)$/);
    expect(body.extensions).toEqual({
      apolloCacheTags: [
        'default:all:cus_acme',
        'default:collection:cus_acme:accounts',
        'default:customer:cus_acme',
        'default:everything',
        'default:list:cus_acme:accounts',
      ],
    });
  });

  test('of an _entities fetch carry one apolloEntityCacheTags entry per entity', async () => {
    const { cacheControl, body } = await asTheRouter(
      'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Account { id label } } }',
      {
        r: [
          { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_eth' },
          { __typename: 'Account', customerId: 'cus_acme', id: 'acc_acme_polygon' },
        ],
      },
    );
    expect(cacheControl).toMatch(/^private, max-age=\d+$/);
    const tags = body.extensions?.apolloEntityCacheTags as string[][];
    expect(tags).toHaveLength(2);
    expect(tags[0]).toContain('default:record:cus_acme:accounts:acc_acme_eth');
    expect(tags[1]).toEqual(tags[0]);
    expect(body.extensions).not.toHaveProperty('apolloCacheTags');
  });

  test('are never marked for a browser, for an answer with an error, a mutation or a @live query', async () => {
    const direct = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('acme')) },
      body: JSON.stringify({ query: ACCOUNTS }),
    });
    expect(direct.headers.get('cache-control')).toBe('no-store');
    expect(await direct.json()).not.toHaveProperty('extensions');
    const refused = await asTheRouter('{ customer(id: "cus_globex") { id } }');
    expect(refused).toMatchObject({ cacheControl: 'no-store', body: { data: { customer: null } } });
    expect(refused.body).not.toHaveProperty('extensions');
    const live = await asTheRouter(`query @live ${ACCOUNTS}`);
    expect(live.cacheControl).toBe('no-store');
    expect(live.body.extensions?.apolloCacheTags).toBeUndefined();
    const topUp = await asTheRouter(
      'mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", customerId: "cus_acme", amount: "1.00", currency: "USDC", idempotencyKey: "router-no-store" }) { topUp { state } } }',
    );
    expect(topUp.cacheControl).toBe('no-store');
    expect(topUp.body).not.toHaveProperty('extensions');
  });
});

describe("the facade's invalidations at the Router", () => {
  test('one POST per event, before its acknowledgement, with the shared key and the tags the kept answers carry', async () => {
    const { body } = await asTheRouter(ACCOUNTS);
    const answerTags = body.extensions?.apolloCacheTags as string[];
    const acknowledged = await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated());
    expect(acknowledged.status).toBe(200);
    // Received and answered before the acknowledgement: nothing to wait for.
    expect(received).toHaveLength(1);
    const [request] = received;
    expect(request).toMatchObject({ method: 'POST', path: '/invalidation' });
    expect(request!.headers.authorization).toBe(SHARED_KEY);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(JSON.parse(request!.body)).toEqual([
      {
        kind: 'cache_tag',
        subgraphs: ['platform'],
        cache_tag: 'default:record:cus_acme:accounts:acc_acme_eth',
      },
      { kind: 'cache_tag', subgraphs: ['platform'], cache_tag: 'default:list:cus_acme:accounts' },
    ]);
    expect(routerAnswer(request!).status).toBe(202);
    // The list the answer read is one of them: the Router drops that answer.
    expect(answerTags).toContain('default:list:cus_acme:accounts');
    // Heard again from the event log: not sent twice.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(received).toHaveLength(1);
  });

  test('one POST per write, before the write is answered', async () => {
    const topUp = await asTheRouter(
      'mutation { sandboxTopUp(input: { accountId: "acc_acme_eth", customerId: "cus_acme", amount: "1.00", currency: "USDC", idempotencyKey: "router-write" }) { topUp { state } } }',
    );
    expect(topUp.body.errors).toBeUndefined();
    expect(invalidationsReceived()).toEqual([
      { kind: 'cache_tag', subgraphs: ['platform'], cache_tag: 'default:all:cus_acme' },
      { kind: 'cache_tag', subgraphs: ['platform'], cache_tag: 'default:customers' },
    ]);
  });

  test('a 5xx is tried again until the Router takes it; the invalidation is counted done', async () => {
    const doneBefore = await invalidationsCounted('done');
    behaviours = [{ status: 500 }, { status: 503 }];
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    await waitFor(() => received.length === 3, 'the third attempt');
    expect(new Set(received.map((request) => request.body)).size).toBe(1);
    await invalidationsReach('done', doneBefore + 1);
  });

  test('a refusal is not tried again, counted failed, and never fails the webhook; the key is in no log', async () => {
    const failedBefore = await invalidationsCounted('failed');
    behaviours = [{ status: 401 }];
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    await invalidationsReach('failed', failedBefore + 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(received).toHaveLength(1);
    expect(stack.logs().some((line) => line.includes("a gateway's cache could not be told"))).toBe(true);
    expect(stack.logs().filter((line) => line.includes(SHARED_KEY))).toEqual([]);
  });

  test('a Router that does not answer holds the acknowledgement for GATEWAY_INVALIDATION_WAIT_MS at most', async () => {
    behaviours = ['hold'];
    const started = performance.now();
    expect((await postSignedEvent(stack.facade.webhookUrl, secret, acmeAccountUpdated())).status).toBe(200);
    expect(received).toHaveLength(1);
    // Acknowledged while the Router still holds its answer.
    expect(held).toHaveLength(1);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_900);
    const doneBefore = await invalidationsCounted('done');
    held.shift()!();
    await invalidationsReach('done', doneBefore + 1);
  });
});
