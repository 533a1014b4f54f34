/** Recipients and their destinations: `/v3/customers/{customerId}/recipients`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord } from './request.ts';
import { restPath } from './rest-path.ts';
import type { Page, PageParams, Recipient } from './types.ts';

/** Reads one page of a customer's recipients. */
export function listRecipients(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<Recipient>> {
  return readPage<Recipient>(up, restPath`/v3/customers/${customerId}/recipients`, page);
}

/** Reads one recipient of a customer. */
export function getRecipient(
  up: UpstreamContext,
  customerId: string,
  recipientId: string,
): Promise<Recipient> {
  return readRecord<Recipient>(up, restPath`/v3/customers/${customerId}/recipients/${recipientId}`);
}
