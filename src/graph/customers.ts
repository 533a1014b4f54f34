/** Resolvers of `customers.graphql`: customers and the lists hanging off a customer. */
import type { Resolvers } from '../generated/graphql.ts';
import { createCustomer } from '../upstream/customers.ts';
import type { CreateCustomerInput } from '../upstream/types.ts';
import type { GraphQLResolveInfo } from 'graphql';
import type { GraphContext } from './context.ts';
import { CUSTOMER_LISTS, readRecord } from './look-ahead.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import { readScopedCustomers } from './scoped-customers.ts';
import { toConnection, toPageParams } from './pagination.ts';

/**
 * `customer` of any record that names its customer: one read per distinct customer per operation,
 * with the customer's selected lists started alongside it.
 */
export function resolveOwningCustomer(
  parent: { customerId: string },
  _args: unknown,
  context: GraphContext,
  info: GraphQLResolveInfo,
) {
  return readRecord('Customer', { id: parent.customerId }, context, info);
}

// Each list reads through the look-ahead's entry for it, so a list started ahead is a cache hit.
export const customerResolvers: Resolvers = {
  Query: {
    customer: (_parent, { id }, context, info) => readRecord('Customer', { id }, context, info),
    customers: async (_parent, args, { caller, loaders }) => {
      const page = toPageParams(args);
      // Only operators may list the platform's customers; everyone else sees its own.
      if (caller !== undefined && !caller.operator && caller.scope.kind === 'customers') {
        return toConnection(await readScopedCustomers(loaders, caller.scope.customerIds, page), args);
      }
      return toConnection(await loaders.customers.load(page), args);
    },
  },
  Mutation: {
    createCustomer: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input);
      // `type` is a String in the schema (an open set); the upstream validates it and a refusal
      // points at `/type`, which the error mapping turns into the path `input.type`.
      const result = await createCustomer(upstream, body as CreateCustomerInput, idempotencyKey);
      loaders.customer.clear(result.data.id).prime(result.data.id, result.data);
      loaders.customers.clearAll();
      return toPayload('customer', result);
    },
  },
  Customer: {
    __resolveReference: (reference, context, info) =>
      readRecord('Customer', { id: reference.id }, context, info),
    accounts: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.accounts.load(customer, args, loaders), args),
    relatedParties: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.relatedParties.load(customer, args, loaders), args),
    capabilities: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.capabilities.load(customer, args, loaders), args),
    documents: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.documents.load(customer, args, loaders), args),
    recipients: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.recipients.load(customer, args, loaders), args),
    tasks: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.tasks.load(customer, args, loaders), args),
    quotes: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.quotes.load(customer, args, loaders), args),
    transfers: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.transfers.load(customer, args, loaders), args),
    rules: async (customer, args, { loaders }) =>
      toConnection(await CUSTOMER_LISTS.rules.load(customer, args, loaders), args),
  },
};
