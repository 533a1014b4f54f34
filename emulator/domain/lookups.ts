/**
 * The look-ups every handler starts with: a path parameter, the parent customer (or the 404 the
 * operation documents), and a record owned by that customer, without telling ids of other
 * customers apart from missing ones.
 */
import type { EmulatorRequest } from '../http/types.ts';
import type { EnvironmentStore } from '../store/environment-store.ts';
import type { CustomerRecord } from '../store/records.ts';
import { customerNotFound, notFound } from './problems.ts';

/**
 * How an unknown parent customer is reported: `customer_not_found` where the spec names that
 * code (related parties, documents), `not_found` everywhere else.
 */
export type MissingCustomerCode = 'not_found' | 'customer_not_found';

/** The path parameter `name`; the router guarantees it for the routes that declare it. */
export function pathParam(request: EmulatorRequest, name: string): string {
  const value = request.params[name];
  if (value === undefined) throw new Error(`Route ${request.route} has no path parameter ${name}`);
  return value;
}

/** The customer of the path, or the 404 the operation documents. */
export function requireCustomer(
  env: EnvironmentStore,
  customerId: string,
  missingCode: MissingCustomerCode = 'not_found',
): CustomerRecord {
  const customer = env.customers.get(customerId);
  if (customer) return customer;
  throw missingCode === 'customer_not_found'
    ? customerNotFound(customerId)
    : notFound('customer', customerId);
}

/**
 * A record of `customerId` by id, or 404 `not_found`. A record of another customer answers the
 * same 404, so ids cannot be probed across customers.
 */
export function requireOwned<T extends { id: string; customerId: string }>(
  records: Map<string, T>,
  customerId: string,
  id: string,
  noun: string,
): T {
  const record = records.get(id);
  if (record && record.customerId === customerId) return record;
  throw notFound(noun, id);
}

/** The records of one customer, in no particular order (lists sort them). */
export function ownedBy<T extends { customerId: string }>(records: Map<string, T>, customerId: string): T[] {
  const owned: T[] = [];
  for (const record of records.values()) if (record.customerId === customerId) owned.push(record);
  return owned;
}
