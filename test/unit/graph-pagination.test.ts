import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { MAX_PAGE_SIZE, toConnection, toPageParams } from '../../src/graph/pagination.ts';

describe('toPageParams', () => {
  it('maps first, after and updatedSince to the upstream limit, cursor and updatedSince', () => {
    expect(toPageParams({ first: 10, after: 'c1', updatedSince: '2025-01-06T09:00:00Z' })).toEqual({
      limit: 10,
      cursor: 'c1',
      updatedSince: '2025-01-06T09:00:00Z',
    });
  });

  it('leaves out what was not given, so the upstream default applies', () => {
    expect(toPageParams({})).toEqual({});
    expect(toPageParams({ first: null, after: null, updatedSince: null })).toEqual({});
  });

  it('accepts the documented maximum', () => {
    expect(toPageParams({ first: MAX_PAGE_SIZE })).toEqual({ limit: 100 });
  });

  it.each([0, -1, 101])('refuses first = %i with BAD_USER_INPUT', (first) => {
    let thrown: unknown;
    try {
      toPageParams({ first });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GraphQLError);
    expect((thrown as GraphQLError).extensions).toEqual({
      code: 'BAD_USER_INPUT',
      argumentName: 'first',
      maximum: 100,
    });
  });
});

/** The facade cursor of the item at `index` of the upstream page read with `pageCursor`. */
function itemCursor(pageCursor: string | null, index: number): string {
  return `fc1.${Buffer.from(JSON.stringify([pageCursor, index])).toString('base64url')}`;
}

describe('toConnection', () => {
  it('gives every edge a cursor: the upstream one on the last, a facade one on the others', () => {
    expect(toConnection({ data: [{ id: 'a' }, { id: 'b' }], nextCursor: 'next', hasMore: true })).toEqual({
      edges: [
        { cursor: itemCursor(null, 0), node: { id: 'a' } },
        { cursor: 'next', node: { id: 'b' } },
      ],
      nodes: [{ id: 'a' }, { id: 'b' }],
      pageInfo: {
        hasNextPage: true,
        hasPreviousPage: false,
        startCursor: itemCursor(null, 0),
        endCursor: 'next',
      },
    });
  });

  it('ends the connection on the last page, where even the last edge has a facade cursor', () => {
    expect(toConnection({ data: [{ id: 'a' }], nextCursor: null, hasMore: false }, { after: 'c1' })).toEqual({
      edges: [{ cursor: itemCursor('c1', 0), node: { id: 'a' } }],
      nodes: [{ id: 'a' }],
      pageInfo: {
        hasNextPage: false,
        hasPreviousPage: true,
        startCursor: itemCursor('c1', 0),
        endCursor: null,
      },
    });
  });

  it('builds an empty connection from an empty page', () => {
    expect(toConnection({ data: [], nextCursor: null, hasMore: false })).toEqual({
      edges: [],
      nodes: [],
      pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
    });
  });

  it('resumes after an item inside a page: reads that page with room, then skips up to the item', () => {
    const args = { first: 2, after: itemCursor('c1', 0) };
    expect(toPageParams(args)).toEqual({ cursor: 'c1', limit: 3 });

    const connection = toConnection(
      { data: [{ id: 'a' }, { id: 'b' }, { id: 'c' }], nextCursor: 'c2', hasMore: true },
      args,
    );
    expect(connection.nodes).toEqual([{ id: 'b' }, { id: 'c' }]);
    expect(connection.edges.map((edge) => edge.cursor)).toEqual([itemCursor('c1', 1), 'c2']);
    expect(connection.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true, endCursor: 'c2' });
  });

  it('refuses a facade cursor it did not make with BAD_USER_INPUT', () => {
    expect(() => toPageParams({ after: 'fc1.not-json' })).toThrow('"after" is not a cursor of this list.');
  });
});
