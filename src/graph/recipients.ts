/** Resolvers of `recipients.graphql`. */
import type { Resolvers } from '../generated/graphql.ts';
import { recordByArgs, recordReference } from './resolver-shapes.ts';
import { resolveOwningCustomer } from './customers.ts';

export const recipientResolvers: Resolvers = {
  Query: {
    recipient: recordByArgs('Recipient'),
  },
  Recipient: {
    __resolveReference: recordReference('Recipient'),
    customer: resolveOwningCustomer,
  },
};
