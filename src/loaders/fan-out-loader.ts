/**
 * A DataLoader over a REST API without batch endpoints: one batch becomes one upstream call per
 * distinct key, all in flight at once.
 */
import DataLoader from 'dataloader';

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
 */
export function createFanOutLoader<K, V>(
  load: (key: K) => Promise<V>,
  cacheKeyFn: (key: K) => string,
): DataLoader<K, V, string> {
  const loader: DataLoader<K, V, string> = new DataLoader<K, V, string>(
    (keys) =>
      Promise.all(
        keys.map(async (key) => {
          try {
            return await load(key);
          } catch (error) {
            loader.clear(key);
            return error instanceof Error ? error : new Error(String(error));
          }
        }),
      ),
    { cacheKeyFn },
  );
  return loader;
}
