import type { CustomerScoped } from './types.ts';

/**
 * Attaches the customer id the record was read under, so entity keys (`customerId id`) resolve even
 * where an upstream record omits its owner.
 */
export function withCustomerId<T extends object>(record: T, customerId: string): CustomerScoped<T> {
  return { ...record, customerId };
}
