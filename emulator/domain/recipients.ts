/**
 * A customer's recipients and their destinations, the targets of transfers and rules; read-only.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { presentRecord } from './presenters.ts';

/** Handlers of recipients (read-only, with their destinations). */
export function recipientHandlers(context: DomainContext): RouteHandlers {
  return {
    listRecipients: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.recipients, customer.id), presentRecord);
    },

    getRecipient: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return dataResponse(
        presentRecord(
          requireOwned(env.recipients, customer.id, pathParam(request, 'recipientId'), 'recipient'),
        ),
      );
    },
  };
}
