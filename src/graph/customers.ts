/** Resolvers of `customers.graphql`: customers and the lists hanging off a customer. */
import type { Resolvers } from '../generated/graphql.ts';
import { written } from '../loaders/written.ts';
import { createCustomer } from '../upstream/customers.ts';
import type { CreateCustomerInput } from '../upstream/types.ts';
import type { GraphQLResolveInfo } from 'graphql';
import type { GraphContext } from './context.ts';
import { CUSTOMER_LISTS, readRecord } from './look-ahead.ts';
import { splitInput, toPayload } from './mutation-payload.ts';
import { connectionsOf } from './resolver-shapes.ts';
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
      written.customer(loaders, result.data);
      return toPayload('customer', result);
    },
  },
  Customer: {
    __resolveReference: (reference, context, info) =>
      readRecord('Customer', { id: reference.id }, context, info),
    // One list per customer record type of the catalogue, its field named as its list loader.
    ...connectionsOf(CUSTOMER_LISTS),
  },
};
