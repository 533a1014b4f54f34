import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createTrustedDocumentStore,
  loadTrustedDocuments,
  resolveTrustedDocument,
  TrustedDocumentsError,
} from '../../src/edge/trusted-documents.ts';

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
