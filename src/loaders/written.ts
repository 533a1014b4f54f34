/**
 * What a write makes stale. A mutation resolver tells these functions what the upstream just
 * wrote; which of the operation's cached reads that changes (the record itself, the lists that may
 * hold it, a parent whose `updatedAt` moved with it) is known here, once, next to the loaders.
 * A written record the upstream handed back replaces any earlier read of it, so the payload's
 * fields read it without another request. Across operations, the upstream response cache drops at
 * least as much for every write, in `src/upstream/` where the request is known
 * (`staleReadsOfWrite` in `response-cache.ts`).
 */
import type {
  Account,
  AccountFees,
  Capability,
  Customer,
  RelatedParty,
  Rule,
  Transfer,
  WebhookEndpoint,
} from '../upstream/types.ts';
import type { Loaders, ScopedKey, ScopedLoader } from './index.ts';

/** Replaces any cached read of a customer's record with the one just written. */
function replace<T>(loader: ScopedLoader<T>, key: ScopedKey, record: T): void {
  loader.clear(key).prime(key, record);
}

export const written = {
  customer(loaders: Loaders, customer: Customer): void {
    loaders.item.Customer.clear({ id: customer.id }).prime({ id: customer.id }, customer);
    loaders.list.Customer.clearAll();
  },

  account(loaders: Loaders, key: ScopedKey, account: Account): void {
    replace(loaders.item.Account, key, account);
    loaders.list.Account.clearAll();
  },

  /** The account record carries its fees: the cached one is stale too. */
  accountFees(loaders: Loaders, key: ScopedKey, fees: AccountFees): void {
    replace(loaders.accountFees, key, fees);
    loaders.item.Account.clear(key);
    loaders.list.Account.clearAll();
  },

  /**
   * Balances changed (and a rule may have swept them, moving money) on an account whose customer
   * the write does not name: every account and transfer read of the operation is stale.
   */
  balances(loaders: Loaders): void {
    loaders.item.Account.clearAll();
    loaders.list.Account.clearAll();
    loaders.list.Transfer.clearAll();
  },

  capability(loaders: Loaders, key: ScopedKey, capability: Capability): void {
    replace(loaders.item.Capability, key, capability);
    loaders.list.Capability.clearAll();
  },

  /** Archived documents answer NOT_FOUND to later reads and leave every list. */
  documentArchived(loaders: Loaders, key: ScopedKey): void {
    loaders.item.CustomerDocument.clear(key);
    loaders.list.CustomerDocument.clearAll();
  },

  /**
   * A quote executed into `transfer`: the quote's status and transferId changed, so any earlier
   * read of it is forgotten and read afresh only if asked for.
   */
  quoteExecuted(loaders: Loaders, quoteKey: ScopedKey, transfer: Transfer): void {
    replace(loaders.item.Transfer, { customerId: quoteKey.customerId, id: transfer.id }, transfer);
    loaders.list.Transfer.clearAll();
    loaders.item.Quote.clear(quoteKey);
    loaders.list.Quote.clearAll();
  },

  /**
   * A party created (`party` given) or archived (an archived party answers NOT_FOUND to later
   * reads, so it is not kept). The parent customer's updatedAt advanced in the same transaction.
   */
  relatedParty(loaders: Loaders, key: ScopedKey, party: RelatedParty | undefined): void {
    if (party === undefined) loaders.item.RelatedParty.clear(key);
    else replace(loaders.item.RelatedParty, key, party);
    loaders.list.RelatedParty.clearAll();
    loaders.item.Customer.clear({ id: key.customerId });
  },

  rule(loaders: Loaders, rule: Rule): void {
    replace(loaders.item.Rule, { customerId: rule.customerId, id: rule.id }, rule);
    loaders.list.Rule.clearAll();
  },

  webhookEndpoint(loaders: Loaders, endpoint: WebhookEndpoint): void {
    loaders.item.WebhookEndpoint.clear({ id: endpoint.id }).prime({ id: endpoint.id }, endpoint);
    loaders.list.WebhookEndpoint.clearAll();
  },
};
