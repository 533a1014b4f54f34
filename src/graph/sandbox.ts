/** Resolvers of `sandbox.graphql`: test funds and forced capability statuses. */
import type { Resolvers } from '../generated/graphql.ts';
import { sandboxSetCapabilityStatus, sandboxTopUp } from '../upstream/sandbox.ts';
import { SANDBOX_CAPABILITY_STATUS_VALUES } from './enum-values.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

export const sandboxResolvers: Resolvers = {
  // The upstream takes snake_case values; the enum's internal values are those strings.
  SandboxCapabilityStatus: SANDBOX_CAPABILITY_STATUS_VALUES,
  Mutation: {
    sandboxTopUp: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['accountId']);
      const result = await sandboxTopUp(upstream, input.accountId, body, idempotencyKey);
      // Balances changed (and a rule may have swept them) on an account whose customer the
      // top-up path does not name: forget every account read of this operation.
      loaders.account.clearAll();
      loaders.accounts.clearAll();
      loaders.transfers.clearAll();
      return toPayload('topUp', result);
    },
    sandboxSetCapabilityStatus: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['customerId', 'capabilityId']);
      const result = await sandboxSetCapabilityStatus(
        upstream,
        input.customerId,
        input.capabilityId,
        body,
        idempotencyKey,
      );
      const key = { customerId: input.customerId, id: input.capabilityId };
      loaders.capability.clear(key).prime(key, result.data);
      loaders.capabilities.clearAll();
      return toPayload('capability', result);
    },
  },
};
