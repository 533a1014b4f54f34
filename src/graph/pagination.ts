/**
 * Relay connections over the upstream's cursor pages. The upstream hands out one opaque cursor per
 * page (`nextCursor`); the facade passes it through unchanged as `pageInfo.endCursor` and takes it
 * back as `after`, so paging through the facade is paging through the upstream.
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
  edges: { cursor: string | null; node: T }[];
  nodes: T[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
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
  if (args.after !== undefined && args.after !== null) params.cursor = args.after;
  if (args.updatedSince !== undefined && args.updatedSince !== null) params.updatedSince = args.updatedSince;
  return params;
}

/**
 * Builds a connection from an upstream page. Only the last edge gets a cursor (the page's
 * `nextCursor`): the upstream issues no per-item cursors, and inventing some would mean decoding
 * its opaque ones.
 */
export function toConnection<T>(page: Page<T>): Connection<T> {
  const endCursor = page.hasMore ? page.nextCursor : null;
  const last = page.data.length - 1;
  return {
    edges: page.data.map((node, index) => ({ cursor: index === last ? endCursor : null, node })),
    nodes: page.data,
    pageInfo: { hasNextPage: page.hasMore && page.nextCursor !== null, endCursor },
  };
}
