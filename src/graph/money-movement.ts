/** Resolvers of `money-movement.graphql`: quotes and transfers, and the funds targets they share with rules. */
import type { Resolvers } from '../generated/graphql.ts';
import type { Transfer } from '../upstream/types.ts';
import { recordByArgs, recordReference, linkedRecord } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { executeQuote } from '../upstream/money-movement.ts';
import { resolveOwningCustomer } from './customers.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

/** The quote a transfer executed, if any: a transfer's own field and the payload of `executeQuote`. */
const linkedQuote = linkedRecord('Quote', (transfer: Transfer) => transfer.quoteId);

export const moneyMovementResolvers: Resolvers = {
  Query: {
    quote: recordByArgs('Quote'),
    transfer: recordByArgs('Transfer'),
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
    quote: (payload, args, context, info) => linkedQuote(payload.transfer, args, context, info),
  },
  Quote: {
    __resolveReference: recordReference('Quote'),
    customer: resolveOwningCustomer,
    sourceAccount: linkedRecord('Account', (quote) => quote.sourceAccountId),
    transfer: linkedRecord('Transfer', (quote) => quote.transferId),
  },
  Transfer: {
    __resolveReference: recordReference('Transfer'),
    customer: resolveOwningCustomer,
    sourceAccountId: (transfer) => transfer.source.accountId,
    sourceAccount: linkedRecord('Account', (transfer) => transfer.source.accountId),
    target: (transfer) => ({ ...transfer.target, customerId: transfer.customerId }),
    rule: linkedRecord('Rule', (transfer) => transfer.ruleId),
    quote: linkedQuote,
  },
  FundsTarget: {
    accountId: (target) => target.account?.accountId ?? null,
    account: linkedRecord('Account', (target) => target.account?.accountId),
    destination: (target) =>
      target.destination ? { ...target.destination, customerId: target.customerId } : null,
  },
  DestinationTarget: {
    recipient: linkedRecord('Recipient', (target) => target.recipientId),
    destination: async (target, _args, { loaders }) => {
      const recipient = await loaders.item.Recipient.load({
        customerId: target.customerId,
        id: target.recipientId,
      });
      return recipient.destinations.find((destination) => destination.id === target.destinationId) ?? null;
    },
  },
};
