/** Resolvers of `accounts.graphql`: accounts, their fees, and the account mutations. */
import { GraphQLError } from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { recordByArgs, recordReference, linkedRecord } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { archiveAccount, createAccount, replaceAccountFees } from '../upstream/accounts.ts';
import type { CreateAccountInput, ReplaceAccountFeesInput } from '../upstream/types.ts';
import { resolveOwningCustomer } from './customers.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

export const accountResolvers: Resolvers = {
  Query: { account: recordByArgs('Account') },
  Mutation: {
    createAccount: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['customerId']);
      // `type` and `origin` are strings in the schema (open sets); the upstream refuses other values.
      const result = await createAccount(
        upstream,
        input.customerId,
        body as CreateAccountInput,
        idempotencyKey,
      );
      written.record(loaders, 'Account', { customerId: input.customerId, id: result.data.id }, result.data);
      return toPayload('account', result);
    },
    setAccountFees: async (_parent, { input }, { upstream, loaders }) => {
      // An empty breakdown would remove the fee as `developer: null` does, silently: removing a fee
      // must be said (`developer: null`), so a breakdown without `developer` is refused.
      if (!('developer' in input.breakdown)) {
        throw new GraphQLError(
          'The breakdown names no fee: give `developer` a fee to set it, or `developer: null` to remove it.',
          { extensions: { code: 'BAD_USER_INPUT', argumentName: 'input.breakdown.developer' } },
        );
      }
      const { body, idempotencyKey } = splitInput(input, ['customerId', 'accountId']);
      // `developer: null` removes the fee, so it must reach the upstream as null, not be dropped.
      const fees: ReplaceAccountFeesInput = { breakdown: { developer: body.breakdown.developer ?? null } };
      const result = await replaceAccountFees(
        upstream,
        input.customerId,
        input.accountId,
        fees,
        idempotencyKey,
      );
      written.accountFees(loaders, { customerId: input.customerId, id: input.accountId }, result.data);
      return { ...toPayload('fees', result), customerId: input.customerId };
    },
    archiveAccount: async (_parent, { input }, { upstream, loaders }) => {
      const { idempotencyKey } = splitInput(input);
      const result = await archiveAccount(upstream, input.customerId, input.accountId, idempotencyKey);
      written.record(loaders, 'Account', { customerId: input.customerId, id: input.accountId }, result.data);
      return toPayload('account', result);
    },
  },
  SetAccountFeesPayload: {
    // Read after the fees were replaced (the payload resolves once the mutation has answered).
    account: linkedRecord('Account', (payload) => payload.fees.accountId),
  },
  Account: {
    openTasks: (account, _args, { loaders }) =>
      Promise.all(
        account.openTaskIds.map((id) => loaders.item.Task.load({ customerId: account.customerId, id })),
      ),
    __resolveReference: recordReference('Account'),
    customer: resolveOwningCustomer,
    // The record carries its fees; the fees endpoint is only a fallback for a record without them.
    fees: (account, _args, { loaders }) =>
      account.fees
        ? { accountId: account.id, breakdown: account.fees.breakdown }
        : loaders.accountFees.load({ customerId: account.customerId, id: account.id }),
  },
};
