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

describe('toConnection', () => {
  it('builds edges, nodes and pageInfo from a page that has a successor', () => {
    expect(toConnection({ data: [{ id: 'a' }, { id: 'b' }], nextCursor: 'next', hasMore: true })).toEqual({
      edges: [
        { cursor: null, node: { id: 'a' } },
        { cursor: 'next', node: { id: 'b' } },
      ],
      nodes: [{ id: 'a' }, { id: 'b' }],
      pageInfo: { hasNextPage: true, endCursor: 'next' },
    });
  });

  it('ends the connection on the last page', () => {
    expect(toConnection({ data: [{ id: 'a' }], nextCursor: null, hasMore: false })).toEqual({
      edges: [{ cursor: null, node: { id: 'a' } }],
      nodes: [{ id: 'a' }],
      pageInfo: { hasNextPage: false, endCursor: null },
    });
  });

  it('builds an empty connection from an empty page', () => {
    expect(toConnection({ data: [], nextCursor: null, hasMore: false })).toEqual({
      edges: [],
      nodes: [],
      pageInfo: { hasNextPage: false, endCursor: null },
    });
  });
});
