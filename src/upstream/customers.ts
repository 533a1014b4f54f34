/** Customers: `/v3/customers`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type { CreateCustomerInput, Customer, MutationResult, Page, PageParams } from './types.ts';

/** Reads one customer. */
export function getCustomer(up: UpstreamContext, customerId: string): Promise<Customer> {
  return readRecord<Customer>(up, restPath`/v3/customers/${customerId}`);
}

/** Reads one page of customers. */
export function listCustomers(up: UpstreamContext, page?: PageParams): Promise<Page<Customer>> {
  return readPage<Customer>(up, '/v3/customers', page);
}

/** Creates a customer. */
export function createCustomer(
  up: UpstreamContext,
  body: CreateCustomerInput,
  idempotencyKey?: string,
): Promise<MutationResult<Customer>> {
  return sendEffect<Customer>(up, 'POST', '/v3/customers', body, idempotencyKey);
}
