/**
 * A customer's quotes: list, get and execute; executing an open quote starts its transfer (see
 * `money-flows.ts`) and marks the quote executed.
 */
import type { RouteHandlers } from '../http/types.ts';
import { parseAmount } from '../store/decimal.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { availableAmount, startTransfer } from './money-flows.ts';
import { presentQuote, presentRecord, quoteStatus } from './presenters.ts';
import { quoteAlreadyExecuted, stateConflict } from './problems.ts';

/** Handlers of quotes: list, get, and execute (which creates the transfer). */
export function quoteHandlers(context: DomainContext): RouteHandlers {
  return {
    listQuotes: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.quotes, customer.id), presentQuote(context.clock()));
    },

    getQuote: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const quote = requireOwned(env.quotes, customer.id, pathParam(request, 'quoteId'), 'quote');
      return dataResponse(presentQuote(context.clock())(quote));
    },

    executeQuote: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const quote = requireOwned(env.quotes, customer.id, pathParam(request, 'quoteId'), 'quote');
      if (quote.transferId !== null) throw quoteAlreadyExecuted(quote.id, quote.transferId);
      if (quoteStatus(quote, context.clock()) !== 'open') {
        throw stateConflict(
          'quote_expired',
          `Quote ${quote.id} expired at ${quote.expiresAt}; request a new quote.`,
        );
      }
      const source = env.accounts.get(quote.sourceAccountId);
      if (source?.archivedAt !== null) {
        throw stateConflict(
          'account_archived',
          `The source account ${quote.sourceAccountId} of quote ${quote.id} is archived.`,
        );
      }
      const amount = parseAmount(quote.source.amount);
      if (availableAmount(source, quote.source.currency) < amount) {
        throw stateConflict(
          'insufficient_funds',
          `Account ${source.id} has less than ${quote.source.amount} ${quote.source.currency} available.`,
        );
      }
      // The proceeds go to the customer's oldest open account in the quote's target currency.
      const target = ownedBy(env.accounts, customer.id)
        .filter(
          (account) =>
            account.archivedAt === null &&
            account.currency === quote.target.currency &&
            account.id !== source.id,
        )
        .sort((a, b) =>
          a.createdAt === b.createdAt ? a.id.localeCompare(b.id) : a.createdAt.localeCompare(b.createdAt),
        )[0];
      if (!target) {
        throw stateConflict(
          'no_target_account',
          `Customer ${customer.id} has no open account in ${quote.target.currency} to receive the proceeds of quote ${quote.id}.`,
        );
      }
      const transfer = startTransfer(context, request.environment, {
        customerId: customer.id,
        source,
        amount,
        currency: quote.source.currency,
        target: { account: { accountId: target.id }, destination: null },
        credit: { amount: parseAmount(quote.target.amount), currency: quote.target.currency },
        ruleId: null,
        quoteId: quote.id,
      });
      quote.status = 'executed';
      quote.transferId = transfer.id;
      quote.updatedAt = context.stamp();
      return dataResponse(presentRecord(transfer), 201);
    },
  };
}
