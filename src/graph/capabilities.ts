/** Resolvers of `capabilities.graphql`: capabilities and their institution applications. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';

export const capabilityResolvers: Resolvers = {
  Query: {
    capability: (_parent, { customerId, id }, { loaders }) => loaders.capability.load({ customerId, id }),
  },
  Capability: {
    __resolveReference: (reference, { loaders }) =>
      loaders.capability.load({ customerId: reference.customerId, id: reference.id }),
    customer: resolveOwningCustomer,
  },
};
