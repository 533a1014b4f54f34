/**
 * Named upstream record and request-body types, aliased from the types generated out of the contract
 * (`schema/upstream/openapi.yaml` → `src/generated/upstream-api.ts`). Everything outside upstream/
 * imports these names, never the generated file, so a contract change surfaces here first.
 */
import type { components, paths } from '../generated/upstream-api.ts';

type Schemas = components['schemas'];

export type Customer = Schemas['Customer'];
/**
 * The contract lists `fees` as required, but the facade reads a record without them from the fees
 * endpoint instead (`Account.fees`), so the type does not promise them.
 */
export type Account = Omit<Schemas['Account'], 'fees'> & Partial<Pick<Schemas['Account'], 'fees'>>;
export type AccountDetails = Schemas['AccountDetails'];
export type Balance = Schemas['Balance'];
export type AccountFees = Schemas['AccountFees'];
export type FeeBreakdown = Schemas['FeeBreakdown'];
export type DeveloperFee = Schemas['DeveloperFee'];
export type Person = Schemas['Person'];
export type Entity = Schemas['Entity'];
export type RelatedParty = Schemas['RelatedParty'];
export type RelatedPartySummary = Schemas['RelatedPartySummary'];
export type Capability = Schemas['Capability'];
export type CapabilityApplication = Schemas['CapabilityApplication'];
export type InstitutionReference = Schemas['InstitutionReference'];
export type CapabilityDiscovery = Schemas['CapabilityDiscovery'];
export type Institution = Schemas['Institution'];
export type CustomerDocument = Schemas['CustomerDocument'];
export type WebhookEventType = Schemas['WebhookEventType'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
export type WebhookEndpointWithSecret = Schemas['WebhookEndpointWithSecret'];
export type RuleTrigger = Schemas['RuleTrigger'];
export type RuleAction = Schemas['RuleAction'];
export type RuleAccountTarget = Schemas['RuleAccountTarget'];
export type RuleDestinationTarget = Schemas['RuleDestinationTarget'];
export type Rule = Schemas['Rule'];
export type Recipient = Schemas['Recipient'];
export type RecipientDestination = Schemas['RecipientDestination'];
export type Task = Schemas['Task'];
export type TaskResource = Schemas['TaskResource'];
export type TaskSubmission = Schemas['TaskSubmission'];
export type Money = Schemas['Money'];
export type Quote = Schemas['Quote'];
export type Transfer = Schemas['Transfer'];
export type TransferSource = Schemas['TransferSource'];
export type SandboxTopUp = Schemas['SandboxTopUp'];
export type StatusReason = Schemas['StatusReason'];
export type FieldError = Schemas['FieldError'];
export type BlockingResource = Schemas['BlockingResource'];
export type Problem = Schemas['Problem'];
export type WebhookEvent = Schemas['WebhookEvent'];

export type CreateCustomerInput = Schemas['CreateCustomerInput'];
export type CreateAccountInput = Schemas['CreateAccountInput'];
export type ReplaceAccountFeesInput = Schemas['ReplaceAccountFeesInput'];
export type CreateRelatedPartyInput = Schemas['CreateRelatedPartyInput'];
export type CreateCapabilityInput = Schemas['CreateCapabilityInput'];
export type CreateRuleInput = Schemas['CreateRuleInput'];
export type UpdateRuleStatusInput = Schemas['UpdateRuleStatusInput'];
export type CreateWebhookEndpointInput = Schemas['CreateWebhookEndpointInput'];
export type UpdateWebhookEndpointInput = Schemas['UpdateWebhookEndpointInput'];
export type SandboxTopUpInput = Schemas['SandboxTopUpInput'];
export type SandboxSetCapabilityStatusInput = Schemas['SandboxSetCapabilityStatusInput'];

/**
 * A record whose REST path needs its customer: the facade always returns it with `customerId`, so
 * GraphQL entity keys (`customerId id`) can be resolved even where the upstream record lacks it.
 */
export type CustomerScoped<T> = T & { customerId: string };

/**
 * A collection under a customer, as the contract names it in its paths (`related-parties`): the
 * last segment of each `/v3/customers/{customerId}/<collection>` path it declares.
 */
export type CustomerCollection = {
  [P in keyof paths]: P extends `/v3/customers/{customerId}/${infer C}`
    ? C extends `${string}/${string}`
      ? never
      : C
    : never;
}[keyof paths];

/** One page of a cursor-paginated upstream list. */
export interface Page<T> {
  data: T[];
  /** Opaque; pass back as `cursor` for the next page. Null on the last page. */
  nextCursor: string | null;
  hasMore: boolean;
}

/**
 * A record as the lists return it, with what replays and reconciliation compare: its id, its times,
 * and its `state` or `status` where it has one.
 */
export interface ListedRecord {
  id: string;
  createdAt: string;
  updatedAt: string;
  state?: string;
  status?: string;
}

/** Paging and filtering of every upstream list. */
export interface PageParams {
  /** Page size, 1 to 100 (upstream default 25). */
  limit?: number;
  /** The `nextCursor` of the previous page of the same list and filter. */
  cursor?: string;
  /** RFC 3339: only records updated at or after it. */
  updatedSince?: string;
}

/** The result of an effectful call, with what a client needs to retry it safely. */
export interface MutationResult<T> {
  data: T;
  /** The Idempotency-Key sent (the caller's, or one generated for this call). */
  idempotencyKey: string;
  /** True when the upstream answered with the original result of an earlier identical request. */
  replayed: boolean;
}

/** The methods the upstream layer sends. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One upstream request, described without any transport detail. */
export interface UpstreamRequest {
  method: HttpMethod;
  /** The path under the base URL, starting with `/v3/`, built by `restPath` (every id in it plain). */
  path: string;
  query?: Readonly<Record<string, string | number | undefined>>;
  /** Serialised as JSON when present. */
  body?: unknown;
  /** Sent as `Idempotency-Key`; the same key is reused by every retry of the call. */
  idempotencyKey?: string;
  /**
   * The key as the caller gave it, where `idempotencyKey` is its per-caller digest (see
   * `request.ts`): what the audit trail and the caller see. Never sent.
   */
  callerIdempotencyKey?: string;
  /**
   * The customer this request acts for, where the path does not name one (a sandbox top-up names
   * only its account): set only by an upstream function that has read the resource under that
   * customer first. See `access.ts`.
   */
  actingFor?: string;
}
