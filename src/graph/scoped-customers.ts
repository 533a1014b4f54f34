/**
 * `customers` for a caller scoped to some customers: the upstream list names every customer of the
 * platform and is for operators only (src/upstream/access.ts), so a scoped caller's page is read
 * from its own customer ids, each by id, oldest first as the upstream list orders them.
 */
import { GraphQLError } from 'graphql';
import type { Loaders } from '../loaders/index.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { Customer, Page, PageParams } from '../upstream/types.ts';

/** The cursor of a scoped page: the position after its last customer, in the sorted id list. */
const CURSOR_PREFIX = 'scoped:';
const DEFAULT_PAGE_SIZE = 25;

/** One page of the customers `customerIds` names that exist, with the upstream list's order and filter. */
export async function readScopedCustomers(
  loaders: Loaders,
  customerIds: ReadonlySet<string>,
  page: PageParams,
): Promise<Page<Customer>> {
  const settled = await Promise.allSettled([...customerIds].map((id) => loaders.item.Customer.load({ id })));
  const customers: Customer[] = [];
  for (const result of settled) {
    if (result.status === 'fulfilled') customers.push(result.value);
    // A customer of the token that the upstream does not know is simply not listed.
    else if (!(result.reason instanceof UpstreamProblemError && result.reason.status === 404))
      throw result.reason;
  }
  const since = page.updatedSince === undefined ? undefined : Date.parse(page.updatedSince);
  const listed = customers
    .filter((customer) => since === undefined || Date.parse(customer.updatedAt) >= since)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  const start = page.cursor === undefined ? 0 : offsetOf(page.cursor);
  const end = start + (page.limit ?? DEFAULT_PAGE_SIZE);
  const hasMore = end < listed.length;
  return { data: listed.slice(start, end), hasMore, nextCursor: hasMore ? `${CURSOR_PREFIX}${end}` : null };
}

function offsetOf(cursor: string): number {
  const offset = cursor.startsWith(CURSOR_PREFIX) ? Number(cursor.slice(CURSOR_PREFIX.length)) : NaN;
  if (!Number.isSafeInteger(offset) || offset < 0) {
    throw new GraphQLError('"after" is not a cursor of this list.', {
      extensions: { code: 'BAD_USER_INPUT', argumentName: 'after' },
    });
  }
  return offset;
}
