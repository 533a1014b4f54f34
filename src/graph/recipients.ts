/** Resolvers of `recipients.graphql`. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';
import { readRecord } from './look-ahead.ts';

export const recipientResolvers: Resolvers = {
  Query: {
    recipient: (_parent, { customerId, id }, context, info) =>
      readRecord('Recipient', { customerId, id }, context, info),
  },
  Recipient: {
    __resolveReference: (reference, context, info) =>
      readRecord('Recipient', { customerId: reference.customerId, id: reference.id }, context, info),
    customer: resolveOwningCustomer,
  },
};
