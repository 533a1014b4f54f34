/** Resolvers of `recipients.graphql`. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';

export const recipientResolvers: Resolvers = {
  Query: {
    recipient: (_parent, { customerId, id }, { loaders }) => loaders.recipient.load({ customerId, id }),
  },
  Recipient: {
    __resolveReference: (reference, { loaders }) =>
      loaders.recipient.load({ customerId: reference.customerId, id: reference.id }),
    customer: resolveOwningCustomer,
  },
};
