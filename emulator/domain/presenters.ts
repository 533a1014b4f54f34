/**
 * Records become response bodies here. Every presenter returns a copy: a body may be cached for
 * idempotent replay or serialised later, and must not change when the store does.
 */
import type { EnvironmentStore } from '../store/environment-store.ts';
import type {
  AccountRecord,
  QuoteRecord,
  RelatedPartyRecord,
  TaskSubmissionRecord,
  WebhookEndpointRecord,
} from '../store/records.ts';

/** A record whose stored shape is its response shape, copied. */
export function presentRecord<T>(record: T): T {
  return structuredClone(record);
}

/** The fees read: the account's `fees` with its id. */
export function presentAccountFees(account: AccountRecord): unknown {
  return { accountId: account.id, breakdown: structuredClone(account.fees.breakdown) };
}

/** The list item of a related party: identity and facts, without the person or entity details. */
export function presentRelatedPartySummary(party: RelatedPartyRecord): unknown {
  return {
    id: party.id,
    customerId: party.customerId,
    partyType: party.partyType,
    roles: [...party.roles],
    displayName: relatedPartyDisplayName(party),
    hasOwnership: party.hasOwnership,
    hasVotingRights: party.hasVotingRights,
    hasControl: party.hasControl,
    createdAt: party.createdAt,
    updatedAt: party.updatedAt,
  };
}

function relatedPartyDisplayName(party: RelatedPartyRecord): string {
  if (party.person) return `${party.person.firstName} ${party.person.lastName}`;
  return party.entity?.legalName ?? party.id;
}

/** A webhook endpoint without its signing secret, which only the create response shows. */
export function presentWebhookEndpoint(endpoint: WebhookEndpointRecord): unknown {
  const { secret: _secret, ...visible } = endpoint;
  return structuredClone(visible);
}

/** A task submission; archived documents are excluded from task submissions, as from every read. */
export function presentTaskSubmission(env: EnvironmentStore): (submission: TaskSubmissionRecord) => unknown {
  return (submission) => ({
    ...structuredClone(submission),
    documentIds: submission.documentIds.filter((id) => env.documents.get(id)?.status !== 'archived'),
  });
}

/** A quote; an open quote past its `expiresAt` reads as `expired`. */
export function presentQuote(now: Date): (quote: QuoteRecord) => unknown {
  return (quote) => ({ ...structuredClone(quote), status: quoteStatus(quote, now) });
}

/** The status a quote has at `now`. */
export function quoteStatus(quote: QuoteRecord, now: Date): string {
  if (quote.status === 'open' && Date.parse(quote.expiresAt) <= now.getTime()) return 'expired';
  return quote.status;
}
