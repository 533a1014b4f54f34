/**
 * The facade's HTTP surface: GraphQL over POST and GET, CSRF prevention, Apollo Sandbox for
 * browsers, liveness and readiness, and JSON answers for everything that is not GraphQL.
 */
import { describe, expect, test } from 'vitest';
import { useStack } from '../support/harness/stack.ts';
import { bearer } from '../support/tokens.ts';

const CUSTOMER_QUERY = '{ customer(id: "cus_acme") { id displayName } }';

// Each /readyz below must ask the upstream: no answer is reused (the cache has its own tests).
const stack = useStack({ env: { READINESS_CACHE_MS: '0' } });

function getUrl(query: string): string {
  return `${stack.graphqlUrl}?query=${encodeURIComponent(query)}`;
}

describe('GraphQL over HTTP', () => {
  test('a POST answers with the data and echoes the request id', async () => {
    const result = await stack.query(CUSTOMER_QUERY, {}, { 'x-request-id': 'post-1' });

    expect(result.status).toBe(200);
    expect(result.body).toEqual({ data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } } });
    expect(result.headers.get('x-request-id')).toBe('post-1');
  });

  test('a GET query with a preflight header answers as the GraphQL-over-HTTP spec describes', async () => {
    const response = await fetch(getUrl(CUSTOMER_QUERY), {
      headers: {
        accept: 'application/graphql-response+json',
        'apollo-require-preflight': 'true',
        ...(await bearer('operator')),
      },
    });

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    expect(await response.json()).toEqual({
      data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } },
    });
  });

  test('answers, with data or with errors, are marked not to be stored by any cache', async () => {
    const ok = await stack.query(CUSTOMER_QUERY);
    const failed = await stack.query('{ customer(id: "cus_acme") { noSuchField } }');

    expect(ok.status).toBe(200);
    expect(ok.headers.get('cache-control')).toBe('no-store');
    expect(failed.status).toBe(400);
    expect(failed.headers.get('cache-control')).toBe('no-store');
  });

  test('an answer goes out as written, with its exact length and no ETag', async () => {
    const response = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await bearer('operator')) },
      body: JSON.stringify({ query: CUSTOMER_QUERY }),
    });
    const body = await response.text();

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
    expect(response.headers.get('etag')).toBeNull();
    expect(JSON.parse(body)).toEqual({
      data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } },
    });
  });

  test('a GET without any header a browser form could not send is refused as possible CSRF', async () => {
    const response = await fetch(getUrl(CUSTOMER_QUERY), {
      headers: { accept: 'application/json', ...(await bearer('operator')) },
    });

    expect(response.status).toBe(400);
    const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
    expect(body.errors[0]?.extensions.code).toBe('BAD_REQUEST');
  });

  test('a mutation over GET is refused with 405', async () => {
    const mutation =
      'mutation { archiveAccount(input: { idempotencyKey: "runtime-http-1", customerId: "cus_acme", accountId: "acc_acme_bank" }) { replayed } }';
    const response = await fetch(getUrl(mutation), {
      headers: { 'apollo-require-preflight': 'true', ...(await bearer('operator')) },
    });

    expect(response.status).toBe(405);
  });

  test('a body that is not JSON is answered 400 in the GraphQL error shape', async () => {
    const response = await fetch(stack.graphqlUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query": ',
    });

    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      errors: [{ message: 'The request body is not valid JSON.', extensions: { code: 'BAD_REQUEST' } }],
    });
  });

  test("GraphQL's own validation errors pass through unmasked", async () => {
    const result = await stack.query('{ customer(id: "cus_acme") { noSuchField } }');

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(result.body.errors?.[0]?.message).toContain('noSuchField');
  });

  test('a variable that does not fit its type is BAD_USER_INPUT', async () => {
    const result = await stack.query('query ($first: Int) { customers(first: $first) { nodes { id } } }', {
      first: 'many',
    });

    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('Apollo Sandbox', () => {
  test('a browser GET of /graphql is served the Sandbox page', async () => {
    const response = await fetch(stack.graphqlUrl, { headers: { accept: 'text/html' } });

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await response.text();
    expect(html).toContain('https://embeddable-sandbox.cdn.apollographql.com/');
    expect(html).toContain('new window.EmbeddedSandbox(');
    expect(html).toContain('"runTelemetry":false');
  });
});

describe('health and readiness', () => {
  test('/healthz answers 200 while the process is up', async () => {
    const response = await fetch(`${stack.facadeUrl}/healthz`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  test('/readyz answers 200 when the upstream answers capability discovery', async () => {
    const response = await fetch(`${stack.facadeUrl}/readyz`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'ready',
      upstream: { reachable: true, environment: 'sandbox' },
    });
  });

  // An upstream outage is every replica's: it is reported, and never takes the replica out.
  test('/readyz answers 200 degraded when the upstream cannot be reached, asked once without retrying', async () => {
    await stack.resetUpstreamCalls();
    await stack.setFaults({ rules: [{ route: 'GET /v3/capabilities', kind: 'reset', rate: 1 }] });

    const response = await fetch(`${stack.facadeUrl}/readyz`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'degraded',
      upstream: { reachable: false, reason: 'connection_reset' },
    });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ 'GET /v3/capabilities': 1 });
  });

  test('/readyz answers 200 degraded when the upstream returns an error, unreachable as apiStatus says', async () => {
    await stack.setFaults({ rules: [{ route: 'GET /v3/capabilities', kind: 'request_failed', rate: 1 }] });

    const response = await fetch(`${stack.facadeUrl}/readyz`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'degraded',
      // A 5xx is no usable answer: unreachable, as apiStatus says too.
      upstream: { reachable: false, reason: 'request_failed' },
    });
    const status = await stack.query<{ apiStatus: { reachable: boolean; problemCode: string } }>(
      '{ apiStatus { reachable problemCode } }',
    );
    expect(status.body.data).toEqual({ apiStatus: { reachable: false, problemCode: 'request_failed' } });
  });

  test('an unknown path is a JSON 404', async () => {
    const response = await fetch(`${stack.facadeUrl}/nowhere`);

    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      errors: [{ message: 'Not found.', extensions: { code: 'NOT_FOUND' } }],
    });
  });
});

describe('with a facade key the upstream refuses', () => {
  const refused = useStack({ env: { UPSTREAM_API_KEY: 'sk_sandbox_revoked', READINESS_CACHE_MS: '0' } });

  // The key is every replica's (one Secret): refused, it is reported, and the replica stays in.
  test('/readyz answers 200 degraded with the reason', async () => {
    const response = await fetch(`${refused.facadeUrl}/readyz`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: 'degraded',
      upstream: { reachable: true, reason: 'unauthorized' },
    });
    // The log says what is true: the upstream is degraded and the replica stays ready.
    const lines = refused.logs().map((line) => JSON.parse(line) as { msg: string; reason?: string });
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'upstream degraded; the replica stays ready', reason: 'unauthorized' }),
    );
    expect(lines.filter(({ msg }) => msg === 'not ready')).toEqual([]);
  });
});
