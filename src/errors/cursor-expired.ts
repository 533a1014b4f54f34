/**
 * The error of a subscription resumed after a cursor the event log no longer holds, beside the one
 * map that turns it into a GraphQL error (`to-graphql-error.ts`, code CURSOR_EXPIRED): the log
 * throws it, the errors layer names it, and neither needs the other's folder for it.
 */

/**
 * A cursor the log can no longer resume from: an event after it was trimmed (retention), or the
 * cursor is not one of this log's. `oldest` is the oldest cursor the log holds (none when empty, or
 * when the caller may not be told); `ahead`: the cursor is ahead of the log's head.
 */
export class CursorExpiredError extends Error {
  override name = 'CursorExpiredError';
  readonly cursor: string;
  readonly oldest: string | undefined;
  readonly ahead: boolean;
  constructor(cursor: string, oldest: string | undefined, ahead = false) {
    super(
      `The events after cursor ${JSON.stringify(cursor)} are no longer all held` +
        // Without `oldest` (an empty log, or a caller scoped to some customers, who is not told where
        // a log of every customer's events begins), nothing is said of what the log holds.
        (oldest === undefined
          ? '; subscribe again without it to receive the events from now on.'
          : `; the oldest held is ${JSON.stringify(oldest)}.`),
    );
    this.cursor = cursor;
    this.oldest = oldest;
    this.ahead = ahead;
  }
}
