/**
 * Batched operations: `POST /graphql` with a JSON array, as Apollo Client 4's `BatchHttpLink`
 * sends it. Each operation is admitted on its own (its budget, its cost, its trusted document, the
 * caller's scope) and answered in its place with its own errors; the operations of one batch read
 * each upstream record once between them (the emulator's exact counts, with the response cache
 * off so that nothing else shares reads); a mutation runs in its place, so a query after it reads
 * what it wrote; and every batch the facade will not run is refused whole with one clear error
 * before the door is asked anything: too large (ten thousand operations, or one over
 * `HTTP_BATCH_MAX_OPERATIONS`), over GET, from no caller, from a hostile origin.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql, HttpLink, InMemoryCache, type ApolloLink } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startStack, useStack, type Stack } from '../support/harness/stack.ts';
import { tokenFor } from '../support/tokens.ts';

const CUSTOMER_ROUTE = 'GET /v3/customers/{customerId}';
const ACCOUNTS_ROUTE = 'GET /v3/customers/{customerId}/accounts';

const NAME = 'query Name { customer(id: "cus_acme") { id displayName } }';
const STATUS = 'query Status { customer(id: "cus_acme") { id status } }';
const ACCOUNTS = 'query Accounts { customer(id: "cus_acme") { id accounts { nodes { id } } } }';

type Json = Record<string, unknown>;
type Answer = { data?: Json | null; errors?: { message: string; extensions?: { code?: string } }[] };

/** POSTs `body` (a batch, or anything) to the facade as `authorization`; the status and JSON answer. */
async function postBatch(
  stack: Stack,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; body: Answer[] & Answer; headers: Headers }> {
  const response = await fetch(stack.graphqlUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    body: (await response.json()) as Answer[] & Answer,
    headers: response.headers,
  };
}

const as = async (caller: 'acme' | 'operator') => ({ authorization: `Bearer ${await tokenFor(caller)}` });
const codes = (answer: Answer) => answer.errors?.map((error) => error.extensions?.code);

/** Apollo Client 4 over `link`, counting the HTTP requests it sends. */
function apolloClient(stack: Stack, authorization: string, batched: boolean) {
  let requests = 0;
  const counting: typeof fetch = (input, init) => {
    requests += 1;
    return fetch(input, init);
  };
  const options = { uri: stack.graphqlUrl, headers: { authorization }, fetch: counting };
  const link: ApolloLink = batched
    ? new BatchHttpLink({ ...options, batchInterval: 20 })
    : new HttpLink(options);
  const client = new ApolloClient({ link, cache: new InMemoryCache() });
  return { client, requests: () => requests };
}

