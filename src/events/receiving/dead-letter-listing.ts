/**
 * `GET /dead-letters` on the metrics port (never the public one): the parked webhook events of
 * every environment this process serves, newest first, as JSON, for operators
 * (docs/operations.md, "Poison events"). It reads the record only: nothing is asked of the upstream.
 */
import type { RequestHandler } from 'express';
import type { DeadLetterRecord } from './dead-letters.ts';

/** Where the listing is served on the metrics port. */
export const DEAD_LETTERS_PATH = '/dead-letters';

/** Letters listed when `limit` is not given, and the most one request may ask for. */
const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1_000;

/**
 * The handler of {@link DEAD_LETTERS_PATH}: `?limit=` (1 to 1,000, default 100) letters, newest
 * first, as `{ deadLetters, limit }`; 400 for another `limit`, 503 when the record cannot be read
 * (Redis away). Never cached.
 */
export function deadLetterListing(record: Pick<DeadLetterRecord, 'list'>): RequestHandler {
  return (request, response) => {
    response.setHeader('Cache-Control', 'no-store');
    const given = request.query.limit;
    const limit =
      given === undefined ? DEFAULT_LIMIT : typeof given === 'string' ? Number(given) : Number.NaN;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
      response.status(400).json({ error: `limit must be a whole number from 1 to ${MAX_LIMIT}` });
      return;
    }
    record.list(limit).then(
      (deadLetters) => response.status(200).json({ deadLetters, limit }),
      () => response.status(503).json({ error: 'the dead-letter record cannot be read now' }),
    );
  };
}
