/** Resolvers of `money-movement.graphql`: quotes and transfers, and the funds targets they share with rules. */
import type { Resolvers } from '../generated/graphql.ts';
import { customerRecordByArgs, customerRecordReference } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { executeQuote } from '../upstream/money-movement.ts';
import { resolveOwningCustomer } from './customers.ts';
import { readRecord } from './look-ahead.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

export const moneyMovementResolvers: Resolvers = {
  Query: {
    quote: customerRecordByArgs('Quote'),
    transfer: customerRecordByArgs('Transfer'),
  },
  Mutation: {
    executeQuote: async (_parent, { input }, { upstream, loaders }) => {
      const { idempotencyKey } = splitInput(input);
      const result = await executeQuote(upstream, input.customerId, input.quoteId, idempotencyKey);
      const transfer = { ...result.data, customerId: input.customerId };
      written.quoteExecuted(loaders, { customerId: input.customerId, id: input.quoteId }, transfer);
      return toPayload('transfer', { ...result, data: transfer });
    },
  },
  ExecuteQuotePayload: {
    quote: ({ transfer }, _args, context, info) =>
      transfer.quoteId
        ? readRecord('Quote', { customerId: transfer.customerId, id: transfer.quoteId }, context, info)
        : null,
  },
  Quote: {
    __resolveReference: customerRecordReference('Quote'),
    customer: resolveOwningCustomer,
    sourceAccount: (quote, _args, context, info) =>
      readRecord('Account', { customerId: quote.customerId, id: quote.sourceAccountId }, context, info),
    transfer: (quote, _args, context, info) =>
      quote.transferId
        ? readRecord('Transfer', { customerId: quote.customerId, id: quote.transferId }, context, info)
        : null,
  },
  Transfer: {
    __resolveReference: customerRecordReference('Transfer'),
    customer: resolveOwningCustomer,
    sourceAccountId: (transfer) => transfer.source.accountId,
    sourceAccount: (transfer, _args, context, info) =>
      readRecord(
        'Account',
        { customerId: transfer.customerId, id: transfer.source.accountId },
        context,
        info,
      ),
    target: (transfer) => ({ ...transfer.target, customerId: transfer.customerId }),
    rule: (transfer, _args, context, info) =>
      transfer.ruleId
        ? readRecord('Rule', { customerId: transfer.customerId, id: transfer.ruleId }, context, info)
        : null,
    quote: (transfer, _args, context, info) =>
      transfer.quoteId
        ? readRecord('Quote', { customerId: transfer.customerId, id: transfer.quoteId }, context, info)
        : null,
  },
  FundsTarget: {
    accountId: (target) => target.account?.accountId ?? null,
    account: (target, _args, context, info) =>
      target.account
        ? readRecord(
            'Account',
            { customerId: target.customerId, id: target.account.accountId },
            context,
            info,
          )
        : null,
    destination: (target) =>
      target.destination ? { ...target.destination, customerId: target.customerId } : null,
  },
  DestinationTarget: {
    recipient: (target, _args, context, info) =>
      readRecord('Recipient', { customerId: target.customerId, id: target.recipientId }, context, info),
    destination: async (target, _args, { loaders }) => {
      const recipient = await loaders.recipient.load({
        customerId: target.customerId,
        id: target.recipientId,
      });
      return recipient.destinations.find((destination) => destination.id === target.destinationId) ?? null;
    },
  },
};