describe('BatchHttpLink', () => {
  // The response cache off: only the batch's own shared reads can save a call.
  const stack = useStack({ env: { CACHE_ENABLED: 'false' } });

  test('one request for three queries, each answered, the customer read once between them', async () => {
    const { client, requests } = apolloClient(stack, (await as('acme')).authorization, true);
    await stack.resetUpstreamCalls();
    const answers = await Promise.all(
      [NAME, STATUS, ACCOUNTS].map((query) => client.query({ query: gql(query) })),
    );
    expect(requests()).toBe(1);
    expect(answers.map((answer) => answer.error)).toEqual([undefined, undefined, undefined]);
    expect(answers[0]!.data).toMatchObject({
      customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' },
    });
    expect(answers[2]!.data).toMatchObject({ customer: { accounts: { nodes: expect.any(Array) } } });
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 1, [ACCOUNTS_ROUTE]: 1 });
    // Each operation is its own: three lines in the log, three in the metrics.
    const lines = stack
      .logs()
      .map((line) => JSON.parse(line) as Json)
      .filter(
        (line) =>
          line['msg'] === 'graphql operation' &&
          ['Name', 'Status', 'Accounts'].includes(line['operationName'] as string),
      );
    expect(lines).toHaveLength(3);
    client.stop();
  });

  test('the same queries without batching cost a read each (what the batch saved)', async () => {
    const { client, requests } = apolloClient(stack, (await as('acme')).authorization, false);
    await stack.resetUpstreamCalls();
    await Promise.all([NAME, STATUS, ACCOUNTS].map((query) => client.query({ query: gql(query) })));
    expect(requests()).toBe(3);
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 3, [ACCOUNTS_ROUTE]: 1 });
    client.stop();
  });

  test('answers in order, each with its own errors: another customer, an invalid document, a subscription', async () => {
    await stack.resetUpstreamCalls();
    const { status, body } = await postBatch(
      stack,
      [
        { query: NAME },
        { query: '{ customer(id: "cus_globex") { id } }' },
        { query: '{ customer(id: "cus_acme") { noSuchField } }' },
        { query: 'subscription { accountChanged(customerId: "cus_acme") { eventId } }' },
        { query: STATUS },
      ],
      await as('acme'),
    );
    expect(status).toBe(200);
    expect(body).toHaveLength(5);
    expect(body[0]).toEqual({ data: { customer: { id: 'cus_acme', displayName: 'Acme Robotics Ltd' } } });
    expect({ data: body[1]!.data, codes: codes(body[1]!) }).toEqual({
      data: { customer: null },
      codes: ['NOT_FOUND'],
    });
    expect(codes(body[2]!)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(codes(body[3]!)).toEqual(['BAD_REQUEST']);
    expect(body[3]!.errors![0]!.message).toContain('Subscriptions are not served by POST /graphql');
    expect(body[4]).toEqual({ data: { customer: { id: 'cus_acme', status: expect.any(String) } } });
    // Another customer's read and the refused documents cost nothing: the two acme reads share one.
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 1 });
  });

  test('a mutation runs in its place: the query before it reads the old balance, the one after the new', async () => {
    const balance =
      '{ account(customerId: "cus_ada", id: "acc_ada_polygon") { balances { currency available } } }';
    const usdc = (answer: Answer) =>
      Number(
        (
          answer.data as { account: { balances: { currency: string; available: string }[] } }
        ).account.balances.find((held) => held.currency === 'USDC')?.available ?? 0,
      );
    const { status, body } = await postBatch(
      stack,
      [
        { query: balance },
        {
          query: 'mutation ($input: SandboxTopUpInput!) { sandboxTopUp(input: $input) { topUp { id } } }',
          variables: {
            input: {
              accountId: 'acc_ada_polygon',
              amount: '5.00',
              currency: 'USDC',
              idempotencyKey: `batch-${Date.now()}`,
            },
          },
        },
        { query: balance },
      ],
      await as('operator'),
    );
    expect(status).toBe(200);
    expect(body[1]!.errors).toBeUndefined();
    expect(usdc(body[2]!)).toBe(usdc(body[0]!) + 5);
  });
});

