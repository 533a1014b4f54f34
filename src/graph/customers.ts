/** Resolvers of `customers.graphql`: customers and the lists hanging off a customer. */
import type { Resolvers } from '../generated/graphql.ts';
import { createCustomer } from '../upstream/customers.ts';
import type { CreateCustomerInput } from '../upstream/types.ts';
import type { GraphContext } from './context.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import { readScopedCustomers } from './scoped-customers.ts';
import { toConnection, toPageParams, type ConnectionArgs } from './pagination.ts';

/** `customer` of any record that names its customer: one read per distinct customer per operation. */
export function resolveOwningCustomer(
  parent: { customerId: string },
  _args: unknown,
  { loaders }: GraphContext,
) {
  return loaders.customer.load(parent.customerId);
}

/** The page key of one of a customer's lists. */
function customerPage(customer: { id: string }, args: ConnectionArgs) {
  return { customerId: customer.id, ...toPageParams(args) };
}

export const customerResolvers: Resolvers = {
  Query: {
    customer: (_parent, { id }, { loaders }) => loaders.customer.load(id),
    customers: async (_parent, args, { caller, loaders }) => {
      const page = toPageParams(args);
      // Only operators may list the platform's customers; everyone else sees its own.
      if (caller !== undefined && !caller.operator && caller.scope.kind === 'customers') {
        return toConnection(await readScopedCustomers(loaders, caller.scope.customerIds, page));
      }
      return toConnection(await loaders.customers.load(page));
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
    __resolveReference: (reference, { loaders }) => loaders.customer.load(reference.id),
    accounts: async (customer, args, { loaders }) =>
      toConnection(await loaders.accounts.load(customerPage(customer, args))),
    relatedParties: async (customer, args, { loaders }) =>
      toConnection(await loaders.relatedParties.load(customerPage(customer, args))),
    capabilities: async (customer, args, { loaders }) =>
      toConnection(await loaders.capabilities.load(customerPage(customer, args))),
    documents: async (customer, args, { loaders }) =>
      toConnection(await loaders.documents.load(customerPage(customer, args))),
    recipients: async (customer, args, { loaders }) =>
      toConnection(await loaders.recipients.load(customerPage(customer, args))),
    tasks: async (customer, args, { loaders }) =>
      toConnection(await loaders.tasks.load(customerPage(customer, args))),
    quotes: async (customer, args, { loaders }) =>
      toConnection(await loaders.quotes.load(customerPage(customer, args))),
    transfers: async (customer, args, { loaders }) =>
      toConnection(await loaders.transfers.load(customerPage(customer, args))),
    rules: async (customer, args, { loaders }) =>
      toConnection(await loaders.rules.load(customerPage(customer, args))),
  },
};
