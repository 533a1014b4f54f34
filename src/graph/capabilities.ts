/** Resolvers of `capabilities.graphql`: capabilities and their institution applications. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';
import { readRecord } from './look-ahead.ts';

export const capabilityResolvers: Resolvers = {
  Query: {
    capability: (_parent, { customerId, id }, context, info) =>
      readRecord('Capability', { customerId, id }, context, info),
  },
  Capability: {
    __resolveReference: (reference, context, info) =>
      readRecord('Capability', { customerId: reference.customerId, id: reference.id }, context, info),
    customer: resolveOwningCustomer,
  },
};
