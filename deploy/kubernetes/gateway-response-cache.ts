/**
 * Hive Gateway's response cache for the facade's answers: shared by every gateway replica in Redis
 * (`GATEWAY_CACHE_REDIS_URL`), keyed by who asks, and dropped by the facade itself when an event or
 * a write makes an answer stale. Loaded by gateway.config.ts beside it (the ConfigMap and compose
 * mount both files); like it, it imports nothing but Node's own modules (types aside).
 *
 * Why not the CLI's own `responseCaching` (`@graphql-mesh/plugin-response-cache` over the same
 * storage): it invalidates by the `__typename` and `id` of the records an answer holds, which
 * cannot name a record added to a list or a read made by a root field that returned another type;
 * its invalidation scans Redis's whole key space; and it takes a subgraph's `max-age` but not its
 * `no-store` or `private`, so every answer of the facade (all `no-store` unless asked otherwise)
 * would be kept, under no caller's key unless a `session` is configured. This plugin keeps only
 * what the facade marks as keepable, under the facade's own tags (`apolloCacheTags`, Apollo
 * Router's convention, which the facade sends when asked with `X-Gateway-Cache: tags`).
 *
 * What it keeps: the whole result of a query operation with no error, when every subgraph fetch
 * that made it answered with a `max-age` (and no `no-store`) and carried cache tags; for the least
 * of those `max-age`s. A query that reads a subgraph the facade does not tag (support-notes) is
 * never kept: nothing would say when it changed. Mutations, subscriptions, `@defer`red answers and
 * a request with `Cache-Control: no-cache` are never served from it (the last one's fresh answer is
 * kept).
 *
 * Keyed by: the verified token's claims but its times and id (`exp`, `iat`, `nbf`, `jti`,
 * `auth_time`), so a renewed token of the same caller finds the caller's answers and any other
 * claim (subject, client, roles, customers, environment, scope, issuer, audience) keeps them apart;
 * a digest of a caller's own `X-API-Key`; the document, operation name, variables and persisted
 * document id. That is at least what the facade's own whole-answer cache keys by (docs/security.md):
 * no answer is shared by two callers the facade would not share one between.
 *
 * Found by the facade as src/events/gateway-caches/hive-gateway-cache.ts describes (the same
 * layout under `GATEWAY_CACHE_KEY_PREFIX`): `answer:<key>`, `tag:<tag>` (sorted sets), and
 * `invalidated:<tag>`, the time of a tag's last invalidation: an answer whose lookup came at or
 * before it is not kept, so a fetch that started before an event never lands after its
 * invalidation.
 */
import { createHash } from 'node:crypto';
import type { GatewayConfigContext, GatewayPlugin } from '@graphql-hive/gateway-runtime';

/** The options of {@link useFacadeResponseCache}. */
export interface GatewayResponseCacheOptions {
  /** Where the answers are kept (`GATEWAY_CACHE_KEY_PREFIX`, the facade's too). */
  keyPrefix: string;
  /** The context field the JWT plugin leaves the verified token in. */
  tokenField: string;
  /**
   * Longest a lookup or a store may take (default {@link CACHE_DEADLINE_MS}): past it the operation
   * runs as if nothing were kept (a lookup) or its answer is not kept (a store).
   */
  deadlineMs?: number;
}

/**
 * How long the cache may hold up an operation. A Redis the gateway cannot reach (down, failing over,
 * a name not resolving) queues every command until it is back: without a deadline each query would
 * wait for it, and a gateway with no cache answers at the facade's pace, not at none.
 */
const CACHE_DEADLINE_MS = 250;

/** Least time between two warnings of the cache's failures. */
const WARNING_PERIOD_MS = 10_000;

/** `promise`, or a rejection once `ms` have passed without it settling. */
function withinDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from the cache's Redis within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The request header asking the facade for `Cache-Control` and cache tags (src/http/gateway-cache-hooks.ts). */
const GATEWAY_CACHE_HEADER = 'x-gateway-cache';
/** Apollo Router's response extensions holding a fetch's cache tags. */
const ROOT_FIELDS_CACHE_TAGS = 'apolloCacheTags';
const ENTITY_CACHE_TAGS = 'apolloEntityCacheTags';
/** The claims of a token that change with every token of one caller: left out of the key. */
const PER_TOKEN_CLAIMS = new Set(['exp', 'iat', 'nbf', 'jti', 'auth_time']);

