import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloServer } from '@apollo/server';
import { expressMiddleware } from '@as-integrations/express5';
import express, { type RequestHandler } from 'express';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  createTrustedDocumentStore,
  loadTrustedDocuments,
  resolveTrustedDocument,
  trustedDocumentsMiddleware,
  TrustedDocumentsError,
  type TrustedDocumentStore,
} from '../../src/graph/trusted-documents.ts';

const GREETING = 'query Greeting($name: String) { hello(name: $name) }';
const PING = 'query Ping { hello }';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'trusted-documents-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function manifestFile(name: string, content: unknown): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return path;
}

/** As @apollo/generate-persisted-query-manifest writes it (ids are the bodies' SHA-256 by default). */
const apolloManifest = {
  format: 'apollo-persisted-query-manifest',
  version: 1,
  operations: [
    { id: sha256(GREETING), name: 'Greeting', type: 'query', body: GREETING },
    { id: 'ping-v1', name: 'Ping', type: 'query', body: PING },
  ],
};

/** As graphql-codegen's client preset writes persisted-documents.json. */
const codegenManifest = { [sha256(GREETING)]: GREETING, [sha256(PING)]: PING };

describe('loadTrustedDocuments', () => {
  test('reads an Apollo persisted query manifest', async () => {
    const store = await loadTrustedDocuments(await manifestFile('apollo.json', apolloManifest));
    expect(store.size).toBe(2);
    expect(store.findById(sha256(GREETING))).toBe(GREETING);
    expect(store.findById('ping-v1')).toBe(PING);
    // A custom id is still found by the body's hash, which is what Apollo Client's APQ link sends.
    expect(store.findById(sha256(PING))).toBe(PING);
    expect(store.isTrustedBody(PING)).toBe(true);
  });

  test('reads a graphql-codegen persisted-documents map', async () => {
    const store = await loadTrustedDocuments(await manifestFile('persisted-documents.json', codegenManifest));
    expect(store.size).toBe(2);
    expect(store.findById(sha256(PING))).toBe(PING);
    expect(store.findById(`sha256:${sha256(PING)}`)).toBe(PING);
    expect(store.isTrustedBody(GREETING)).toBe(true);
    expect(store.isTrustedBody(`${GREETING} `)).toBe(false);
  });

  test.each([
    ['a missing file', undefined, /"[^"]*missing\.json" cannot be read: ENOENT/],
    ['bad JSON', '{"format": ', /is not JSON/],
    ['a JSON array', '[]', /is neither an Apollo persisted query manifest .* nor a graphql-codegen/],
    ['a JSON string', '"query { a }"', /is neither/],
    ['another format', { format: 'relay', version: 1, operations: [] }, /has format "relay"/],
    ['another version', { ...apolloManifest, version: 2 }, /has version 2; only version 1/],
    ['no operations', { format: 'apollo-persisted-query-manifest', version: 1 }, /has no "operations" array/],
    [
      'an operation without a body',
      { ...apolloManifest, operations: [{ id: 'a', name: 'A', type: 'query' }] },
      /operations\[0\]/,
    ],
    [
      'a duplicate id',
      { ...apolloManifest, operations: [...apolloManifest.operations, { id: 'ping-v1', body: '{ hello }' }] },
      /lists the id "ping-v1" more than once/,
    ],
    [
      'a map entry that is not a document',
      { abc: 'query { a }', def: 42 },
      /the entry "def" is not a document/,
    ],
    ['an empty map', {}, /lists no operation/],
    ['an empty operation list', { ...apolloManifest, operations: [] }, /lists no operation/],
  ])('refuses %s with a clear error naming the file', async (_what, content, message) => {
    const path = content === undefined ? join(dir, 'missing.json') : await manifestFile('bad.json', content);
    const error = await loadTrustedDocuments(path).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(TrustedDocumentsError);
    expect((error as Error).message).toContain(JSON.stringify(path));
    expect((error as Error).message).toMatch(message);
  });
});

describe('resolveTrustedDocument', () => {
  const store = createTrustedDocumentStore([
    ['greeting-v1', GREETING],
    ['ping-v1', PING],
  ]);

  test.each([
    ['a documentId', { documentId: 'greeting-v1' }, GREETING],
    ['a sha256: documentId', { documentId: `sha256:${sha256(PING)}` }, PING],
    [
      'an Apollo persisted-query hash',
      { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(PING) } } },
      PING,
    ],
    ['an id', { id: 'ping-v1' }, PING],
    ['an id with its own body beside it', { id: 'ping-v1', query: PING }, PING],
    [
      'a hash with its own body (APQ registration)',
      { query: PING, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(PING) } } },
      PING,
    ],
    ['a byte-identical body', { query: GREETING, variables: { name: 'x' } }, GREETING],
  ])('runs %s', (_what, request, query) => {
    expect(resolveTrustedDocument(store, request)).toEqual({ ok: true, query });
  });

  test.each([
    ['an unknown documentId', { documentId: 'nope' }, 'unknown-id'],
    [
      'an unknown hash',
      { extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ x }') } } },
      'unknown-id',
    ],
    ['an unknown id with a listed body', { id: 'nope', query: PING }, 'unknown-id'],
    [
      'a listed id with another body',
      { documentId: 'ping-v1', query: '{ __schema { types { name } } }' },
      'id-and-query-differ',
    ],
    ['a body not listed', { query: '{ __schema { types { name } } }' }, 'untrusted-query'],
    ['a listed body with different spacing', { query: GREETING.replace(' {', '{') }, 'untrusted-query'],
    ['no operation', { query: undefined }, 'no-operation'],
    ['a query that is not a string', { query: { kind: 'Document' } }, 'no-operation'],
  ])('refuses %s', (_what, request, reason) => {
    expect(resolveTrustedDocument(store, request)).toEqual({ ok: false, reason });
  });
});

