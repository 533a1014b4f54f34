/**
 * A customer's transfers; read-only here, since transfers start from quotes and rules
 * (`money-flows.ts`).
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { presentRecord } from './presenters.ts';

/** Handlers of transfers (read-only; transfers start from quotes and rules, see `money-flows.ts`). */
export function transferHandlers(context: DomainContext): RouteHandlers {
  return {
    listTransfers: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.transfers, customer.id), presentRecord);
    },

    getTransfer: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return dataResponse(
        presentRecord(requireOwned(env.transfers, customer.id, pathParam(request, 'transferId'), 'transfer')),
      );
    },
  };
}