describe('batches refused whole', () => {
  const stack = useStack({ env: { CORS_ORIGINS: 'https://app.example.com' } });
  const steps: string[] = [];
  beforeAll(() => {
    stack.app.lifecycle.on('admissionStep', ({ step }) => steps.push(step));
  });

  /** What must hold after each: one clear error, the door never asked, nothing upstream. */
  async function refusedWhole(answer: { status: number; body: Answer }, status: number, code: string) {
    expect(answer.status).toBe(status);
    expect(Array.isArray(answer.body)).toBe(false);
    expect(codes(answer.body)).toEqual([code]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  }

  test('a batch of 10,000 operations over the body limit (64 KiB): 413, one error, nothing run', async () => {
    steps.length = 0;
    const batch = Array.from({ length: 10_000 }, () => ({ query: NAME }));
    await refusedWhole(await postBatch(stack, batch, await as('acme')), 413, 'BAD_REQUEST');
    expect(steps).toEqual([]);
  });

  test('10,000 operations small enough for the body limit (`{}` each): 413 BATCH_TOO_LARGE, nothing read, nothing run', async () => {
    steps.length = 0;
    const batch = Array.from({ length: 10_000 }, () => ({}));
    const answer = await postBatch(stack, batch, await as('acme'));
    await refusedWhole(answer, 413, 'BATCH_TOO_LARGE');
    expect(answer.body.errors![0]!.message).toContain('this one holds 10000');
    expect(steps).toEqual([]);
  });

  test('one operation over HTTP_BATCH_MAX_OPERATIONS: 413 BATCH_TOO_LARGE saying the most, before who sent it is asked', async () => {
    steps.length = 0;
    const batch = Array.from({ length: 11 }, () => ({ query: '{ __typename }' }));
    const answer = await postBatch(stack, batch, await as('acme'));
    await refusedWhole(answer, 413, 'BATCH_TOO_LARGE');
    expect(answer.body.errors![0]).toEqual({
      message: 'A batch may hold at most 10 operations; this one holds 11: send it in smaller batches.',
      extensions: { code: 'BATCH_TOO_LARGE', maxOperations: 10 },
    });
    // The same from no caller at all: the size is read before anyone is verified.
    await refusedWhole(await postBatch(stack, batch, {}), 413, 'BATCH_TOO_LARGE');
    expect(steps).toEqual([]);
  });

  test('an empty batch: 400, one error', async () => {
    const answer = await postBatch(stack, [], await as('acme'));
    await refusedWhole(answer, 400, 'GRAPHQL_PARSE_FAILED');
    expect(answer.body.errors![0]!.message).toBe('The batch holds no operation: send at least one.');
  });

  test('elements that name no operation: each its own parse error, the others run', async () => {
    const { status, body } = await postBatch(
      stack,
      [1, { query: '{ __typename }' }, null, {}],
      await as('acme'),
    );
    expect(status).toBe(200);
    expect(body.map((answer: Answer) => codes(answer) ?? answer.data)).toEqual([
      ['GRAPHQL_PARSE_FAILED'],
      { __typename: 'Query' },
      ['GRAPHQL_PARSE_FAILED'],
      ['GRAPHQL_PARSE_FAILED'],
    ]);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a batch from no caller: 401, nothing run', async () => {
    await refusedWhole(
      await postBatch(stack, [{ query: NAME }, { query: STATUS }], {}),
      401,
      'UNAUTHENTICATED',
    );
  });

  test('a batch over GET is no batch: one parse error, nothing run', async () => {
    const query = JSON.stringify([{ query: NAME }, { query: STATUS }]);
    const response = await fetch(`${stack.graphqlUrl}?query=${encodeURIComponent(query)}`, {
      headers: { ...(await as('acme')), 'apollo-require-preflight': 'true' },
    });
    const body = (await response.json()) as Answer;
    expect(Array.isArray(body)).toBe(false);
    expect(codes(body)).toEqual(['GRAPHQL_PARSE_FAILED']);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });

  test('a batch from a hostile browser origin: its preflight refused, so the browser never sends it', async () => {
    // A JSON POST is never a simple request: the browser asks first, and this answer stops it.
    const preflight = await fetch(stack.graphqlUrl, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://evil.example.net',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(preflight.status).toBe(403);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect(codes((await preflight.json()) as Answer)).toEqual(['FORBIDDEN']);
    expect((await stack.upstreamCalls()).total).toBe(0);
  });
});

describe('each operation of a batch admitted on its own', () => {
  let stack: Stack;
  const LISTED = 'query Listed { customer(id: "cus_acme") { id } }';
  const COSTLY = 'query Costly { customers(first: 60) { nodes { id } } }';
  beforeAll(async () => {
    const directory = await mkdtemp(join(tmpdir(), 'batch-trusted-'));
    const manifest = join(directory, 'manifest.json');
    await writeFile(manifest, JSON.stringify({ 'listed-v1': LISTED, 'costly-v1': COSTLY }));
    stack = await startStack({
      env: { TRUSTED_DOCUMENTS: manifest, RATE_LIMIT_REQUESTS: '6', QUERY_MAX_COST: '50' },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  test('trusted and untrusted documents in one batch: the listed ones run, by id or by text', async () => {
    await stack.resetUpstreamCalls();
    const { status, body } = await postBatch(
      stack,
      [{ documentId: 'listed-v1' }, { query: NAME }, { query: LISTED }],
      await as('acme'),
    );
    expect(status).toBe(200);
    expect(body[0]).toEqual({ data: { customer: { id: 'cus_acme' } } });
    expect(codes(body[1]!)).toEqual(['PERSISTED_QUERY_NOT_IN_LIST']);
    expect(body[2]).toEqual({ data: { customer: { id: 'cus_acme' } } });
    // The two listed ones read acme once between them; the untrusted one, nothing.
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 1 });
  });

  test('each spends its own operation budget, and one too costly is refused alone', async () => {
    await stack.resetUpstreamCalls();
    // Three of acme's six were spent above; of a batch of four, the costly one spends its own
    // too, and the last is over.
    const { status, body, headers } = await postBatch(
      stack,
      [
        { documentId: 'listed-v1' },
        { documentId: 'costly-v1' },
        { documentId: 'listed-v1' },
        { documentId: 'listed-v1' },
      ],
      await as('acme'),
    );
    expect(status).toBe(200);
    expect(body.map((answer: Answer) => codes(answer) ?? [])).toEqual([
      [],
      ['GRAPHQL_VALIDATION_FAILED'],
      [],
      ['RATE_LIMITED'],
    ]);
    expect(headers.get('ratelimit')).toContain('r=0');
    expect((await stack.upstreamCalls()).byRoute).toEqual({ [CUSTOMER_ROUTE]: 1 });
  });
});
