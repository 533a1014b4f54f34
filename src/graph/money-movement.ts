/** Resolvers of `money-movement.graphql`: quotes and transfers, and the funds targets they share with rules. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';

export const moneyMovementResolvers: Resolvers = {
  Query: {
    quote: (_parent, { customerId, id }, { loaders }) => loaders.quote.load({ customerId, id }),
    transfer: (_parent, { customerId, id }, { loaders }) => loaders.transfer.load({ customerId, id }),
  },
  Quote: {
    __resolveReference: (reference, { loaders }) =>
      loaders.quote.load({ customerId: reference.customerId, id: reference.id }),
    customer: resolveOwningCustomer,
    sourceAccount: (quote, _args, { loaders }) =>
      loaders.account.load({ customerId: quote.customerId, id: quote.sourceAccountId }),
    transfer: (quote, _args, { loaders }) =>
      quote.transferId ? loaders.transfer.load({ customerId: quote.customerId, id: quote.transferId }) : null,
  },
  Transfer: {
    __resolveReference: (reference, { loaders }) =>
      loaders.transfer.load({ customerId: reference.customerId, id: reference.id }),
    customer: resolveOwningCustomer,
    sourceAccountId: (transfer) => transfer.source.accountId,
    sourceAccount: (transfer, _args, { loaders }) =>
      loaders.account.load({ customerId: transfer.customerId, id: transfer.source.accountId }),
    target: (transfer) => ({ ...transfer.target, customerId: transfer.customerId }),
    rule: (transfer, _args, { loaders }) =>
      transfer.ruleId ? loaders.rule.load({ customerId: transfer.customerId, id: transfer.ruleId }) : null,
    quote: (transfer, _args, { loaders }) =>
      transfer.quoteId ? loaders.quote.load({ customerId: transfer.customerId, id: transfer.quoteId }) : null,
  },
  FundsTarget: {
    accountId: (target) => target.account?.accountId ?? null,
    account: (target, _args, { loaders }) =>
      target.account
        ? loaders.account.load({ customerId: target.customerId, id: target.account.accountId })
        : null,
    destination: (target) =>
      target.destination ? { ...target.destination, customerId: target.customerId } : null,
  },
  DestinationTarget: {
    recipient: (target, _args, { loaders }) =>
      loaders.recipient.load({ customerId: target.customerId, id: target.recipientId }),
    destination: async (target, _args, { loaders }) => {
      const recipient = await loaders.recipient.load({
        customerId: target.customerId,
        id: target.recipientId,
      });
      return recipient.destinations.find((destination) => destination.id === target.destinationId) ?? null;
    },
  },
};
