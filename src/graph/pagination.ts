/**
 * Relay connections over the upstream's cursor pages. The upstream hands out one opaque cursor per
 * page (`nextCursor`), not one per item; the facade gives every edge a cursor of its own anyway:
 *
 * - the edge of a page's last item, when the upstream said where the next page starts, carries the
 *   upstream's `nextCursor` itself (resuming from it is one plain upstream page read);
 * - every other edge carries a facade cursor, `fc1.` and the base64url JSON of the upstream cursor
 *   the item's page was read with and the item's index in that page. Resuming after it reads that
 *   page again with a larger limit (one upstream call) and skips the items up to the cursor's.
 *
 * `after` takes either kind. A facade cursor assumes the upstream page it names still starts where
 * it did: an item created in between can shift the page by one.
 */
import { GraphQLError } from 'graphql';
import type { Page, PageParams } from '../upstream/types.ts';

/** The largest `first` a connection accepts: the upstream's own maximum page size. */
export const MAX_PAGE_SIZE = 100;

/** The arguments every connection field takes. */
export interface ConnectionArgs {
  first?: number | null;
  after?: string | null;
  updatedSince?: string | null;
}

/** A connection as the schema's `*Connection` types shape it. */
export interface Connection<T> {
  edges: { cursor: string; node: T }[];
  nodes: T[];
  pageInfo: {
    hasNextPage: boolean;
    hasPreviousPage: boolean;
    startCursor: string | null;
    endCursor: string | null;
  };
}

/** The upstream's page size when no `first` is given. */
const UPSTREAM_DEFAULT_PAGE_SIZE = 25;

const FACADE_CURSOR_PREFIX = 'fc1.';

/** Where a facade cursor points: the upstream cursor its page was read with, and the item's index. */
interface ItemPosition {
  pageCursor: string | null;
  index: number;
}

function encodeItemCursor(position: ItemPosition): string {
  const json = JSON.stringify([position.pageCursor, position.index]);
  return `${FACADE_CURSOR_PREFIX}${Buffer.from(json, 'utf8').toString('base64url')}`;
}

/** The position a facade cursor names; undefined for an upstream cursor; a BAD_USER_INPUT when malformed. */
function decodeItemCursor(cursor: string): ItemPosition | undefined {
  if (!cursor.startsWith(FACADE_CURSOR_PREFIX)) return undefined;
  let decoded: unknown;
  try {
    decoded = JSON.parse(
      Buffer.from(cursor.slice(FACADE_CURSOR_PREFIX.length), 'base64url').toString('utf8'),
    );
  } catch {
    decoded = undefined;
  }
  if (
    Array.isArray(decoded) &&
    decoded.length === 2 &&
    (decoded[0] === null || typeof decoded[0] === 'string') &&
    Number.isSafeInteger(decoded[1]) &&
    (decoded[1] as number) >= 0 &&
    (decoded[1] as number) < MAX_PAGE_SIZE
  ) {
    return { pageCursor: decoded[0] as string | null, index: decoded[1] as number };
  }
  throw new GraphQLError('"after" is not a cursor of this list.', {
    extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' },
  });
}

/** How an `after` maps onto an upstream page: the page's cursor and how many of its items come first. */
function resumePoint(after: string | null | undefined): { pageCursor: string | null; skip: number } {
  if (after === undefined || after === null) return { pageCursor: null, skip: 0 };
  const position = decodeItemCursor(after);
  return position
    ? { pageCursor: position.pageCursor, skip: position.index + 1 }
    : { pageCursor: after, skip: 0 };
}

/**
 * Turns connection arguments into upstream page parameters.
 *
 * @throws {GraphQLError} `BAD_USER_INPUT` when `first` is not between 1 and {@link MAX_PAGE_SIZE}.
 */
export function toPageParams(args: ConnectionArgs): PageParams {
  const params: PageParams = {};
  if (args.first !== undefined && args.first !== null) {
    if (!Number.isInteger(args.first) || args.first < 1 || args.first > MAX_PAGE_SIZE) {
      throw new GraphQLError(`"first" must be between 1 and ${MAX_PAGE_SIZE}; got ${args.first}.`, {
        extensions: { code: 'BAD_USER_INPUT', argumentName: 'first', maximum: MAX_PAGE_SIZE },
      });
    }
    params.limit = args.first;
  }
  const { pageCursor, skip } = resumePoint(args.after);
  if (pageCursor !== null) params.cursor = pageCursor;
  // After an item inside a page: read that page with room for the items up to the cursor's.
  if (skip > 0) params.limit = Math.min(MAX_PAGE_SIZE, skip + (args.first ?? UPSTREAM_DEFAULT_PAGE_SIZE));
  if (args.updatedSince !== undefined && args.updatedSince !== null) params.updatedSince = args.updatedSince;
  return params;
}

/**
 * Builds a connection from the upstream page that {@link toPageParams} asked for with the same
 * `args`: skips the items up to a facade cursor, gives every edge its cursor, and says whether
 * items come before (`after` was given: at least the cursor's own item does) and after.
 */
export function toConnection<T>(page: Page<T>, args: ConnectionArgs = {}): Connection<T> {
  const { pageCursor, skip } = resumePoint(args.after);
  const wanted = args.first ?? UPSTREAM_DEFAULT_PAGE_SIZE;
  const end = Math.min(page.data.length, skip + wanted);
  const upstreamNext = page.hasMore ? page.nextCursor : null;
  const edges: Connection<T>['edges'] = [];
  for (let index = skip; index < end; index += 1) {
    const isPageEnd = index === page.data.length - 1;
    const cursor =
      isPageEnd && upstreamNext !== null ? upstreamNext : encodeItemCursor({ pageCursor, index });
    edges.push({ cursor, node: page.data[index] as T });
  }
  const hasNextPage = end < page.data.length || (page.hasMore && page.nextCursor !== null);
  return {
    edges,
    nodes: edges.map((edge) => edge.node),
    pageInfo: {
      hasNextPage,
      hasPreviousPage: args.after !== undefined && args.after !== null,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: hasNextPage ? (edges.at(-1)?.cursor ?? null) : null,
    },
  };
}
