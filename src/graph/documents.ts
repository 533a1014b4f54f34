/** Resolvers of `documents.graphql`: customer documents and their archiving. */
import type { Resolvers } from '../generated/graphql.ts';
import { recordByArgs, recordReference } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { archiveDocument } from '../upstream/documents.ts';
import { resolveOwningCustomer } from './customers.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

export const documentResolvers: Resolvers = {
  Query: {
    customerDocument: recordByArgs('CustomerDocument'),
  },
  Mutation: {
    archiveCustomerDocument: async (_parent, { input }, { upstream, loaders }) => {
      const { idempotencyKey } = splitInput(input);
      const result = await archiveDocument(upstream, input.customerId, input.documentId, idempotencyKey);
      written.documentArchived(loaders, { customerId: input.customerId, id: input.documentId });
      return toPayload('document', result);
    },
  },
  CustomerDocument: {
    __resolveReference: recordReference('CustomerDocument'),
    customer: resolveOwningCustomer,
  },
};