/** The cached answer of `key` (or false) and Redis's time (ms), read at once. ARGV: prefix, key. */
const LOOKUP_SCRIPT = `
local time = redis.call('TIME')
-- In microseconds, written whole (Lua's tostring would round a number this long): in milliseconds,
-- a lookup in the same millisecond as an invalidation that preceded it looked as if made before it.
return { redis.call('GET', ARGV[1] .. 'answer:' .. ARGV[2]), time[1] .. string.format('%06d', tonumber(time[2])) }
`;

/**
 * Keeps an answer under its tags unless one of them was invalidated at or after the lookup.
 * ARGV: prefix, key, answer, ttl (ms), lookup time (µs), tags... Returns 1 when kept, else 0.
 */
const STORE_SCRIPT = `
local prefix = ARGV[1]
local looked = tonumber(ARGV[5])
for i = 6, #ARGV do
  local mark = redis.call('GET', prefix .. 'invalidated:' .. ARGV[i])
  if mark and tonumber(mark) >= looked then return 0 end
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[4])
redis.call('SET', prefix .. 'answer:' .. ARGV[2], ARGV[3], 'PX', ttl)
for i = 6, #ARGV do
  local set = prefix .. 'tag:' .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  redis.call('ZADD', set, now + ttl, ARGV[2])
  if redis.call('PTTL', set) < ttl then redis.call('PEXPIRE', set, ttl) end
end
return 1
`;

/** The part of an ioredis connection this plugin uses. */
export interface RedisEval {
  eval(script: string, keys: number, ...args: (string | number)[]): Promise<unknown>;
}

/** What a lookup found: the answer kept under the key, if any, and Redis's time then (µs). */
export interface LookedUp {
  answer: Json | undefined;
  lookedAt: number;
}

/**
 * Looks `key` up under `keyPrefix`, noting Redis's time: an answer stored later must be newer than
 * every invalidation of its tags up to then.
 */
export async function lookUpAnswer(redis: RedisEval, keyPrefix: string, key: string): Promise<LookedUp> {
  const [held, lookedAt] = (await redis.eval(LOOKUP_SCRIPT, 0, keyPrefix, key)) as [string | null, string];
  return { answer: held === null ? undefined : (JSON.parse(held) as Json), lookedAt: Number(lookedAt) };
}

/** An answer to keep: under `key`, for `ttlMs`, tagged `tags`, its lookup made at `lookedAt`. */
export interface AnswerToKeep {
  key: string;
  answer: Json;
  ttlMs: number;
  lookedAt: number;
  tags: readonly string[];
}

/** Keeps `keep` unless one of its tags was invalidated at or after its lookup; whether it was kept. */
export async function storeAnswer(redis: RedisEval, keyPrefix: string, keep: AnswerToKeep): Promise<boolean> {
  const { key, answer, ttlMs, lookedAt, tags } = keep;
  const kept = await redis.eval(
    STORE_SCRIPT,
    0,
    keyPrefix,
    key,
    JSON.stringify(answer),
    ttlMs,
    lookedAt,
    ...tags,
  );
  return Number(kept) === 1;
}

/** What one operation's fetches said of its answer. */
interface Keeping {
  key: string;
  /** Redis's time at the lookup. */
  lookedAt: number;
  tags: Set<string>;
  /** The least `max-age` of the fetches, in seconds. */
  maxAge: number;
  /** False once a fetch answered without `max-age`, with `no-store`, or without tags. */
  keepable: boolean;
}

type Json = Record<string, unknown>;

/**
 * The response cache as a gateway plugin over the Redis connection of the gateway's own cache
 * storage (`cache: { type: 'redis' }`, which the CLI opens): the storage's connection is the one
 * Redis client the official image can reach. Without it (another storage), nothing is kept and an
 * error says why once.
 */
