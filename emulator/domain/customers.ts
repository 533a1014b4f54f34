/**
 * Customers: list, get and create, and the `customer.created` / `customer.updated` events; a
 * customer is the parent of every other record but institutions and webhook endpoints.
 */
import type { RouteHandlers } from '../http/types.ts';
import { newId } from '../store/ids.ts';
import type { CustomerRecord } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { pathParam, requireCustomer } from './lookups.ts';
import { presentRecord } from './presenters.ts';
import { stateConflict } from './problems.ts';

type CreateCustomerBody = { type: string; externalId: string; displayName?: string; email?: string | null };

/** Announces a customer change (`customer.created` or `customer.updated`). */
export function emitCustomerChange(
  context: DomainContext,
  environment: 'sandbox' | 'live',
  type: 'customer.created' | 'customer.updated',
  customer: CustomerRecord,
): void {
  context.emit(environment, type, {
    customerId: customer.id,
    resourceType: 'customer',
    resourceId: customer.id,
    object: presentRecord(customer),
    occurredAt: customer.updatedAt,
  });
}

/** Handlers of the customers group: list, get, create. */
export function customerHandlers(context: DomainContext): RouteHandlers {
  return {
    listCustomers: (request) =>
      listResponse(request, context.env(request.environment).customers.values(), presentRecord),

    getCustomer: (request) => {
      const customer = requireCustomer(context.env(request.environment), pathParam(request, 'customerId'));
      return dataResponse(presentRecord(customer));
    },

    createCustomer: (request) => {
      const env = context.env(request.environment);
      const body = request.body as CreateCustomerBody;
      for (const existing of env.customers.values()) {
        if (existing.externalId === body.externalId) {
          throw stateConflict(
            'external_id_in_use',
            `Customer ${existing.id} already has externalId "${body.externalId}"; externalId is unique per environment.`,
          );
        }
      }
      const now = context.stamp();
      const customer: CustomerRecord = {
        id: newId('cus'),
        type: body.type,
        externalId: body.externalId,
        // displayName is optional on create but always present on the record.
        displayName: body.displayName ?? body.externalId,
        email: body.email ?? null,
        status: 'active',
        createdAt: now,
        updatedAt: now,
      };
      env.customers.set(customer.id, customer);
      emitCustomerChange(context, request.environment, 'customer.created', customer);
      return dataResponse(presentRecord(customer), 201);
    },
  };
}