/** A real server: JSON body parser, the middleware, then a handler that counts what reaches it. */
async function startCountingServer(store: TrustedDocumentStore, next: RequestHandler) {
  const app = express();
  app.use(
    '/graphql',
    express.json(),
    (req, res, proceed) => {
      res.locals.operator = req.get('x-test-operator') === 'yes';
      proceed();
    },
    trustedDocumentsMiddleware({ store, isExempt: (_req, res) => res.locals.operator === true }),
    next,
  );
  const server = http.createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql` };
}

const REFUSAL = {
  errors: [
    {
      message: 'This operation is not in the list of trusted documents.',
      extensions: { code: 'PERSISTED_QUERY_NOT_IN_LIST' },
    },
  ],
};

describe('trustedDocumentsMiddleware before a counting handler', () => {
  let server: http.Server;
  let url: string;
  const reached: { method: string; query: unknown; url: string }[] = [];

  beforeAll(async () => {
    const store = createTrustedDocumentStore([['ping-v1', PING]]);
    ({ server, url } = await startCountingServer(store, (req, res) => {
      const query =
        req.method === 'GET' ? new URL(req.url, 'http://x').searchParams.get('query') : req.body?.query;
      reached.push({ method: req.method, query, url: req.url });
      res.json({ reached: true });
    }));
  });
  afterAll(() => {
    server.close();
  });
  beforeEach(() => {
    reached.length = 0;
  });

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  test('a listed id reaches the handler with the stored body in place', async () => {
    const response = await post({ documentId: 'ping-v1' });
    expect(response.status).toBe(200);
    expect(reached).toEqual([{ method: 'POST', query: PING, url: '/' }]);
  });

  test('an unlisted query is refused 400 PERSISTED_QUERY_NOT_IN_LIST and never reaches the handler', async () => {
    const response = await post({ query: '{ __typename }' });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual(REFUSAL);
    expect(reached).toEqual([]);
  });

  test('a batch is refused unless exempt', async () => {
    expect((await post([{ documentId: 'ping-v1' }])).status).toBe(400);
    expect(reached).toEqual([]);
  });

  test('an exempt caller (operator, Sandbox) runs any operation', async () => {
    const response = await post({ query: '{ __typename }' }, { 'x-test-operator': 'yes' });
    expect(response.status).toBe(200);
    expect(reached).toEqual([{ method: 'POST', query: '{ __typename }', url: '/' }]);
  });

  test('GET: a listed id gets its body put into the URL; an unlisted query is refused', async () => {
    const listed = await fetch(`${url}?documentId=ping-v1&variables=%7B%7D`);
    expect(listed.status).toBe(200);
    expect(reached).toHaveLength(1);
    expect(reached[0]!.query).toBe(PING);
    expect(new URL(reached[0]!.url, 'http://x').searchParams.get('variables')).toBe('{}');

    const unlisted = await fetch(`${url}?query=${encodeURIComponent('{ __typename }')}`);
    expect(unlisted.status).toBe(400);
    expect(await unlisted.json()).toEqual(REFUSAL);
    expect(reached).toHaveLength(1);
  });

  test('a request naming no operation (the Sandbox page, an empty body) is left to Apollo', async () => {
    expect((await fetch(url, { headers: { accept: 'text/html' } })).status).toBe(200);
    expect((await post({})).status).toBe(200);
    expect(reached).toHaveLength(2);
  });
});

describe('trustedDocumentsMiddleware in front of Apollo Server', () => {
  let server: http.Server;
  let url: string;
  let apollo: ApolloServer;
  let resolved = 0;

  beforeAll(async () => {
    apollo = new ApolloServer({
      typeDefs: 'type Query { hello(name: String): String }',
      resolvers: {
        Query: {
          hello: (_parent: unknown, args: { name?: string }) => {
            resolved += 1;
            return `hello ${args.name ?? 'world'}`;
          },
        },
      },
    });
    await apollo.start();
    const store = await loadTrustedDocuments(await manifestFile('apollo-for-server.json', apolloManifest));
    ({ server, url } = await startCountingServer(store, expressMiddleware(apollo)));
  });
  afterAll(async () => {
    server.close();
    await apollo.stop();
  });
  beforeEach(() => {
    resolved = 0;
  });

  const post = (body: unknown) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  test('POST by documentId runs the stored operation', async () => {
    const response = await post({ documentId: sha256(GREETING), variables: { name: 'Ada' } });
    expect(await response.json()).toEqual({ data: { hello: 'hello Ada' } });
    expect(resolved).toBe(1);
  });

  test('an Apollo persisted-query hash alone runs the stored operation', async () => {
    const response = await post({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256(PING) } } });
    expect(await response.json()).toEqual({ data: { hello: 'hello world' } });
  });

  test('GET by documentId runs the stored operation', async () => {
    const response = await fetch(`${url}?documentId=ping-v1`, {
      headers: { 'apollo-require-preflight': 'true' },
    });
    expect(await response.json()).toEqual({ data: { hello: 'hello world' } });
  });

  test('an unlisted operation is refused before Apollo parses or resolves anything', async () => {
    const response = await post({ query: '{ hello(name: "intruder") }' });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(REFUSAL);
    // Even a syntax error is never seen by Apollo: the refusal comes first.
    const garbage = await post({ query: '{ hello(' });
    expect(await garbage.json()).toEqual(REFUSAL);
    expect(resolved).toBe(0);
  });
});
