/**
 * Whole answers of repeated queries, served again while every upstream answer they were made from
 * is still held, unchanged, by the response cache (`src/upstream/response-cache.ts`).
 *
 * A query's result is a function of its document, its variables, who asks (their scope decides what
 * each upstream request may reach) and the upstream answers it read. When every one of those reads
 * came from the response cache, and the response cache still holds each of them as it was handed
 * out (not dropped by an event or a write, not expired, not evicted, not read anew), executing the
 * query again would read the same values and build the same result: so the result is kept and
 * served instead, without execution, loaders or upstream context. The response cache stays the one
 * judge of freshness; nothing here is invalidated on its own, and nothing is served that a fresh
 * execution over the held answers would not give.
 *
 * What is never kept: a result with an error (a failed read, a 404, a refusal), one whose operation
 * read anything the response cache does not stand for (a path never kept, a write, an answer kept
 * as text: `AnswerSources.complete`), and one that read nothing upstream (an introspection, a
 * `{ __typename }`: executing those is the cheap part).
 *
 * Who asks is part of the key, whole: the upstream key's partition, the bound environment, the
 * subject, the client, the roles, the contract (the schema it is served), the operator flag and the
 * customers of the scope. Two callers
 * never share an answer, and a caller whose token's scope changed does not meet its old answers.
 *
 * During an upstream outage the response cache may serve a read past its freshness; such a read
 * stands for no whole answer (neither kept nor served from here), and the answer that holds it is
 * marked with its age ({@link staleAnswerHooks}).
 */
import type { GraphQLResponse } from '@apollo/server';
import { LRUCache } from 'lru-cache';
import type { GraphContext } from './context.ts';
import type { Caller } from '../auth/caller.ts';
import {
  freezeAnswerBody,
  PARSED_BYTES_PER_TEXT_BYTE,
  type AnswerSources,
  type ResponseCache,
} from '../upstream/response-cache.ts';
import type { UpstreamContext } from '../upstream/context.ts';

/** `CACHE_ANSWERS_MAX_BYTES`: how many bytes of answers are held (0: none). */
export interface AnswerCacheConfig {
  maxBytes: number;
}

/** Counts since the cache was built, and what it holds now. */
export interface AnswerCacheStats {
  /** Queries answered from a held answer. */
  hits: number;
  /** Queries that looked for a held answer and executed (none held, or one no longer current). */
  misses: number;
  /** Results kept after their execution. */
  kept: number;
  bytes: number;
  entries: number;
}

/** What a held answer is found by; see {@link answerKey}. */
export interface AnswerQuestion {
  /** Who asks: the operation's upstream context (key, scope, environment) and caller. */
  upstream: UpstreamContext;
  caller: Caller | undefined;
  /** A digest of the document's text (Apollo's `queryHash`). */
  documentHash: string;
  operationName: string | null | undefined;
  variables: Readonly<Record<string, unknown>> | undefined;
}

export interface AnswerCache {
  /**
   * The held data answering `key`, when every answer it was made from is still current in `cache`
   * (the response cache of the operation's environment); undefined otherwise, and a held answer no
   * longer current is dropped. A found answer's reads are recorded in `sources` (the operation's
   * own record, which then stands for the answer served as for one executed: a gateway's cache
   * tags and freshness are read from it).
   */
  find(
    key: string,
    cache: ResponseCache,
    sources?: AnswerSources,
  ): Readonly<Record<string, unknown>> | undefined;
  /**
   * Keeps `data`, the error-free result of the query `key` names, made from what `sources` records,
   * when those are all still current in `cache`. Returns whether it was kept.
   */
  keep(key: string, data: Record<string, unknown>, sources: AnswerSources, cache: ResponseCache): boolean;
  stats(): AnswerCacheStats;
}

interface HeldAnswer {
  readonly data: Readonly<Record<string, unknown>>;
  readonly sources: AnswerSources;
  readonly cache: ResponseCache;
  readonly bytes: number;
}

/** Bytes an entry costs beyond its key and data: the entry, its sources' map, the LRU slots. */
const ENTRY_OVERHEAD_BYTES = 512;
/** Bytes each recorded read costs beyond its key: its slot in the sources' map and its weak reference. */
const SOURCE_OVERHEAD_BYTES = 96;

