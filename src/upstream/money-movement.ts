/** Quotes and transfers: `/v3/customers/{customerId}/quotes` and `/transfers`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type { MutationResult, Page, PageParams, Quote, Transfer } from './types.ts';

/** Reads one page of a customer's quotes. */
export function listQuotes(up: UpstreamContext, customerId: string, page?: PageParams): Promise<Page<Quote>> {
  return readPage<Quote>(up, restPath`/v3/customers/${customerId}/quotes`, page);
}

/** Reads one quote of a customer. */
export function getQuote(up: UpstreamContext, customerId: string, quoteId: string): Promise<Quote> {
  return readRecord<Quote>(up, restPath`/v3/customers/${customerId}/quotes/${quoteId}`);
}

/** Executes a quote into a transfer; a second execution fails with `quote_already_executed`. */
export function executeQuote(
  up: UpstreamContext,
  customerId: string,
  quoteId: string,
  idempotencyKey?: string,
): Promise<MutationResult<Transfer>> {
  return sendEffect<Transfer>(
    up,
    'POST',
    restPath`/v3/customers/${customerId}/quotes/${quoteId}/execute`,
    undefined,
    idempotencyKey,
  );
}

/** Reads one page of a customer's transfers. */
export function listTransfers(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<Transfer>> {
  return readPage<Transfer>(up, restPath`/v3/customers/${customerId}/transfers`, page);
}

/** Reads one transfer of a customer. */
export function getTransfer(up: UpstreamContext, customerId: string, transferId: string): Promise<Transfer> {
  return readRecord<Transfer>(up, restPath`/v3/customers/${customerId}/transfers/${transferId}`);
}
