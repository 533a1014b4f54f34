/** Customer documents: `/v3/customers/{customerId}/documents`. */
import type { UpstreamContext } from './context.ts';
import { withCustomerId } from './customer-scoped.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type { CustomerDocument, CustomerScoped, MutationResult, Page, PageParams } from './types.ts';

/** Reads one page of a customer's documents (archived ones are never listed). */
export async function listDocuments(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<CustomerScoped<CustomerDocument>>> {
  const result = await readPage<CustomerDocument>(up, restPath`/v3/customers/${customerId}/documents`, page);
  return { ...result, data: result.data.map((document) => withCustomerId(document, customerId)) };
}

/** Reads one document of a customer. */
export async function getDocument(
  up: UpstreamContext,
  customerId: string,
  documentId: string,
): Promise<CustomerScoped<CustomerDocument>> {
  const document = await readRecord<CustomerDocument>(
    up,
    restPath`/v3/customers/${customerId}/documents/${documentId}`,
  );
  return withCustomerId(document, customerId);
}

/** Archives a document: kept for compliance, excluded from later reads, lists and submissions. */
export async function archiveDocument(
  up: UpstreamContext,
  customerId: string,
  documentId: string,
  idempotencyKey?: string,
): Promise<MutationResult<CustomerScoped<CustomerDocument>>> {
  const result = await sendEffect<CustomerDocument>(
    up,
    'DELETE',
    restPath`/v3/customers/${customerId}/documents/${documentId}`,
    undefined,
    idempotencyKey,
  );
  return { ...result, data: withCustomerId(result.data, customerId) };
}
