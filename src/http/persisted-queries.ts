/**
 * Apollo's automatic persisted queries over HTTP, held where the door can read them too: Apollo
 * keeps each text it ran under its hash (a client sends the hash alone next time), and the HTTP
 * adapter of the door reads the text of a hash-only request here, so the door admits the text
 * Apollo will run. Bounded as Apollo's own default cache is (30 MiB of text, least recently used
 * dropped first).
 */
import type { ApolloServerOptions, BaseContext } from '@apollo/server';
import { LRUCache } from 'lru-cache';

/** What Apollo takes as its persisted-query cache. */
type PersistedQueryCache = NonNullable<
  Exclude<ApolloServerOptions<BaseContext>['persistedQueries'], false | undefined>['cache']
>;

/**
 * The prefix Apollo Server gives its persisted queries' keys in the cache it is handed
 * (`APQ_CACHE_PREFIX` of its request pipeline).
 */
const APOLLO_KEY_PREFIX = 'apq:';

/** Apollo's default cache size, in characters of text. */
const MAX_TEXT = 30 * 1024 * 1024;

/** The cache Apollo stores persisted queries in, and the door's reading of it. */
export interface PersistedQueries {
  /** For Apollo's `persistedQueries.cache`. */
  readonly cache: PersistedQueryCache;
  /** The text held for `sha256Hash`, if any. */
  readonly textOf: (sha256Hash: string) => string | undefined;
}

export function createPersistedQueries(): PersistedQueries {
  const texts = new LRUCache<string, string>({
    maxSize: MAX_TEXT,
    sizeCalculation: (text) => text.length || 1,
  });
  return {
    cache: {
      get: async (key) => texts.get(key),
      set: async (key, value, options) => {
        const ttl = options?.ttl;
        texts.set(key, value, typeof ttl === 'number' && ttl > 0 ? { ttl: ttl * 1000 } : undefined);
      },
      delete: async (key) => texts.delete(key),
    },
    textOf: (sha256Hash) => texts.get(`${APOLLO_KEY_PREFIX}${sha256Hash}`),
  };
}
