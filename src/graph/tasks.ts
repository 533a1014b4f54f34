/** Resolvers of `tasks.graphql`: tasks and their submissions. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';
import { toConnection, toPageParams } from './pagination.ts';

export const taskResolvers: Resolvers = {
  Query: {
    task: (_parent, { customerId, id }, { loaders }) => loaders.task.load({ customerId, id }),
  },
  Task: {
    __resolveReference: (reference, { loaders }) =>
      loaders.task.load({ customerId: reference.customerId, id: reference.id }),
    customer: resolveOwningCustomer,
    submissions: async (task, args, { loaders }) =>
      toConnection(
        await loaders.taskSubmissions.load({
          customerId: task.customerId,
          taskId: task.id,
          ...toPageParams(args),
        }),
      ),
  },
  TaskSubmission: {
    task: (submission, _args, { loaders }) =>
      loaders.task.load({ customerId: submission.customerId, id: submission.taskId }),
  },
};
