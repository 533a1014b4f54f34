/** Resolvers of `capabilities.graphql`: capabilities and their institution applications. */
import type { Resolvers } from '../generated/graphql.ts';
import { recordByArgs, recordReference } from './resolver-shapes.ts';
import { written } from '../loaders/written.ts';
import { createCapability } from '../upstream/capabilities.ts';
import { resolveOwningCustomer } from './customers.ts';
import { splitInput, toPayload } from './mutation-payload.ts';

export const capabilityResolvers: Resolvers = {
  Query: { capability: recordByArgs('Capability') },
  Mutation: {
    createCapability: async (_parent, { input }, { upstream, loaders }) => {
      const { body, idempotencyKey } = splitInput(input, ['customerId']);
      const result = await createCapability(upstream, input.customerId, body, idempotencyKey);
      const capability = { ...result.data, customerId: input.customerId };
      written.record(loaders, 'Capability', { customerId: input.customerId, id: capability.id }, capability);
      return toPayload('capability', { ...result, data: capability });
    },
  },
  Capability: {
    // An application's record does not name its customer; its tasks are read under the capability's.
    applications: (capability) =>
      capability.applications.map((application) => ({ ...application, customerId: capability.customerId })),
    openTasks: (capability, _args, { loaders }) =>
      Promise.all(
        capability.openTaskIds.map((id) => loaders.item.Task.load({ customerId: capability.customerId, id })),
      ),
    __resolveReference: recordReference('Capability'),
    customer: resolveOwningCustomer,
  },
  CapabilityApplication: {
    openTasks: (application, _args, { loaders }) => {
      const { customerId } = application as typeof application & { customerId: string };
      return Promise.all(application.openTaskIds.map((id) => loaders.item.Task.load({ customerId, id })));
    },
  },
};
