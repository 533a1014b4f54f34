/**
 * Waiting for a promise no longer than a while, without leaving a timer behind: how a readiness
 * PING, a metrics scrape and a callback subscription's heartbeat each bound a wait on something that
 * may never answer.
 */

/** What {@link settleWithin} answers when the promise has not settled in time. */
export const NOT_YET = Symbol('not yet');

/**
 * `pending`'s value (or its rejection), or {@link NOT_YET} once `ms` have passed without either;
 * with `ms` 0 or less, `pending` itself. `pending` goes on either way: a rejection after the time
 * is handled here, never left unhandled.
 */
export async function settleWithin<T>(pending: Promise<T>, ms: number): Promise<T | typeof NOT_YET> {
  if (ms <= 0) return pending;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof NOT_YET>((resolve) => {
    timer = setTimeout(resolve, ms, NOT_YET);
  });
  try {
    return await Promise.race([pending, late]);
  } finally {
    clearTimeout(timer);
  }
}
