/**
 * Cursor pagination of every list: the order (createdAt, then id), the page sizes, the
 * `updatedSince` filter and cursors that name a position, so pages stay stable while records
 * are added.
 */
import { createHash } from 'node:crypto';
import { ProblemError } from './problem.ts';
import type { EmulatorRequest, ListQuery } from './types.ts';

/** The spec's list envelope. */
export type Page<T> = { data: T[]; nextCursor: string | null; hasMore: boolean };

/** What every listed record has: the list order is `createdAt` ascending, then `id` ascending. */
export type Listable = { id: string; createdAt: string; updatedAt: string };

/** Default and maximum page sizes (the contract's `limit` parameter says the same). */
export const DEFAULT_PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 100;

type CursorPayload = {
  /** Hash of the list identity and filter the cursor belongs to. */
  s: string;
  /** Position: the last returned record's createdAt and id. */
  c: string;
  i: string;
};

/**
 * Cuts one page out of `records`.
 *
 * Cursors name a position (createdAt, id) rather than an offset, so pages stay stable while
 * records are added. A cursor is bound to `listIdentity` and the `updatedSince` filter: using it
 * on another list or filter is a 400 `validation_error` on the `cursor` parameter, because it
 * would silently skip or repeat records.
 *
 * @param records any order; filtered by `updatedSince` (at or after) and sorted here.
 * @param listIdentity names the list, e.g. `listRelatedParties:sandbox:cus_123`; see {@link listIdentityOf}.
 */
export function paginate<T extends Listable>(
  records: Iterable<T>,
  query: ListQuery,
  listIdentity: string,
): Page<T> {
  const limit = Math.min(Math.max(Math.trunc(query.limit) || DEFAULT_PAGE_SIZE, 1), MAX_PAGE_SIZE);
  const scope = scopeHash(listIdentity, query.updatedSince);
  const since = query.updatedSince === undefined ? undefined : firstMillisecondAtOrAfter(query.updatedSince);
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, scope);

  const matching: T[] = [];
  for (const record of records) {
    if (since !== undefined && Date.parse(record.updatedAt) < since) continue;
    if (after && compareToPosition(record, after) <= 0) continue;
    matching.push(record);
  }
  matching.sort(compareRecords);

  const data = matching.slice(0, limit);
  const hasMore = matching.length > limit;
  const last = data.at(-1);
  return {
    data,
    hasMore,
    nextCursor: hasMore && last ? encodeCursor({ s: scope, c: last.createdAt, i: last.id }) : null,
  };
}

/**
 * The first whole millisecond at or after an RFC 3339 timestamp. Records carry millisecond
 * precision, while RFC 3339 allows finer fractions (which `Date.parse` truncates, admitting records
 * updated just before) and a leap second `:60` (which `Date.parse` refuses, which would disable the
 * filter).
 */
export function firstMillisecondAtOrAfter(timestamp: string): number {
  const leapSecond = /^(.*T\d{2}:\d{2}:)60(.*)$/i.exec(timestamp);
  if (leapSecond) return firstMillisecondAtOrAfter(`${leapSecond[1] ?? ''}59${leapSecond[2] ?? ''}`) + 1000;
  const millis = Date.parse(timestamp);
  const beyondMillis = /\.\d{3}(\d+)/.exec(timestamp)?.[1];
  return beyondMillis !== undefined && /[1-9]/.test(beyondMillis) ? millis + 1 : millis;
}

/**
 * The identity of the list a request reads: its route, environment and path parameters.
 * Handlers that list by request can pass this as `paginate`'s `listIdentity`.
 */
export function listIdentityOf(request: Pick<EmulatorRequest, 'route' | 'environment' | 'params'>): string {
  const params = Object.entries(request.params)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  return `${request.environment} ${request.route}?${params}`;
}

function compareRecords(a: Listable, b: Listable): number {
  const byTime = Date.parse(a.createdAt) - Date.parse(b.createdAt);
  if (byTime !== 0) return byTime;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function compareToPosition(record: Listable, position: CursorPayload): number {
  return compareRecords(record, { id: position.i, createdAt: position.c, updatedAt: position.c });
}

function scopeHash(listIdentity: string, updatedSince: string | undefined): string {
  return createHash('sha256')
    .update(`${listIdentity}\n${updatedSince ?? ''}`)
    .digest('base64url')
    .slice(0, 16);
}

function encodeCursor(payload: CursorPayload): string {
  return Buffer.from(JSON.stringify(payload)).toString('base64url');
}

function decodeCursor(cursor: string, expectedScope: string): CursorPayload {
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    payload = undefined;
  }
  if (!isCursorPayload(payload)) {
    throw invalidCursor('The cursor is not a nextCursor this API returned. Start again without a cursor.');
  }
  if (payload.s !== expectedScope) {
    throw invalidCursor(
      'The cursor belongs to another list or filter. Pass the nextCursor of this list, with the same updatedSince.',
    );
  }
  return payload;
}

function isCursorPayload(value: unknown): value is CursorPayload {
  if (typeof value !== 'object' || value === null) return false;
  const { s, c, i } = value as Record<string, unknown>;
  return (
    typeof s === 'string' && typeof c === 'string' && typeof i === 'string' && !Number.isNaN(Date.parse(c))
  );
}

function invalidCursor(message: string): ProblemError {
  return new ProblemError(400, 'validation_error', message, {
    errors: [{ parameter: 'cursor', code: 'invalid_value', message }],
  });
}
