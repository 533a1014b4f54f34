/** Related parties of business customers: `/v3/customers/{customerId}/related-parties`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  CreateRelatedPartyInput,
  MutationResult,
  Page,
  PageParams,
  RelatedParty,
  RelatedPartySummary,
} from './types.ts';

/** Reads one page of a customer's active related parties (summaries). */
export function listRelatedParties(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<RelatedPartySummary>> {
  return readPage<RelatedPartySummary>(up, restPath`/v3/customers/${customerId}/related-parties`, page);
}

/** Reads one related party's full record. */
export function getRelatedParty(
  up: UpstreamContext,
  customerId: string,
  relatedPartyId: string,
): Promise<RelatedParty> {
  return readRecord<RelatedParty>(
    up,
    restPath`/v3/customers/${customerId}/related-parties/${relatedPartyId}`,
  );
}

/** Creates a person or entity party for a business customer. */
export function createRelatedParty(
  up: UpstreamContext,
  customerId: string,
  body: CreateRelatedPartyInput,
  idempotencyKey?: string,
): Promise<MutationResult<RelatedParty>> {
  return sendEffect<RelatedParty>(
    up,
    'POST',
    restPath`/v3/customers/${customerId}/related-parties`,
    body,
    idempotencyKey,
  );
}

/** Archives a related party (it leaves the list). */
export function archiveRelatedParty(
  up: UpstreamContext,
  customerId: string,
  relatedPartyId: string,
  idempotencyKey?: string,
): Promise<MutationResult<RelatedParty>> {
  return sendEffect<RelatedParty>(
    up,
    'DELETE',
    restPath`/v3/customers/${customerId}/related-parties/${relatedPartyId}`,
    undefined,
    idempotencyKey,
  );
}
