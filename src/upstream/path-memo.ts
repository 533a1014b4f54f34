/**
 * What a pure function of an upstream path computed, kept for the next call with the same path.
 *
 * An operation's upstream calls repeat the same few paths (a dashboard reads one customer and its
 * three lists, again and again), and judging a path (percent-decoding it, matching it against the
 * access rules or the contract's route templates) cost more per call than the lookup. The memo is
 * bounded: it starts empty again when it holds `limit` paths, so ids never seen again (every
 * customer of a long listing) cannot grow it without bound.
 */
export function memoizeByPath<T>(compute: (path: string) => T, limit = 4_096): (path: string) => T {
  let known = new Map<string, T>();
  return (path) => {
    const held = known.get(path);
    if (held !== undefined || known.has(path)) return held as T;
    const value = compute(path);
    if (known.size >= limit) known = new Map();
    known.set(path, value);
    return value;
  };
}
