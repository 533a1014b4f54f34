/**
 * Trusted documents (persisted operations): when `TRUSTED_DOCUMENTS` names a manifest, the facade
 * runs only the operations its own clients were built with, so nobody else can send it costly or
 * probing queries. A request names its operation by id (`documentId`, Apollo's persisted-query hash,
 * or `id`), or sends a body byte-identical to a listed one. The door resolves it before anything is
 * parsed (`door.ts`); operators are exempt, and so Apollo Sandbox in their hands.
 *
 * Both manifest formats real tooling writes are read: Apollo's persisted query manifest
 * (`@apollo/generate-persisted-query-manifest`) and graphql-codegen client-preset's
 * `persisted-documents.json`. See docs/security.md.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Logger } from '../logger.ts';

/** The operations a manifest lists. */
export interface TrustedDocumentStore {
  /** How many operations are listed. */
  readonly size: number;
  /** The body listed under `id` (also found by `sha256:<hex>` and by the body's SHA-256 hex). */
  findById(id: string): string | undefined;
  /** Whether `query` is, byte for byte, the body of a listed operation. */
  isTrustedBody(query: string): boolean;
  /** Every listed `[id, body]`, in the manifest's order (the MCP endpoint's tools are made from them). */
  entries(): Iterable<readonly [id: string, body: string]>;
}

/** Thrown by {@link loadTrustedDocuments}: the manifest is missing, not JSON, or not a manifest. */
export class TrustedDocumentsError extends Error {
  constructor(path: string, problem: string) {
    super(`Trusted documents manifest ${JSON.stringify(path)} ${problem}`);
    this.name = 'TrustedDocumentsError';
  }
}

/** Builds a store from `[id, body]` pairs; a repeated id is refused (see {@link loadTrustedDocuments}). */
export function createTrustedDocumentStore(
  entries: Iterable<readonly [id: string, body: string]>,
): TrustedDocumentStore {
  const byId = new Map<string, string>();
  const bySha256 = new Map<string, string>();
  for (const [id, body] of entries) {
    if (byId.has(id)) throw new Error(`lists the id ${JSON.stringify(id)} more than once`);
    byId.set(id, body);
    // Apollo Client's persisted-query link sends the body's SHA-256 whatever id the manifest used.
    bySha256.set(sha256Hex(body), body);
  }
  const bodies = new Set(byId.values());
  return {
    size: byId.size,
    findById(id) {
      const direct = byId.get(id);
      if (direct !== undefined) return direct;
      // The GraphQL-over-HTTP persisted documents draft prefixes SHA-256 ids with `sha256:`.
      const hash = /^sha256:([0-9a-f]{64})$/i.exec(id)?.[1] ?? (/^[0-9a-f]{64}$/i.test(id) ? id : undefined);
      return hash === undefined ? undefined : bySha256.get(hash.toLowerCase());
    },
    isTrustedBody: (query) => bodies.has(query),
    entries: () => byId.entries(),
  };
}

/**
 * Reads the manifest at `path`: Apollo's `{ "format": "apollo-persisted-query-manifest", "version": 1,
 * "operations": [{ "id", "name", "type", "body" }] }` or graphql-codegen's `{ "<hash>": "<document>" }`.
 *
 * @throws {TrustedDocumentsError} when the file cannot be read, is not JSON, is neither format,
 * lists an id twice, or lists nothing.
 */
export async function loadTrustedDocuments(path: string): Promise<TrustedDocumentStore> {
  const entries = await loadTrustedDocumentEntries(path);
  try {
    return createTrustedDocumentStore(entries);
  } catch (error) {
    throw new TrustedDocumentsError(path, (error as Error).message);
  }
}

/**
 * The `[id, body]` pairs of the manifest at `path`, read as {@link loadTrustedDocuments} reads them
 * (the schema check, `scripts/check-schema.ts`, validates the same bodies the door admits).
 *
 * @throws {TrustedDocumentsError} when the file cannot be read, is not JSON, is neither format, or
 * lists nothing.
 */
