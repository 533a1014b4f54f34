/**
 * A DataLoader over a REST API without batch endpoints: one batch becomes one upstream call per
 * distinct key, all in flight at once.
 */
import DataLoader from 'dataloader';

/** Counts of one operation's loads, for metrics: every value asked for, and those read upstream. */
export interface LoaderStats {
  /** `load()` calls (`loadMany` counts each key). */
  loads: number;
  /** Keys that reached a batch, i.e. upstream reads; `loads - misses` were answered from the loader. */
  misses: number;
}

/** Fresh counts for one operation. */
export function createLoaderStats(): LoaderStats {
  return { loads: 0, misses: 0 };
}

/**
 * Creates a per-request loader that calls `load` once per distinct key of a batch, in parallel,
 * and answers each key with its own result or its own error.
 *
 * Failures are not cached: a key whose call failed is cleared, so a later `load` of it (a retry
 * by a sibling field, a subscription event) asks the upstream again instead of replaying the error.
 *
 * @param load fetches one key; it may throw (the error goes to that key's callers only).
 * @param cacheKeyFn turns a key into the string that identifies it; keys with the same string are
 *   one request.
 * @param stats when given, counts every load and every key that reached the upstream.
 */
export function createFanOutLoader<K, V>(
  load: (key: K) => Promise<V>,
  cacheKeyFn: (key: K) => string,
  stats?: LoaderStats,
): DataLoader<K, V, string> {
  const loader: DataLoader<K, V, string> = new DataLoader<K, V, string>(
    (keys) => {
      if (stats !== undefined) stats.misses += keys.length;
      return Promise.all(
        keys.map((key) => {
          const failed = (error: unknown): Error => {
            loader.clear(key);
            return error instanceof Error ? error : new Error(String(error));
          };
          // One promise per key, not an async function's and its await's.
          try {
            return load(key).then(undefined, failed);
          } catch (error) {
            return Promise.resolve(failed(error));
          }
        }),
      );
    },
    { cacheKeyFn },
  );
  if (stats !== undefined) {
    // loadMany calls load per key, so this counts every value asked for.
    const loadOne = loader.load.bind(loader);
    loader.load = (key: K) => {
      stats.loads += 1;
      return loadOne(key);
    };
  }
  return loader;
}
