/**
 * The three shapes of upstream call every resource module uses: read one record, read one page,
 * and send an effectful request with an Idempotency-Key.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { HttpMethod } from './client.ts';
import type { UpstreamContext } from './context.ts';
import { UpstreamUnavailableError } from './errors.ts';
import type { MutationResult, Page, PageParams } from './types.ts';

/** GETs `path` and returns the record inside its `{data}` envelope. */
export async function readRecord<T>(up: UpstreamContext, path: string): Promise<T> {
  const response = await up.client.send(up, { method: 'GET', path });
  // The contract says what `data` holds for `path`; the caller names it.
  return unwrapData(response.body, up.requestId) as T;
}

/** GETs one page of a list at `path`. */
export async function readPage<T>(
  up: UpstreamContext,
  path: string,
  page: PageParams = {},
): Promise<Page<T>> {
  const response = await up.client.send(up, {
    method: 'GET',
    path,
    query: { limit: page.limit, cursor: page.cursor, updatedSince: page.updatedSince },
  });
  const body = response.body as Partial<Page<T>> | undefined;
  if (!Array.isArray(body?.data) || typeof body.hasMore !== 'boolean') {
    throw new UpstreamUnavailableError('invalid_response', up.requestId);
  }
  return { data: body.data, nextCursor: body.nextCursor ?? null, hasMore: body.hasMore };
}

/**
 * Sends an effectful request. Without an `idempotencyKey` from the caller, one is generated here,
 * returned in the result, and reused by every retry, so a retried call can only replay.
 */
export async function sendEffect<T>(
  up: UpstreamContext,
  method: Exclude<HttpMethod, 'GET'>,
  path: string,
  body?: unknown,
  idempotencyKey: string = randomUUID(),
  /** The customer the request acts for where the path names none; see `UpstreamRequest.actingFor`. */
  actingFor?: string,
): Promise<MutationResult<T>> {
  const response = await up.client.send(up, {
    method,
    path,
    body,
    idempotencyKey: upstreamIdempotencyKey(up, idempotencyKey),
    callerIdempotencyKey: idempotencyKey,
    ...(actingFor === undefined ? {} : { actingFor }),
  });
  return {
    data: unwrapData(response.body, up.requestId) as T,
    idempotencyKey,
    replayed: response.replayed,
  };
}

/** Longest Idempotency-Key the upstream accepts (the contract's limits table). */
const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/**
 * The Idempotency-Key sent for `key`: a digest of it and its owner (see
 * `UpstreamContext.idempotencyOwner`), the same for every retry. A key the upstream would refuse
 * (empty, too long) is sent as is, so the caller gets the upstream's own validation error.
 */
function upstreamIdempotencyKey(up: UpstreamContext, key: string): string {
  if (up.idempotencyOwner === undefined || key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    return key;
  }
  return createHash('sha256').update(`${up.idempotencyOwner}\n${key}`).digest('base64url');
}

function unwrapData(body: unknown, requestId: string): unknown {
  if (typeof body !== 'object' || body === null || !('data' in body)) {
    throw new UpstreamUnavailableError('invalid_response', requestId);
  }
  return body.data;
}
