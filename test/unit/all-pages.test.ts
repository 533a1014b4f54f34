/**
 * The one all-pages reader: every page of a list within its cap, and an error past it, never a
 * silently shortened list.
 */
import { describe, expect, test } from 'vitest';
import { PageLimitExceededError, readAllPages } from '../../src/upstream/all-pages.ts';
import type { Page, PageParams } from '../../src/upstream/types.ts';

/** A list of `count` numbers served `limit` at a time, recording the pages asked for. */
function listOf(count: number) {
  const asked: PageParams[] = [];
  const readPage = async (page: PageParams): Promise<Page<number>> => {
    asked.push(page);
    const start = page.cursor === undefined ? 0 : Number(page.cursor);
    const end = Math.min(count, start + (page.limit ?? 10));
    const hasMore = end < count;
    return {
      data: Array.from({ length: end - start }, (_, index) => start + index),
      hasMore,
      nextCursor: hasMore ? String(end) : null,
    };
  };
  return { asked, readPage };
}

describe('readAllPages', () => {
  test('reads every page, passing the page size, the cursor and the filter on', async () => {
    const list = listOf(25);
    const records = await readAllPages(list.readPage, { maxPages: 3, pageSize: 10, updatedSince: 'T' });
    expect(records).toEqual(Array.from({ length: 25 }, (_, index) => index));
    expect(list.asked).toEqual([
      { limit: 10, updatedSince: 'T' },
      { limit: 10, updatedSince: 'T', cursor: '10' },
      { limit: 10, updatedSince: 'T', cursor: '20' },
    ]);
  });

  test('fails past its cap instead of returning part of the list', async () => {
    const list = listOf(31);
    const reading = readAllPages(list.readPage, { maxPages: 3, pageSize: 10 });
    await expect(reading).rejects.toBeInstanceOf(PageLimitExceededError);
    await expect(reading).rejects.toMatchObject({ maxRecords: 30 });
    expect(list.asked).toHaveLength(3);
  });
});