/** Builds an empty answer cache holding at most `config.maxBytes`. */
export function createAnswerCache(config: AnswerCacheConfig): AnswerCache {
  const counts = { hits: 0, misses: 0, kept: 0 };
  const held = new LRUCache<string, HeldAnswer>({
    maxSize: config.maxBytes,
    sizeCalculation: (answer) => answer.bytes,
  });
  return {
    find(key, cache, sources) {
      const answer = held.get(key);
      if (answer?.cache === cache && cache.isCurrent(answer.sources)) {
        counts.hits += 1;
        if (sources !== undefined)
          for (const [read, body] of answer.sources.reads) sources.reads.set(read, body);
        return answer.data;
      }
      if (answer !== undefined) held.delete(key);
      counts.misses += 1;
      return undefined;
    },
    keep(key, data, sources, cache) {
      if (!cache.isCurrent(sources)) return false;
      // The record of the reads is held too, and may outweigh a small result made from many reads.
      let sourceBytes = 0;
      for (const read of sources.reads.keys()) sourceBytes += SOURCE_OVERHEAD_BYTES + 2 * read.length;
      const text = JSON.stringify(data);
      const bytes =
        ENTRY_OVERHEAD_BYTES + 2 * key.length + sourceBytes + PARSED_BYTES_PER_TEXT_BYTE * text.length;
      if (bytes > config.maxBytes) return false;
      // What is held is the answer read back from its text, not the executor's result: graphql-js
      // builds each object of a result without a prototype, which V8 keeps as a hash table (about
      // twice the memory measured on held dashboards), where a parsed copy is as compact as the
      // response cache's bodies. Frozen: every later hit is handed this one value, and none can
      // change it for the next.
      const compact = freezeAnswerBody(JSON.parse(text) as Record<string, unknown>);
      held.set(key, { data: compact, sources, cache, bytes });
      counts.kept += 1;
      return true;
    },
    stats: () => ({ ...counts, bytes: held.calculatedSize, entries: held.size }),
  };
}

/**
 * The key of a query's answer: who asks, the document, the operation and the variables; undefined
 * when the variables cannot be written down (nested deeper than `JSON.stringify` goes: a variable the
 * operation does not declare is read by nothing else), and such a request is executed, never held.
 */
export function answerKey(question: AnswerQuestion): string | undefined {
  let variables: string;
  try {
    variables = question.variables === undefined ? '' : JSON.stringify(question.variables);
  } catch {
    return undefined;
  }
  return `${callerKey(question.upstream, question.caller)}\n${question.documentHash}\n${
    question.operationName ?? ''
  }\n${variables}`;
}

/**
 * Everything about who asks that can change a result: the key's partition (a caller's own key or
 * the facade's), the environment, the subject and client, the roles, the contract, and the scope.
 */
function callerKey(upstream: UpstreamContext, caller: Caller | undefined): string {
  const { authenticated, operator, customers } = upstream.scope;
  return JSON.stringify([
    upstream.credentials.partition,
    upstream.environment ?? null,
    caller?.via ?? null,
    caller?.subject ?? null,
    caller?.clientId ?? null,
    caller?.roles ?? [],
    // The contract it is served: another schema, whose answer to the same document may differ.
    caller?.contract ?? null,
    authenticated,
    operator,
    customers.kind === 'all' ? 'all' : [...customers.customerIds].sort(),
  ]);
}

/**
 * The hooks that mark an HTTP answer holding any read the response cache served past its
 * freshness because the upstream failed (`CACHE_STALE_IF_ERROR_SECONDS`): `extensions.stale` is
 * `{ ageSeconds }`, the age of the oldest such read, so a client can show "as of". For
 * `createRequestHooksPlugin`; a deferred answer is marked in its first part.
 */
export function staleAnswerHooks(): {
  willSendResponse(requestContext: { response: GraphQLResponse; contextValue: GraphContext }): void;
} {
  return {
    willSendResponse({ response, contextValue }) {
      const ageSeconds = contextValue.upstream.degraded.staleAgeSeconds;
      if (ageSeconds === undefined) return;
      const result =
        response.body.kind === 'single' ? response.body.singleResult : response.body.initialResult;
      result.extensions = { ...result.extensions, stale: { ageSeconds } };
    },
  };
}