export async function loadTrustedDocumentEntries(path: string): Promise<[id: string, body: string][]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new TrustedDocumentsError(
      path,
      `cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
    );
  }
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch (error) {
    throw new TrustedDocumentsError(path, `is not JSON: ${(error as Error).message}`);
  }
  let entries: [string, string][];
  try {
    entries = manifestEntries(manifest);
  } catch (error) {
    throw new TrustedDocumentsError(path, (error as Error).message);
  }
  if (entries.length === 0)
    throw new TrustedDocumentsError(path, 'lists no operation: every request would be refused');
  return entries;
}

const APOLLO_FORMAT = 'apollo-persisted-query-manifest';
const NEITHER_FORMAT =
  `is neither an Apollo persisted query manifest ({ "format": "${APOLLO_FORMAT}", "version": 1, ` +
  `"operations": [...] }) nor a graphql-codegen persisted-documents map ({ "<hash>": "<document>" })`;

function manifestEntries(manifest: unknown): [string, string][] {
  if (!isRecord(manifest)) throw new Error(NEITHER_FORMAT);
  if ('format' in manifest) return apolloEntries(manifest);
  // graphql-codegen client-preset: every value a document.
  const entries = Object.entries(manifest);
  const bad = entries.find(([id, body]) => id === '' || typeof body !== 'string' || body.trim() === '');
  if (bad !== undefined)
    throw new Error(`${NEITHER_FORMAT}: the entry ${JSON.stringify(bad[0])} is not a document`);
  return entries as [string, string][];
}

function apolloEntries(manifest: Record<string, unknown>): [string, string][] {
  if (manifest['format'] !== APOLLO_FORMAT) {
    throw new Error(
      `has format ${JSON.stringify(manifest['format'])}; expected ${JSON.stringify(APOLLO_FORMAT)}`,
    );
  }
  if (manifest['version'] !== 1) {
    throw new Error(`has version ${JSON.stringify(manifest['version'])}; only version 1 is understood`);
  }
  const operations = manifest['operations'];
  if (!Array.isArray(operations)) throw new Error('has no "operations" array');
  return operations.map((operation: unknown, index) => {
    if (
      !isRecord(operation) ||
      typeof operation['id'] !== 'string' ||
      operation['id'] === '' ||
      typeof operation['body'] !== 'string' ||
      operation['body'].trim() === ''
    ) {
      throw new Error(`has an operation without a string "id" and "body" at operations[${index}]`);
    }
    return [operation['id'], operation['body']];
  });
}

/**
 * `manifest` with the facade's own documents listed beside it (the MCP endpoint's resource reads,
 * under ids of their own): found first by their ids, trusted by their bodies. Undefined when there
 * is no manifest: then every document is accepted anyway. `manifest` is read at each call, so its
 * reloads show through.
 */
export function withOwnDocuments(
  manifest: TrustedDocumentStore | undefined,
  own: Iterable<readonly [id: string, body: string]>,
): TrustedDocumentStore | undefined {
  if (manifest === undefined) return undefined;
  const ownStore = createTrustedDocumentStore(own);
  return {
    get size() {
      return manifest.size + ownStore.size;
    },
    findById: (id) => ownStore.findById(id) ?? manifest.findById(id),
    isTrustedBody: (query) => ownStore.isTrustedBody(query) || manifest.isTrustedBody(query),
    *entries() {
      yield* ownStore.entries();
      yield* manifest.entries();
    },
  };
}

/** What a GraphQL request may carry to name its operation. */
export interface TrustedDocumentRequest {
  query?: unknown;
  /** GraphQL-over-HTTP persisted documents draft. */
  documentId?: unknown;
  /** Relay and some older clients. */
  id?: unknown;
  /** Apollo's automatic persisted queries: `{ persistedQuery: { version: 1, sha256Hash } }`. */
  extensions?: unknown;
  /** The client's name for the operation (only logged: an unlisted one in log-only mode). */
  operationName?: unknown;
}

export type TrustedDocumentResolution =
  | { ok: true; query: string }
  | { ok: false; reason: 'unknown-id' | 'untrusted-query' | 'id-and-query-differ' | 'no-operation' };

/**
 * The operation to run for `request`, or why it is refused:
 * - an id (`documentId`, `extensions.persistedQuery.sha256Hash` or `id`) on the list: its stored
 *   body; a `query` sent beside it must be that very body;
 * - no id: the request's own `query` when it is byte-identical to a listed body.
 */
export function resolveTrustedDocument(
  store: TrustedDocumentStore,
  request: TrustedDocumentRequest,
): TrustedDocumentResolution {
  const query = typeof request.query === 'string' ? request.query : undefined;
  const id = idOf(request);
  if (id !== undefined) {
    const stored = store.findById(id);
    if (stored === undefined) return { ok: false, reason: 'unknown-id' };
    if (query !== undefined && query !== stored) return { ok: false, reason: 'id-and-query-differ' };
    return { ok: true, query: stored };
  }
  if (query === undefined) return { ok: false, reason: 'no-operation' };
  return store.isTrustedBody(query) ? { ok: true, query } : { ok: false, reason: 'untrusted-query' };
}

function idOf(request: TrustedDocumentRequest): string | undefined {
  if (typeof request.documentId === 'string') return request.documentId;
  const persisted = isRecord(request.extensions) ? request.extensions['persistedQuery'] : undefined;
  if (isRecord(persisted) && typeof persisted['sha256Hash'] === 'string') return persisted['sha256Hash'];
  if (typeof request.id === 'string') return request.id;
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A manifest that can be read again while the facade runs (see {@link createReloadableTrustedDocuments}). */
export interface ReloadableTrustedDocuments extends TrustedDocumentStore {
  /**
   * Reads the manifest again. A manifest that reads and parses replaces the old one for every
   * request from then on; one that does not leaves the old one in place. Never rejects.
   */
  reload(): Promise<{ ok: true; size: number } | { ok: false; problem: string }>;
  /** Calls `listener` after each reload that replaced the manifest; answers the function that stops it. */
  onReload(listener: () => void): () => void;
}

/**
 * The manifest at `path`, read now (a start with a bad manifest is refused: it throws
 * {@link TrustedDocumentsError}) and again on each {@link ReloadableTrustedDocuments.reload}. A
 * reload swaps the whole store at once, so a request sees either the old list or the new one.
 */
export async function createReloadableTrustedDocuments(
  path: string,
  logger: Logger,
): Promise<ReloadableTrustedDocuments> {
  let current = await loadTrustedDocuments(path);
  const listeners = new Set<() => void>();
  return {
    get size() {
      return current.size;
    },
    findById: (id) => current.findById(id),
    isTrustedBody: (query) => current.isTrustedBody(query),
    entries: () => current.entries(),
    onReload(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    async reload() {
      try {
        const next = await loadTrustedDocuments(path);
        current = next;
        logger.info('trusted documents reloaded', { operations: next.size });
        for (const listener of listeners) {
          try {
            listener();
          } catch (error) {
            logger.error('a listener of the trusted documents failed on reload', { error });
          }
        }
        return { ok: true, size: next.size };
      } catch (error) {
        const problem = error instanceof Error ? error.message : String(error);
        logger.error('trusted documents not reloaded: the previous manifest stays in use', {
          problem,
          operations: current.size,
        });
        return { ok: false, problem };
      }
    },
  };
}
