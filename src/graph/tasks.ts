/** Resolvers of `tasks.graphql`: tasks and their submissions. */
import type { Resolvers } from '../generated/graphql.ts';
import { resolveOwningCustomer } from './customers.ts';
import { toConnection } from './pagination.ts';
import { readRecord, TASK_SUBMISSIONS } from './look-ahead.ts';

export const taskResolvers: Resolvers = {
  Query: {
    task: (_parent, { customerId, id }, context, info) =>
      readRecord('Task', { customerId, id }, context, info),
    taskSubmission: (_parent, { customerId, taskId, id }, { loaders }) =>
      loaders.taskSubmission.load({ customerId, taskId, id }),
  },
  Task: {
    __resolveReference: (reference, context, info) =>
      readRecord('Task', { customerId: reference.customerId, id: reference.id }, context, info),
    customer: resolveOwningCustomer,
    // Through the look-ahead's entry, so submissions started ahead are a cache hit.
    submissions: async (task, args, { loaders }) =>
      toConnection(await TASK_SUBMISSIONS.load(task, args, loaders)),
  },
  TaskSubmission: {
    task: (submission, _args, context, info) =>
      readRecord('Task', { customerId: submission.customerId, id: submission.taskId }, context, info),
  },
};
