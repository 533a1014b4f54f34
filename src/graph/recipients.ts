/** Resolvers of `recipients.graphql`. */
import type { Resolvers } from '../generated/graphql.ts';
import { customerRecordByArgs, customerRecordReference } from './resolver-shapes.ts';
import { resolveOwningCustomer } from './customers.ts';

export const recipientResolvers: Resolvers = {
  Query: {
    recipient: customerRecordByArgs('Recipient'),
  },
  Recipient: {
    __resolveReference: customerRecordReference('Recipient'),
    customer: resolveOwningCustomer,
  },
};