export function useFacadeResponseCache(
  context: GatewayConfigContext,
  options: GatewayResponseCacheOptions,
): GatewayPlugin {
  const redis = redisOf(context.cache);
  if (redis === undefined) {
    context.log.error(
      'the response cache needs the Redis cache storage (GATEWAY_CACHE_REDIS_URL): nothing is kept',
    );
    return {};
  }
  const { keyPrefix } = options;
  const deadlineMs = options.deadlineMs ?? CACHE_DEADLINE_MS;
  const keeping = new WeakMap<object, Keeping>();
  // At most one line a period: a Redis away would otherwise write one for every query.
  let quietUntil = 0;
  const warn = (what: string, error: unknown): void => {
    if (Date.now() < quietUntil) return;
    quietUntil = Date.now() + WARNING_PERIOD_MS;
    context.log.warn(`response cache: ${what}: ${error instanceof Error ? error.message : String(error)}`);
  };
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const contextValue = args.contextValue as Json;
      const operationName = args.operationName as string | null | undefined;
      const key = answerKey(
        contextValue,
        operationName,
        options.tokenField,
        isQuery(args.document, operationName),
      );
      if (key === undefined) return undefined;
      let found: LookedUp;
      try {
        found = await withinDeadline(lookUpAnswer(redis, keyPrefix, key), deadlineMs);
      } catch (error) {
        warn('lookup failed, the operation runs', error);
        return undefined;
      }
      if (found.answer !== undefined && !asksNoCache(contextValue)) {
        setResultAndStopExecution(found.answer);
        return undefined;
      }
      const state: Keeping = {
        key,
        lookedAt: found.lookedAt,
        tags: new Set(),
        maxAge: Infinity,
        keepable: true,
      };
      keeping.set(contextValue, state);
      return {
        async onExecuteDone({ result }) {
          if (!isKeepable(state, result)) return;
          const { data } = result as Json;
          const keep = { key, answer: { data }, ttlMs: state.maxAge * 1000, lookedAt: state.lookedAt };
          try {
            await withinDeadline(
              storeAnswer(redis, keyPrefix, { ...keep, tags: [...state.tags] }),
              deadlineMs,
            );
          } catch (error) {
            warn('an answer could not be kept', error);
          }
        },
      };
    },
    onFetch(payload) {
      const { context: fetchContext, executionRequest, options: init } = payload;
      if (executionRequest === undefined) return undefined;
      payload.setOptions({ ...init, headers: withHeader(init.headers, GATEWAY_CACHE_HEADER, 'tags') });
      return ({ response }) => {
        const state = keeping.get(fetchContext as object);
        if (state === undefined) return;
        const maxAge = maxAgeOf(response.headers.get('cache-control'));
        if (maxAge === undefined) state.keepable = false;
        else state.maxAge = Math.min(state.maxAge, maxAge);
      };
    },
    onSubgraphExecute({ executionRequest }) {
      const state =
        executionRequest.context === undefined ? undefined : keeping.get(executionRequest.context);
      return (done) => {
        const { result } = done;
        if (state === undefined || isAsyncIterable(result)) return;
        const extensions = result.extensions;
        const tags = tagsOf(extensions);
        if (tags === undefined) state.keepable = false;
        else for (const tag of tags) state.tags.add(tag);
        // The tags are the gateway's business: the client never sees them.
        if (
          extensions !== undefined &&
          (ROOT_FIELDS_CACHE_TAGS in extensions || ENTITY_CACHE_TAGS in extensions)
        ) {
          const { [ROOT_FIELDS_CACHE_TAGS]: _root, [ENTITY_CACHE_TAGS]: _entities, ...rest } = extensions;
          done.setResult({ ...result, extensions: rest });
        }
      };
    },
  };
}

/** The ioredis connection of the gateway's Redis cache storage, when that is the storage. */
function redisOf(cache: unknown): RedisEval | undefined {
  // `@graphql-mesh/cache-redis` keeps its connection as `client` (the runtime's proxies pass it on).
  const client = (cache as { client?: Partial<RedisEval> } | undefined)?.client;
  return typeof client?.eval === 'function' ? (client as RedisEval) : undefined;
}

