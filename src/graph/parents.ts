/**
 * The parent value each GraphQL object type resolves from (codegen `mappers`). Most are the REST
 * records themselves; the few here add what a nested resolver needs that the REST shape leaves to
 * its enclosing record (the customer of a rule's action, the account of a fees object).
 */
import type {
  AccountFees,
  Institution,
  InstitutionReference,
  RelatedParty,
  RelatedPartySummary,
  RuleAction,
  RuleDestinationTarget,
} from '../upstream/types.ts';

/**
 * A related party as a list returns it (summary) or as a read returns it (full record). Resolvers
 * of fields only the full record holds complete a summary with one read.
 */
export type RelatedPartyParent = RelatedParty | RelatedPartySummary;

/** An institution as an application embeds it (reference) or as a read returns it. */
export type InstitutionParent = Institution | InstitutionReference;

/** An account's fees; always carries the account id, which the account record's `fees` lacks. */
export type AccountFeesParent = AccountFees;

/** A rule's action or a transfer's target, with the customer whose account or recipient it names. */
export type FundsTargetParent = RuleAction & { customerId: string };

/** A recipient destination as a funds target, with the customer that owns the recipient. */
export type DestinationTargetParent = RuleDestinationTarget & { customerId: string };

/** The result of `setAccountFees`, with the customer needed to read the account afterwards. */
export interface SetAccountFeesPayloadParent {
  fees: AccountFees;
  customerId: string;
  idempotencyKey: string;
  replayed: boolean;
}
