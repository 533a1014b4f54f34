/** Resolvers of `tasks.graphql`: tasks and their submissions. */
import type { Resolvers } from '../generated/graphql.ts';
import { UpstreamProblemError } from '../upstream/errors.ts';
import type { CustomerDocument } from '../upstream/types.ts';
import { resolveOwningCustomer } from './customers.ts';
import { connectionOf, recordByArgs, recordReference, linkedRecord } from './resolver-shapes.ts';
import { TASK_SUBMISSIONS } from './look-ahead.ts';

export const taskResolvers: Resolvers = {
  Query: {
    task: recordByArgs('Task'),
    taskSubmission: (_parent, { customerId, taskId, id }, { loaders }) =>
      loaders.taskSubmission.load({ customerId, taskId, id }),
  },
  Task: {
    __resolveReference: recordReference('Task'),
    customer: resolveOwningCustomer,
    // Through the look-ahead's entry, so submissions started ahead are a cache hit.
    submissions: connectionOf(TASK_SUBMISSIONS),
  },
  TaskSubmission: {
    documents: async (submission, _args, { loaders }) => {
      const reads = await Promise.allSettled(
        submission.documentIds.map((id) =>
          loaders.item.CustomerDocument.load({ customerId: submission.customerId, id }),
        ),
      );
      // An archived document reads as not found: the submission still names it, the list leaves it out.
      const documents: CustomerDocument[] = [];
      for (const read of reads) {
        if (read.status === 'fulfilled') documents.push(read.value);
        else if (!(read.reason instanceof UpstreamProblemError && read.reason.status === 404))
          throw read.reason;
      }
      return documents;
    },
    task: linkedRecord('Task', (submission) => submission.taskId),
  },
};
