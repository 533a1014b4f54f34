/**
 * What a write makes stale. A mutation resolver tells these functions what the upstream just
 * wrote; which of the operation's cached reads that changes (the record itself, the lists that may
 * hold it, a parent whose `updatedAt` moved with it) is known here, once, next to the loaders.
 * A written record the upstream handed back replaces any earlier read of it, so the payload's
 * fields read it without another request. Across operations, the upstream response cache drops at
 * least as much for every write, in `src/upstream/` where the request is known
 * (`staleReadsOfWrite` in `response-cache.ts`).
 */
import type { RecordOf, RecordTypeName } from '../records.ts';
import type { AccountFees, RelatedParty, Transfer } from '../upstream/types.ts';
import type { Loaders, RecordKeyOf, ScopedKey, ScopedLoader } from './index.ts';

/** Replaces any cached read of a customer's record with the one just written. */
function replace<T>(loader: ScopedLoader<T>, key: ScopedKey, record: T): void {
  loader.clear(key).prime(key, record);
}

export const written = {
  /** A record of `type` written: it replaces any earlier read of it, and its type's lists are stale. */
  record<T extends RecordTypeName>(
    loaders: Loaders,
    type: T,
    key: RecordKeyOf<T>,
    record: RecordOf<T>,
  ): void {
    loaders.item[type].clear(key).prime(key, record);
    loaders.list[type].clearAll();
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
    written.record(loaders, 'Transfer', { customerId: quoteKey.customerId, id: transfer.id }, transfer);
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
};