/** The operation's key, when it is a query of a verified caller; undefined otherwise. */
function answerKey(
  contextValue: Json,
  operationName: string | null | undefined,
  tokenField: string,
  query: boolean,
): string | undefined {
  if (!query) return undefined;
  const payload = (contextValue[tokenField] as { payload?: Json } | undefined)?.payload;
  if (payload === undefined) return undefined;
  const claims = Object.entries(payload)
    .filter(([name]) => !PER_TOKEN_CLAIMS.has(name))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const apiKey = headerOf(contextValue, 'x-api-key');
  const params = (contextValue.params ?? {}) as Json;
  const extensions = params.extensions as Json | undefined;
  const identity = JSON.stringify([
    claims,
    apiKey === null ? null : createHash('sha256').update(apiKey).digest('base64url'),
    params.query ?? null,
    operationName ?? params.operationName ?? null,
    params.variables ?? null,
    extensions?.persistedQuery ?? null,
    params.documentId ?? null,
  ]);
  return createHash('sha256').update(identity).digest('base64url');
}

/** Whether the operation executed is a query. */
function isQuery(document: unknown, operationName: string | null | undefined): boolean {
  type Definition = { kind: string; operation?: string; name?: { value: string } };
  const { definitions } = document as { definitions: readonly Definition[] };
  const operations = definitions.filter((definition) => definition.kind === 'OperationDefinition');
  const operation =
    operationName == null
      ? operations.length === 1
        ? operations[0]
        : undefined
      : operations.find((definition) => definition.name?.value === operationName);
  return operation?.operation === 'query';
}

/** Whether the client asked for a fresh answer (`Cache-Control: no-cache`). */
function asksNoCache(contextValue: Json): boolean {
  return /(?:^|[\s,])no-cache(?:$|[\s,=])/i.test(headerOf(contextValue, 'cache-control') ?? '');
}

function headerOf(contextValue: Json, name: string): string | null {
  return (contextValue.request as Request | undefined)?.headers.get(name) ?? null;
}

/** Whether the executed result may be kept, by what its fetches said. */
function isKeepable(state: Keeping, result: unknown): boolean {
  if (isAsyncIterable(result)) return false;
  const { data, errors } = result as Json;
  return (
    state.keepable &&
    state.tags.size > 0 &&
    Number.isFinite(state.maxAge) &&
    state.maxAge >= 1 &&
    errors === undefined &&
    data !== null &&
    data !== undefined
  );
}

/** `max-age` of a `Cache-Control` value, in seconds; undefined when absent or when `no-store` or `no-cache` is there. */
function maxAgeOf(value: string | null): number | undefined {
  if (value === null || /(?:^|[\s,])no-(?:store|cache)(?:$|[\s,=])/i.test(value)) return undefined;
  const match = /(?:^|[\s,])max-age=(\d+)/i.exec(value);
  return match === null ? undefined : Number(match[1]);
}

/** The cache tags a fetch's result carries; undefined when it carries none (so nothing may be kept). */
function tagsOf(extensions: Json | undefined): string[] | undefined {
  const root: unknown = extensions?.[ROOT_FIELDS_CACHE_TAGS];
  const entities: unknown = extensions?.[ENTITY_CACHE_TAGS];
  const tags = [
    ...(Array.isArray(root) ? (root as unknown[]) : []),
    ...(Array.isArray(entities) ? (entities as unknown[]).flat() : []),
  ].filter((tag): tag is string => typeof tag === 'string' && tag !== '');
  return tags.length === 0 ? undefined : tags;
}

function withHeader(headers: unknown, name: string, value: string): Record<string, string> {
  const all: Record<string, string> = {};
  if (headers instanceof Headers)
    headers.forEach((headerValue, headerName) => (all[headerName] = headerValue));
  else if (Array.isArray(headers))
    for (const [headerName, headerValue] of headers as [string, string][]) all[headerName] = headerValue;
  else Object.assign(all, headers ?? {});
  all[name] = value;
  return all;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
