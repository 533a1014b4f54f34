/** Resolvers of `sandbox.graphql`: test funds and forced capability statuses. */
import { GraphQLError } from 'graphql';
import type { Resolvers } from '../generated/graphql.ts';
import { written } from '../loaders/written.ts';
import { sandboxSetCapabilityStatus, sandboxTopUp } from '../upstream/sandbox.ts';
import { readRecord } from './look-ahead.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

/**
 * The statuses the spec lets a sandbox request force, spelled as `Capability.status` reads them.
 * The input is a string like the status it sets (an open upstream set), so the facade checks the
 * closed request subset itself, before any upstream call.
 */
const FORCEABLE_CAPABILITY_STATUSES = ['ready', 'rejected', 'restricted'] as const;
type ForceableCapabilityStatus = (typeof FORCEABLE_CAPABILITY_STATUSES)[number];

function isForceableStatus(status: string): status is ForceableCapabilityStatus {
  return (FORCEABLE_CAPABILITY_STATUSES as readonly string[]).includes(status);
}

export const sandboxResolvers: Resolvers = {
  SandboxTopUpPayload: {
    // Read after the top-up (the mutation forgot every account read), through the loaders.
    account: (payload, _args, context, info) => {
      const { creditedAccount } = payload as { creditedAccount?: { customerId: string; id: string } };
      return creditedAccount ? readRecord('Account', creditedAccount, context, info) : null;
    },
  },
  Mutation: {
    sandboxTopUp: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['accountId', 'customerId']);
      const result = await sandboxTopUp(upstream, input.accountId, body, idempotencyKey);
      written.balances(loaders);
      const customerId = input.customerId ?? result.ownerCustomerId;
      return {
        ...toPayload('topUp', result),
        creditedAccount: customerId === undefined ? undefined : { customerId, id: input.accountId },
      };
    },
    sandboxSetCapabilityStatus: async (_parent, { input }, { upstream, loaders }) => {
      const { status } = input;
      if (!isForceableStatus(status)) {
        throw new GraphQLError(
          `A sandbox capability can be forced only to ${FORCEABLE_CAPABILITY_STATUSES.map((value) => `"${value}"`).join(', ')}; got ${JSON.stringify(status)}.`,
          { extensions: { code: 'BAD_USER_INPUT', argumentName: 'input.status' } },
        );
      }
      const { idempotencyKey } = splitInput(input);
      const result = await sandboxSetCapabilityStatus(
        upstream,
        input.customerId,
        input.capabilityId,
        { status },
        idempotencyKey,
      );
      written.record(
        loaders,
        'Capability',
        { customerId: input.customerId, id: input.capabilityId },
        result.data,
      );
      return toPayload('capability', result);
    },
  },
};
