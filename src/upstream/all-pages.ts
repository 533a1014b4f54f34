/**
 * Reading a whole list page by page, with a cap: a list longer than the cap is an error the
 * caller must handle, never a silently shortened list.
 */
import type { Page, PageParams } from './types.ts';

/** A list had more pages than the reader may read. */
export class PageLimitExceededError extends Error {
  /** Records the reader may read at most (`maxPages` × `pageSize`). */
  readonly maxRecords: number;

  constructor(maxRecords: number) {
    super(`the list has more than ${maxRecords} records`);
    this.name = 'PageLimitExceededError';
    this.maxRecords = maxRecords;
  }
}

/** How {@link readAllPages} pages. */
export interface AllPagesOptions {
  /** Pages read at most; one more page is an error. */
  maxPages: number;
  pageSize: number;
  /** The updated-since filter, passed on every page. */
  updatedSince?: string;
}

/**
 * Every record of a list, `readPage` reading one page of it at a time.
 *
 * @throws PageLimitExceededError when the list goes on past `maxPages` pages.
 */
export async function readAllPages<T>(
  readPage: (page: PageParams) => Promise<Page<T>>,
  { maxPages, pageSize, updatedSince }: AllPagesOptions,
): Promise<T[]> {
  const records: T[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < maxPages; page += 1) {
    const result = await readPage({
      limit: pageSize,
      ...(updatedSince === undefined ? {} : { updatedSince }),
      ...(cursor === undefined ? {} : { cursor }),
    });
    records.push(...result.data);
    if (!result.hasMore || result.nextCursor === null) return records;
    cursor = result.nextCursor;
  }
  throw new PageLimitExceededError(maxPages * pageSize);
}
