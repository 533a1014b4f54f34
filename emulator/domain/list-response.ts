/**
 * The two success bodies every handler returns: a page of a list (`{data, nextCursor, hasMore}`)
 * and a single record (`{data}`).
 */
import { listIdentityOf, paginate } from '../http/pagination.ts';
import type { Listable } from '../http/pagination.ts';
import type { EmulatorRequest, EmulatorResponse } from '../http/types.ts';

/**
 * The 200 response of a list operation: one page of `records` (ordered by createdAt then id,
 * filtered by `updatedSince`), each turned into its list shape by `present`.
 */
export function listResponse<T extends Listable>(
  request: EmulatorRequest,
  records: Iterable<T>,
  present: (record: T) => unknown,
): EmulatorResponse {
  const page = paginate(records, request.query, listIdentityOf(request));
  return {
    status: 200,
    body: { data: page.data.map(present), nextCursor: page.nextCursor, hasMore: page.hasMore },
  };
}

/** A `{data}` response. */
export function dataResponse(data: unknown, status = 200): EmulatorResponse {
  return { status, body: { data } };
}
