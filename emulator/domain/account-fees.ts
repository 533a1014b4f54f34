/**
 * The fees of an account (`GET`/`PUT /v3/customers/{customerId}/accounts/{accountId}/fees`): the
 * read is a mirror of the last replace, with `breakdown.developer` null until a rule is set.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DeveloperFee } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse } from './list-response.ts';
import { pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { emitAccountUpdated } from './money-flows.ts';
import { presentAccountFees } from './presenters.ts';
import { stateConflict } from './problems.ts';

type ReplaceAccountFeesBody = { breakdown: { developer: DeveloperFee | null } };

/** Handlers of the account fees: the read, and the replace whose result the read mirrors. */
export function accountFeeHandlers(context: DomainContext): RouteHandlers {
  return {
    getAccountFees: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const account = requireOwned(env.accounts, customer.id, pathParam(request, 'accountId'), 'account');
      return dataResponse(presentAccountFees(account));
    },

    replaceAccountFees: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const account = requireOwned(env.accounts, customer.id, pathParam(request, 'accountId'), 'account');
      if (account.archivedAt !== null) {
        throw stateConflict(
          'account_archived',
          `Account ${account.id} is archived; its fees can no longer change.`,
        );
      }
      const { developer } = (request.body as ReplaceAccountFeesBody).breakdown;
      const next = developer === null ? null : { fixed: developer.fixed, bips: developer.bips };
      const current = account.fees.breakdown.developer;
      // Writing the same fees again is not a change: no new updatedAt, no event.
      if (current?.fixed !== next?.fixed || current?.bips !== next?.bips) {
        account.fees = { breakdown: { developer: next } };
        account.updatedAt = context.stamp();
        emitAccountUpdated(context, request.environment, account);
      }
      return dataResponse(presentAccountFees(account));
    },
  };
}
