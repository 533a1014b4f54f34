/**
 * The held answers one operation's result was made from, recorded as the response cache hands
 * them out, so the whole result may be served again while they are all still held as they were
 * read (`src/graph/answer-cache.ts`); and the frozen bodies that make sharing them safe.
 */

/**
 * A parsed body made safe to share between operations: frozen all the way down, so no reader can
 * change what the next one is served (a write would throw instead of leaking).
 */
export function freezeAnswerBody<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) freezeAnswerBody((value as Record<string, unknown>)[key]);
  }
  return value;
}

/**
 * Bytes counted per byte of text for a body kept parsed: a parsed JSON value takes about 1.5 times
 * its text on V8's heap (measured on lists of account records), counted as 2 to stay under the cap.
 */
export const PARSED_BYTES_PER_TEXT_BYTE = 2;

/**
 * The held answers one operation's result was made from, so that result can be served again while
 * they are all still held (`src/graph/answer-cache.ts`). A body is recorded by identity: an answer
 * read again after an invalidation is a new value, so a result made from the old one is not current.
 */
export interface AnswerSources {
  /**
   * Each answer read through the cache: its key, and the parsed body handed out, held weakly: a
   * result kept for later must not keep alive a body the cache has let go (evicted, expired,
   * dropped), or held results would pin every page they read past both caps. A body collected is
   * one no longer held, so the result is not current.
   */
  readonly reads: Map<string, WeakRef<object>>;
  /**
   * False once the operation read anything no held answer stands for: a write, a path never kept,
   * an answer kept as text, a read that failed (a 404 is never kept), a read outside the cache, or
   * an answer served past its freshness because the upstream failed.
   */
  complete: boolean;
}

/** An empty record of what an operation read; see {@link AnswerSources}. */
export function createAnswerSources(): AnswerSources {
  return { reads: new Map(), complete: true };
}

/**
 * Records the answer one read was handed. Only a parsed object has an identity to check later; an
 * answer kept as text (parsed anew for each read), or a body that is no object, makes the record
 * incomplete.
 */
export function recordSource(sources: AnswerSources, key: string, answer: { body?: unknown }): void {
  const body = 'body' in answer ? answer.body : undefined;
  if (typeof body !== 'object' || body === null) {
    sources.complete = false;
    return;
  }
  const before = sources.reads.get(key);
  if (before === undefined) sources.reads.set(key, new WeakRef(body));
  // Read twice with an invalidation between: the result holds both, and no one entry stands for it.
  else if (before.deref() !== body) sources.complete = false;
}

/**
 * Whether every answer `sources` records is still what `currentBody` gives for its key (held and
 * fresh), and they are all there is; false for a record with no read at all.
 */
export function isHeldAsRead(sources: AnswerSources, currentBody: (key: string) => unknown): boolean {
  if (!sources.complete || sources.reads.size === 0) return false;
  for (const [key, read] of sources.reads) {
    const body = read.deref();
    if (body === undefined || currentBody(key) !== body) return false;
  }
  return true;
}
